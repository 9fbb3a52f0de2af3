import {
  Client,
  Metadata,
  Server,
  ServerCredentials,
  credentials,
  status,
  type Interceptor,
  type ServiceError,
  type ServiceDefinition,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockClient } from '../../src/client/index.js';
import {
  FENCING_HEADER,
  HighWaterMarks,
  fencingInterceptor,
  fencingMetadata,
  fencingServerInterceptor,
  type FencingServerOptions,
  type MarkStore,
} from '../../src/fencing/index.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { scaled } from '../support/timing.js';

/**
 * The gRPC pair of lockstream/fencing: a real grpc-js server with fencingServerInterceptor, and
 * clients that carry tokens with fencingInterceptor, with locks from a real lockstream server.
 */

interface Note {
  readonly text: string;
}
const json = {
  serialize: (value: Note) => Buffer.from(JSON.stringify(value)),
  deserialize: (bytes: Buffer) => JSON.parse(bytes.toString()) as Note,
};
const method = (path: string, requestStream: boolean, responseStream: boolean) => ({
  path,
  requestStream,
  responseStream,
  requestSerialize: json.serialize,
  requestDeserialize: json.deserialize,
  responseSerialize: json.serialize,
  responseDeserialize: json.deserialize,
});
const WRITE = '/test.fencing.Resource/Write';
const UPLOAD = '/test.fencing.Resource/Upload';
const FOLLOW = '/test.fencing.Resource/Follow';
const service: ServiceDefinition = {
  Write: method(WRITE, false, false),
  Upload: method(UPLOAD, true, false),
  Follow: method(FOLLOW, false, true),
};

/** A fenced resource: what each handler was sent, in order. */
interface Resource {
  readonly address: string;
  readonly handled: string[];
  close(): Promise<void>;
}

async function startResource(options: FencingServerOptions = {}): Promise<Resource> {
  const handled: string[] = [];
  const server = new Server({ interceptors: [fencingServerInterceptor(options)] });
  const implementation: UntypedServiceImplementation = {
    Write: (call: { request: Note }, callback: (error: null, reply: Note) => void) => {
      handled.push(`write ${call.request.text}`);
      callback(null, { text: `wrote ${call.request.text}` });
    },
    Upload: (call: NodeJS.ReadableStream, callback: (error: null, reply: Note) => void) => {
      const texts: string[] = [];
      call.on('data', (note: Note) => texts.push(note.text));
      call.on('end', () => {
        handled.push(`upload ${texts.join(',')}`);
        callback(null, { text: `uploaded ${texts.length}` });
      });
    },
    Follow: (call: { request: Note; write(note: Note): void; end(): void }) => {
      handled.push(`follow ${call.request.text}`);
      for (const n of [1, 2, 3]) call.write({ text: `${call.request.text} ${n}` });
      call.end();
    },
  };
  server.addService(service, implementation);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  return {
    address: `127.0.0.1:${port}`,
    handled,
    close: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve())),
  };
}

const clients: Client[] = [];
function clientOf(address: string, interceptors: Interceptor[] = []): Client {
  const client = new Client(address, credentials.createInsecure(), { interceptors });
  clients.push(client);
  return client;
}

function write(client: Client, text: string, metadata = new Metadata()): Promise<Note> {
  return new Promise((resolve, reject) =>
    client.makeUnaryRequest(WRITE, json.serialize, json.deserialize, { text }, metadata, (error, reply) =>
      error ? reject(error) : resolve(reply!),
    ),
  );
}

function upload(client: Client, texts: string[]): Promise<Note> {
  return new Promise((resolve, reject) => {
    const call = client.makeClientStreamRequest(UPLOAD, json.serialize, json.deserialize, (error, reply) =>
      error ? reject(error) : resolve(reply!),
    );
    for (const text of texts) call.write({ text });
    call.end();
  });
}

async function follow(client: Client, text: string): Promise<string[]> {
  const call = client.makeServerStreamRequest(FOLLOW, json.serialize, json.deserialize, { text });
  const notes: string[] = [];
  for await (const note of call as AsyncIterable<Note>) notes.push(note.text);
  return notes;
}

/** The ServiceError a call rejected with. */
async function refusal(call: Promise<unknown>): Promise<ServiceError> {
  const error = await call.then(
    () => undefined,
    (error: unknown) => error as ServiceError,
  );
  expect(error, 'the call was refused').toBeDefined();
  return error!;
}

