import * as grpc from '@grpc/grpc-js';
import {
  RecordServiceClient,
  type DeleteRecordResponse,
  type GetRecordResponse,
  type PutRecordResponse,
} from '../../src/gen/lockstream/v1/records.js';

/** A call's failure as the client sees it: its status code and details. */
export interface Refusal {
  readonly code: grpc.status;
  readonly details: string;
}

/** The RecordService over raw gRPC, as any client in any language calls it. */
export class RecordCaller {
  readonly client: RecordServiceClient;

  constructor(address: string, channel: grpc.ChannelCredentials = grpc.credentials.createInsecure()) {
    this.client = new RecordServiceClient(address, channel);
  }

  /** The new revision. */
  async put(
    name: string,
    key: string,
    value: string | Uint8Array,
    fencingToken: bigint,
    expectedRevision?: bigint,
    requestId = '',
  ): Promise<bigint> {
    const response = await call<PutRecordResponse>((done) =>
      this.client.putRecord(
        {
          name,
          key,
          value: Buffer.from(value),
          fencingToken,
          expectedRevision,
          requestId: Buffer.from(requestId),
        },
        done,
      ),
    );
    return response.revision;
  }

  get(name: string, key: string): Promise<GetRecordResponse> {
    return call((done) => this.client.getRecord({ name, key }, done));
  }

  async delete(name: string, key: string, fencingToken: bigint, expectedRevision?: bigint): Promise<boolean> {
    const response = await call<DeleteRecordResponse>((done) =>
      this.client.deleteRecord({ name, key, fencingToken, expectedRevision }, done),
    );
    return response.deleted;
  }

  close(): void {
    this.client.close();
  }
}

/** How `work` fails: its status and details; throws if it succeeds. */
export async function refusalOf(work: Promise<unknown>): Promise<Refusal> {
  try {
    await work;
  } catch (error) {
    const { code, details } = error as grpc.ServiceError;
    return { code, details };
  }
  throw new Error('expected the call to be refused, and it succeeded');
}

function call<T>(start: (done: (error: grpc.ServiceError | null, response: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) =>
    start((error, response) => (error ? reject(error) : resolve(response))),
  );
}
