import * as grpc from '@grpc/grpc-js';
import {
  LockMode,
  LockServiceClient,
  type AcquireRequest,
  type AcquireResponse,
  type AcquireStart,
  type CheckTokenResponse,
  type DescribeLockResponse,
  type ListLocksRequest,
  type ListLocksResponse,
  type RevokeLockResponse,
  type SessionRequest,
  type SessionResponse,
  type WatchLockResponse,
} from '../../src/gen/lockstream/v1/lockstream.js';
import type { Duration } from '../../src/gen/google/protobuf/duration.js';

export { LockMode };

/** A promise with its resolve function outside (nice-grpc's test helper). */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

export interface CallOutcome {
  readonly code: grpc.status;
  readonly details: string;
  /** The server said it keeps nothing for the request (trailing `lockstream-request: ended`). */
  readonly requestEnded: boolean;
}

/** Orders the messages of every stream in this process by when they arrived. */
let lastReceipt = 0;

/** A place in the same order for something the test does (e.g. sends), to compare with receipts. */
export function nextReceipt(): number {
  return ++lastReceipt;
}

/** Which RPC a test's lock requests go through. */
export type LockRpc = 'acquire' | 'session';

/**
 * One lock request as a test drives it, over either RPC: every server message about it is
 * recorded (as Acquire's messages), and each step (queued, acquired, the final status) can be
 * awaited as an event.
 */
export abstract class RequestStream {
  readonly messages: AcquireResponse[] = [];
  /** For each message in `messages`, its place in the arrival order across all streams. */
  readonly receipts: number[] = [];
  /** Resolves with the final status; never rejects. */
  readonly outcome: Promise<CallOutcome>;
  readonly #waiters: Array<() => void> = [];
  #ended: CallOutcome | undefined;
  #endReceipt = 0;
  #endedAt: number | undefined;
  #settle!: (outcome: CallOutcome) => void;