describe('the gRPC interceptors of lockstream/fencing', () => {
  let lockstream: ServerProcess;
  let locks: LockClient;
  const resources: Resource[] = [];

  beforeAll(async () => {
    lockstream = await startServerProcess([]);
    locks = new LockClient(lockstream.address);
  }, scaled(60_000));

  afterAll(async () => {
    locks?.close();
    await lockstream?.kill('SIGTERM');
  });

  afterEach(async () => {
    for (const client of clients.splice(0)) client.close();
    await Promise.all(resources.splice(0).map((resource) => resource.close()));
  });

  async function resource(options: FencingServerOptions = {}): Promise<Resource> {
    const started = await startResource(options);
    resources.push(started);
    return started;
  }

  it("admits each holder of a real lock in turn, then refuses the old holder's late call", async () => {
    const { address, handled } = await resource();
    const first = await locks.acquire('fencing/grpc/orders');
    const firstClient = clientOf(address, [fencingInterceptor(first)]);
    expect(await write(firstClient, 'a1')).toEqual({ text: 'wrote a1' });
    expect(await write(firstClient, 'a2')).toEqual({ text: 'wrote a2' }); // equal token: admitted
    await first.release();

    const second = await locks.acquire('fencing/grpc/orders');
    expect(second.token).toBeGreaterThan(first.token);
    const secondClient = clientOf(address, [fencingInterceptor(second)]);
    expect(await write(secondClient, 'b1')).toEqual({ text: 'wrote b1' });

    // The first holder, paused across the handover, wakes up and writes: refused.
    const error = await refusal(write(firstClient, 'a3'));
    expect(error.code).toBe(status.FAILED_PRECONDITION);
    expect(error.details).toBe(
      'stale fencing token for resource "fencing/grpc/orders": lock "fencing/grpc/orders" ' +
        `token ${first.token} is below the resource's high-water mark ${second.token}`,
    );
    expect(await write(secondClient, 'b2')).toEqual({ text: 'wrote b2' });
    expect(handled).toEqual(['write a1', 'write a2', 'write b1', 'write b2']);
    await second.release();
  });

  it('fences client and server streams too; a refused stream never reaches its handler', async () => {
    const { address, handled } = await resource();
    const newer = clientOf(address, [fencingInterceptor({ name: 'stream/lock', token: 20n })]);
    const older = clientOf(address, [fencingInterceptor({ name: 'stream/lock', token: 19n })]);
    expect(await upload(newer, ['x', 'y'])).toEqual({ text: 'uploaded 2' });
    expect(await follow(newer, 'f')).toEqual(['f 1', 'f 2', 'f 3']);

    const uploadError = await refusal(upload(older, ['stale-1', 'stale-2']));
    expect(uploadError.code).toBe(status.FAILED_PRECONDITION);
    expect(uploadError.details).toContain("token 19 is below the resource's high-water mark 20");
    const followError = await refusal(follow(older, 'stale'));
    expect(followError.code).toBe(status.FAILED_PRECONDITION);
    expect(handled).toEqual(['upload x,y', 'follow f']);
  });

  it('keeps one mark per resource, as the resource option maps calls to resources', async () => {
    const marks = new HighWaterMarks();
    const { address } = await resource({ marks, resource: (fence) => `db:${fence.name}` });
    await write(clientOf(address, [fencingInterceptor({ name: 'r/one', token: 50n })]), 'one');
    await write(clientOf(address, [fencingInterceptor({ name: 'r/two', token: 7n })]), 'two');
    expect(await marks.mark('db:r/one')).toEqual({ lockName: 'r/one', token: 50n });
    expect(await marks.mark('db:r/two')).toEqual({ lockName: 'r/two', token: 7n });

    const shared = await resource({ marks, resource: () => 'db:r/one' });
    const error = await refusal(
      write(clientOf(shared.address, [fencingInterceptor({ name: 'r/two', token: 99n })]), 'x'),
    );
    expect(error.code).toBe(status.FAILED_PRECONDITION);
    expect(error.details).toBe(
      'resource "db:r/one" is fenced by lock "r/one" (high-water mark 50), not by lock "r/two" (token 99)',
    );
  });

  it('refuses a malformed header with INVALID_ARGUMENT, naming what is wrong', async () => {
    const { address, handled } = await resource();
    const client = clientOf(address);
    const metadata = new Metadata();
    metadata.set(FENCING_HEADER, 'orders%2F42:abc');
    const error = await refusal(write(client, 'bad', metadata));
    expect(error.code).toBe(status.INVALID_ARGUMENT);
    expect(error.details).toBe(
      'malformed lockstream-fencing-token "orders%2F42:abc": the token "abc" is not a decimal integer',
    );
    expect(handled).toEqual([]);
  });

  it('refuses a call without the header by default, and passes it when told to', async () => {
    const strict = await resource();
    const error = await refusal(write(clientOf(strict.address), 'bare'));
    expect(error.code).toBe(status.FAILED_PRECONDITION);
    expect(error.details).toBe(
      `call ${WRITE} carries no lockstream-fencing-token; this resource takes fenced calls only`,
    );
    expect(strict.handled).toEqual([]);

    const lenient = await resource({ missingToken: 'pass' });
    expect(await write(clientOf(lenient.address), 'bare')).toEqual({ text: 'wrote bare' });
    // A fenced call is still checked there.
    await write(clientOf(lenient.address), 'fenced', fencingMetadata({ name: 'l', token: 4n }));
    const stale = await refusal(
      write(clientOf(lenient.address), 'stale', fencingMetadata({ name: 'l', token: 3n })),
    );
    expect(stale.code).toBe(status.FAILED_PRECONDITION);
    expect(lenient.handled).toEqual(['write bare', 'write fenced']);
  });

  it('checks only the methods it is told to', async () => {
    const { address, handled } = await resource({ methods: (path) => path !== FOLLOW });
    const client = clientOf(address);
    expect(await follow(client, 'read')).toEqual(['read 1', 'read 2', 'read 3']);
    expect((await refusal(write(client, 'w'))).code).toBe(status.FAILED_PRECONDITION);
    expect(handled).toEqual(['follow read']);
  });

  it('ends the call UNAVAILABLE, with a fixed message, when the mark store fails', async () => {
    const failing: MarkStore = {
      raise: () => Promise.reject(new Error('connection to the mark database refused')),
      get: () => Promise.resolve(undefined),
    };
    const seen: unknown[] = [];
    const { address, handled } = await resource({
      marks: new HighWaterMarks({ store: failing }),
      onError: (error) => seen.push(error),
    });
    const error = await refusal(
      write(clientOf(address, [fencingInterceptor({ name: 'x', token: 1n })]), 'w'),
    );
    expect(error.code).toBe(status.UNAVAILABLE);
    expect(error.details).toBe('the fencing check failed (the high-water mark store is unavailable)');
    expect(seen).toEqual([new Error('connection to the mark database refused')]);
    expect(handled).toEqual([]);
  });
});
