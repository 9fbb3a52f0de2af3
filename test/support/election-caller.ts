import * as grpc from '@grpc/grpc-js';
import {
  ElectionServiceClient,
  type CampaignRequest,
  type CampaignResponse,
  type CampaignStart,
  type LeaderResponse,
  type ObserveResponse,
} from '../../src/gen/lockstream/v1/election.js';
import type { CallOutcome } from './lock-caller.js';

/** Calls of the ElectionService against one server, as a test drives them. */
export class ElectionCaller {
  readonly client: ElectionServiceClient;

  constructor(address: string) {
    this.client = new ElectionServiceClient(address, grpc.credentials.createInsecure());
  }

  campaign(start: Partial<CampaignStart> & { name: string }): CampaignStream {
    return new CampaignStream(this.client, start);
  }

  observe(name: string, fromTerm?: bigint): ObserveStream {
    return new ObserveStream(this.client, name, fromTerm);
  }

  leader(name: string): Promise<LeaderResponse> {
    return new Promise((resolve, reject) =>
      this.client.leader({ name }, (error, response) => (error ? reject(error) : resolve(response))),
    );
  }

  proclaim(name: string, term: bigint, value: string): Promise<void> {
    return new Promise((resolve, reject) =>
      this.client.proclaim({ name, term, value: Buffer.from(value) }, (error) =>
        error ? reject(error) : resolve(),
      ),
    );
  }

  resign(name: string, term: bigint): Promise<void> {
    return new Promise((resolve, reject) =>
      this.client.resign({ name, term }, (error) => (error ? reject(error) : resolve())),
    );
  }

  close(): void {
    this.client.close();
  }
}

/** A status error's code and message, from a rejected unary call. */
export async function refusal(call: Promise<unknown>): Promise<{ code: grpc.status; details: string }> {
  try {
    await call;
  } catch (error) {
    const { code, details } = error as grpc.ServiceError;
    return { code, details };
  }
  throw new Error('the call succeeded');
}

/** Orders what every stream of this process received: a message's or an end's place in it. */
let lastReceipt = 0;

/** Waits for messages of a stream as events: each `next` resolves with the first message after the last one taken. */
class MessageQueue<T> {
  readonly all: T[] = [];
  /** For each message of `all`, its place in the order of everything received (see lastReceipt). */
  readonly receipts: number[] = [];
  /** The place of the stream's end in that order, once it ended. */
  endReceipt: number | undefined;
  #taken = 0;
  #waiters: Array<() => void> = [];
  #ended = false;

  push(message: T): void {
    this.all.push(message);
    this.receipts.push(++lastReceipt);
    this.#wake();
  }

  end(): void {
    this.endReceipt = ++lastReceipt;
    this.#ended = true;
    this.#wake();
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }

  /** The next message not taken yet; rejects if the stream ends first. */
  async next(): Promise<T> {
    for (;;) {
      if (this.#taken < this.all.length) return this.all[this.#taken++]!;
      if (this.#ended) throw new Error(`the stream ended; messages: ${JSON.stringify(this.all, replacer)}`);
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }
}

export function replacer(_key: string, value: unknown): unknown {
  if (typeof value === 'bigint') return `${value}n`;
  if (value instanceof Uint8Array) return Buffer.from(value).toString();
  return value;
}

/** One Campaign stream: its messages in order, and how the call ended. */
export class CampaignStream {
  readonly call: grpc.ClientDuplexStream<CampaignRequest, CampaignResponse>;
  readonly messages = new MessageQueue<CampaignResponse>();
  readonly outcome: Promise<CallOutcome>;

  constructor(client: ElectionServiceClient, start: Partial<CampaignStart> & { name: string }) {
    this.call = client.campaign();
    this.call.on('data', (message: CampaignResponse) => this.messages.push(message));
    this.outcome = new Promise((resolve) => {
      this.call.on('error', () => {});
      this.call.on('status', (status: grpc.StatusObject) => {
        this.messages.end();
        resolve({
          code: status.code,
          details: status.details,
          requestEnded: status.metadata.get('lockstream-request')[0] === 'ended',
        });
      });
    });
    this.call.write({
      kind: {
        $case: 'start',
        value: {
          value: Buffer.alloc(0),
          owner: '',
          waitTimeout: undefined,
          resumeGrace: undefined,
          heartbeatInterval: undefined,
          ...start,
        },
      },
    });
  }

  /** The next message's kind (its $case), and its value. */
  async next(): Promise<NonNullable<CampaignResponse['kind']>> {
    return (await this.messages.next()).kind!;
  }

  /** Where `elected` came in the order of everything received (see lastReceipt). */
  get electedReceipt(): number | undefined {
    const at = this.messages.all.findIndex((message) => message.kind?.$case === 'elected');
    return at === -1 ? undefined : this.messages.receipts[at];
  }

  /** Waits for `elected` (after any `queued` or `resumable`), and returns the term. */
  async elected(): Promise<bigint> {
    for (;;) {
      const kind = await this.next();
      if (kind.$case === 'elected') return kind.value.term;
      if (kind.$case !== 'queued' && kind.$case !== 'resumable')
        throw new Error(`expected elected, got ${JSON.stringify(kind, replacer)}`);
    }
  }

  resign(): void {
    this.call.write({ kind: { $case: 'resign', value: {} } });
  }

  cancel(): void {
    this.call.cancel();
  }
}

/** One Observe stream: every event in order. */
export class ObserveStream {
  readonly call: grpc.ClientReadableStream<ObserveResponse>;
  readonly events = new MessageQueue<NonNullable<ObserveResponse['kind']>>();
  readonly outcome: Promise<CallOutcome>;

  constructor(client: ElectionServiceClient, name: string, fromTerm?: bigint) {
    this.call = client.observe(fromTerm === undefined ? { name } : { name, fromTerm });
    this.call.on('data', (message: ObserveResponse) => this.events.push(message.kind!));
    this.outcome = new Promise((resolve) => {
      this.call.on('error', () => {});
      this.call.on('status', (status: grpc.StatusObject) => {
        this.events.end();
        resolve({ code: status.code, details: status.details, requestEnded: false });
      });
    });
  }

  next(): Promise<NonNullable<ObserveResponse['kind']>> {
    return this.events.next();
  }

  cancel(): void {
    this.call.cancel();
  }
}