  constructor() {
    this.outcome = new Promise((resolve) => (this.#settle = resolve));
  }

  /** Resolves with the fencing token once `acquired` arrives; rejects if the call ends first. */
  async acquired(): Promise<bigint> {
    const message = await this.#next((m) => m.kind?.$case === 'acquired');
    if (message.kind?.$case !== 'acquired') throw new Error('INVARIANT: not acquired');
    return message.kind.value.fencingToken;
  }

  /** Resolves with the `resumable` message's token and grace (ms) once it arrives. */
  async resumable(): Promise<{ token: string; graceMs: number }> {
    const message = await this.#next((m) => m.kind?.$case === 'resumable');
    if (message.kind?.$case !== 'resumable') throw new Error('INVARIANT: not resumable');
    const { resumeToken, resumeGrace } = message.kind.value;
    const graceMs = resumeGrace ? Number(resumeGrace.seconds) * 1000 + resumeGrace.nanos / 1e6 : 0;
    return { token: resumeToken, graceMs };
  }

  /** Resolves with `ahead` of the first `queued` message (the n-th with `index`). */
  async queued(index = 0): Promise<number> {
    const message = await this.#next((m, all) => all.filter(isQueued).indexOf(m) === index && isQueued(m));
    if (message.kind?.$case !== 'queued') throw new Error('INVARIANT: not queued');
    return message.kind.value.ahead;
  }

  /**
   * Resolves, once a message of `kind` has arrived (the n-th with `index`), with its place in the
   * arrival order across all streams: comparing two of them says which came first.
   */
  async receipt(kind: NonNullable<AcquireResponse['kind']>['$case'], index = 0): Promise<number> {
    const message = await this.#next(
      (m, all) => m.kind?.$case === kind && all.filter((x) => x.kind?.$case === kind).indexOf(m) === index,
    );
    return this.receipts[this.messages.indexOf(message)]!;
  }

  get isAcquired(): boolean {
    return this.messages.some((m) => m.kind?.$case === 'acquired');
  }

  /** Sends an Acquire message (or what stands for it on a session). */
  abstract send(message: AcquireRequest): void;
  /** Asks to release the lock (or withdraw the request) with a message. */
  abstract sendRelease(): void;
  /** Ends the client's side cleanly. */
  abstract halfClose(): void;
  /** Ends the stream abnormally, as a client that gives up or breaks does. */
  abstract cancel(): void;

  /**
   * Lets go as a client should (`release`, then half-close) and resolves with the outcome (OK
   * after `released` when the lock was held). `halfClose()` alone is a bare half-close.
   */
  async release(): Promise<CallOutcome> {
    this.sendRelease();
    this.halfClose();
    return this.outcome;
  }

  protected record(message: AcquireResponse): void {
    this.messages.push(message);
    this.receipts.push(++lastReceipt);
    this.#notify();
  }

  /** The final status's place in the arrival order across all streams (see `receipt`). */
  async outcomeReceipt(): Promise<number> {
    await this.outcome;
    return this.#endReceipt;
  }

  /** When the final status arrived (Date.now()), once it has. */
  get endedAt(): number | undefined {
    return this.#endedAt;
  }

  protected settle(outcome: CallOutcome): void {
    if (this.#ended) return;
    this.#endedAt = Date.now();
    this.#endReceipt = ++lastReceipt;
    this.#ended = outcome;
    this.#settle(outcome);
    this.#notify();
  }

  async #next(
    match: (message: AcquireResponse, all: AcquireResponse[]) => boolean,
  ): Promise<AcquireResponse> {
    for (;;) {
      const found = this.messages.find((m) => match(m, this.messages));
      if (found) return found;
      const ended = this.#ended;
      if (ended) {
        throw new Error(
          `call ended before the expected message: ${grpc.status[ended.code]} ${ended.details}`,
        );
      }
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }

  #notify(): void {
    for (const wake of this.#waiters.splice(0)) wake();
  }
}

/** The `start` message a test asked for, with the defaults filled in. */
function fullStart(start: Partial<AcquireStart>): AcquireStart {
  return {
    name: '',
    mode: LockMode.MUTEX,
    owner: '',
    waitTimeout: undefined,
    resumeGrace: undefined,
    heartbeatInterval: undefined,
    value: Buffer.alloc(0),
    limit: 0,
    locks: [],
    ...start,
  };
}

/** One raw Acquire stream. */
export class AcquireStream extends RequestStream {
  readonly #call: grpc.ClientDuplexStream<AcquireRequest, AcquireResponse>;

  constructor(client: LockServiceClient, first: Partial<AcquireStart> | AcquireRequest | null) {
    super();
    this.#call = client.acquire();
    this.#call.on('status', (status: grpc.StatusObject) => {
      const requestEnded = status.metadata.get('lockstream-request').includes('ended');
      this.settle({ code: status.code, details: status.details, requestEnded });
    });
    this.#call.on('data', (message: AcquireResponse) => this.record(message));
    // Errors arrive as the status too; without a listener they would be thrown.
    this.#call.on('error', () => {});
    if (first && 'kind' in first) {
      this.#call.write(first);
    } else if (first) {
      this.#call.write({ kind: { $case: 'start', value: fullStart(first) } });
    }
  }

  send(message: AcquireRequest): void {
    this.#call.write(message);
  }

  sendRelease(): void {
    this.#call.write({ kind: { $case: 'release', value: {} } });
  }

  halfClose(): void {
    this.#call.end();
  }

  cancel(): void {
    this.#call.cancel();
  }
}

/**
 * One lock request as the only request of its own Session stream, so that every Acquire case
 * runs unchanged over the Session RPC: `start` becomes `open` (grace, heartbeats) plus
 * `acquire` with request id 1, a session's `opened` with a token becomes `resumable`, the
 * request's `ended` becomes the outcome, and cancelling breaks the session's stream.
 */
export class SessionRequestStream extends RequestStream {
  static readonly REQUEST_ID = 1;
  readonly #call: grpc.ClientDuplexStream<SessionRequest, SessionResponse>;

  constructor(
    client: LockServiceClient,
    first: Partial<AcquireStart> | { resumeToken: string; heartbeatInterval?: Duration } | null,
  ) {
    super();
    this.#call = client.session();
    this.#call.on('status', (status: grpc.StatusObject) => {
      const requestEnded = status.metadata.get('lockstream-request').includes('ended');
      this.settle({ code: status.code, details: status.details, requestEnded });
    });
    this.#call.on('data', (message: SessionResponse) => this.#onMessage(message));
    this.#call.on('error', () => {});
    if (first && 'resumeToken' in first) {
      const { resumeToken, heartbeatInterval } = first;
      this.#call.write({ kind: { $case: 'resume', value: { resumeToken, heartbeatInterval } } });
    } else if (first) {
      const start = fullStart(first);
      this.#call.write({
        kind: {
          $case: 'open',
          value: { resumeGrace: start.resumeGrace, heartbeatInterval: start.heartbeatInterval },
        },
      });
      this.send({ kind: { $case: 'start', value: start } });
    }
  }

  #onMessage(message: SessionResponse): void {
    const kind = message.kind;
    switch (kind?.$case) {
      case 'opened':
        if (kind.value.resumeToken !== '') {
          this.record({ kind: { $case: 'resumable', value: kind.value } });
        }
        return;
      case 'ended':
        // The request is over: so is this one-request session.
        this.settle({ code: kind.value.code, details: kind.value.message, requestEnded: true });
        this.#call.end();
        return;
      case 'queued':
      case 'acquired':
      case 'released':
      case 'inDoubt':
      case 'confirmed':
      case 'revokeRequested':
      case 'valueSet':
      case 'downgraded':
      case 'heartbeat':
        if (message.requestId !== 0 || kind.$case === 'heartbeat') this.record({ kind });
        return;
      case 'resumed':
      case undefined:
        return;
    }
  }

  send(message: AcquireRequest): void {
    const kind = message.kind;
    switch (kind?.$case) {
      case 'start': {
        const { name, mode, waitTimeout, owner, value, limit, weight, locks } = kind.value;
        const requestId = SessionRequestStream.REQUEST_ID;
        this.#call.write({
          kind: {
            $case: 'acquire',
            value: { requestId, name, mode, waitTimeout, owner, value, limit, weight, locks },
          },
        });
        return;
      }
      case 'setValue':
        this.#call.write({
          kind: {
            $case: 'setValue',
            value: { requestId: SessionRequestStream.REQUEST_ID, value: kind.value.value },
          },
        });
        return;
      case 'downgrade':
        this.#call.write({
          kind: { $case: 'downgrade', value: { requestId: SessionRequestStream.REQUEST_ID } },
        });
        return;
      case 'release':
        this.sendRelease();
        return;
      case 'heartbeat':
        this.#call.write({ kind: { $case: 'heartbeat', value: {} } });
        return;
      case 'resume':
        this.#call.write({ kind: { $case: 'resume', value: kind.value } });
        return;
      case undefined:
        this.#call.write({ kind: undefined });
    }
  }

  sendRelease(): void {
    this.#call.write({ kind: { $case: 'release', value: { requestId: SessionRequestStream.REQUEST_ID } } });
  }

  halfClose(): void {
    this.#call.end();
  }

  cancel(): void {
    this.#call.cancel();
  }
}

function isQueued(message: AcquireResponse): boolean {
  return message.kind?.$case === 'queued';
}

/** A gRPC client for tests, with helpers to open Acquire streams. */
export class LockCaller {
  readonly client: LockServiceClient;

  /** Which RPC `open`, `resume` and `openEmpty` use. */
  readonly rpc: LockRpc;

  constructor(
    address: string,
    options: Partial<grpc.ClientOptions> = {},
    channel: grpc.ChannelCredentials = grpc.credentials.createInsecure(),
    rpc: LockRpc = 'acquire',
  ) {
    this.client = new LockServiceClient(address, channel, options);
    this.rpc = rpc;
  }

  open(start: Partial<AcquireStart>): RequestStream {
    return this.rpc === 'acquire'
      ? new AcquireStream(this.client, start)
      : new SessionRequestStream(this.client, start);
  }

  /** A stream that takes over the request (or session) `resumeToken` was issued for. */
  resume(resumeToken: string, heartbeatInterval?: { seconds: bigint; nanos: number }): RequestStream {
    return this.rpc === 'acquire'
      ? new AcquireStream(this.client, {
          kind: { $case: 'resume', value: { resumeToken, heartbeatInterval } },
        })
      : new SessionRequestStream(this.client, { resumeToken, heartbeatInterval });
  }

  describe(name: string): Promise<DescribeLockResponse> {
    return promisify((callback) => this.client.describeLock({ name }, callback));
  }

  list(request: Partial<ListLocksRequest> = {}): Promise<ListLocksResponse> {
    return promisify((callback) =>
      this.client.listLocks({ prefix: '', pageSize: 0, pageToken: '', ...request }, callback),
    );
  }

  async revoke(name: string, reason: string, forceAfterSeconds?: number): Promise<number> {
    const response = await promisify<RevokeLockResponse>((callback) =>
      this.client.revokeLock(
        {
          name,
          reason,
          forceAfter: forceAfterSeconds === undefined ? undefined : seconds(forceAfterSeconds),
        },
        callback,
      ),
    );
    return response.holdersAsked;
  }

  async checkToken(name: string, fencingToken: bigint): Promise<boolean> {
    const response = await promisify<CheckTokenResponse>((callback) =>
      this.client.checkToken({ name, fencingToken }, callback),
    );
    return response.held;
  }

  /** A WatchLock stream: every state it delivers, and a way to await one. */
  watch(name: string): LockWatch {
    return new LockWatch(this.client.watchLock({ name }));
  }

  /** A stream that has sent nothing yet. */
  openEmpty(): RequestStream {
    return this.rpc === 'acquire'
      ? new AcquireStream(this.client, null)
      : new SessionRequestStream(this.client, null);
  }

  close(): void {
    this.client.close();
  }
}

/** Seconds as a protobuf Duration. */
export function seconds(value: number): { seconds: bigint; nanos: number } {
  const whole = Math.floor(value);
  return { seconds: BigInt(whole), nanos: Math.round((value - whole) * 1e9) };
}

/** A unary call as a promise; rejects with the call's ServiceError (its `code` and `details`). */
function promisify<T>(
  call: (callback: (error: grpc.ServiceError | null, value?: T) => void) => unknown,
): Promise<T> {
  return new Promise((resolve, reject) => {
    call((error, value) => (error ? reject(error) : resolve(value as T)));
  });
}

/** A WatchLock stream, recording the states it delivers. */
export class LockWatch {
  readonly states: DescribeLockResponse[] = [];
  readonly #call: grpc.ClientReadableStream<WatchLockResponse>;
  readonly #waiters: Array<() => void> = [];
  #ended: CallOutcome | undefined;

  constructor(call: grpc.ClientReadableStream<WatchLockResponse>) {
    this.#call = call;
    call.on('data', (message: WatchLockResponse) => {
      if (message.state) this.states.push(message.state);
      this.#wake();
    });
    call.on('status', (status: grpc.StatusObject) => {
      this.#ended = { code: status.code, details: status.details, requestEnded: true };
      this.#wake();
    });
    call.on('error', () => {});
  }

  /** Resolves with the first state (from now on, or already delivered) that `match` accepts. */
  async until(match: (state: DescribeLockResponse) => boolean): Promise<DescribeLockResponse> {
    for (let seen = 0; ;) {
      for (; seen < this.states.length; seen += 1) if (match(this.states[seen]!)) return this.states[seen]!;
      if (this.#ended)
        throw new Error(`watch ended: ${grpc.status[this.#ended.code]} ${this.#ended.details}`);
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }

  /** Resolves with how the stream ended. */
  async ended(): Promise<CallOutcome> {
    while (!this.#ended) await new Promise<void>((resolve) => this.#waiters.push(resolve));
    return this.#ended;
  }

  cancel(): void {
    this.#call.cancel();
  }

  /** Stops reading: the stream backs up (HTTP/2 flow control) as a slow reader's does. */
  pause(): void {
    this.#call.pause();
  }

  resume(): void {
    this.#call.resume();
  }

  #wake(): void {
    for (const wake of this.#waiters.splice(0)) wake();
  }
}
