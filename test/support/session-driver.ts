import * as grpc from '@grpc/grpc-js';
import type { Duration } from '../../src/gen/google/protobuf/duration.js';
import {
  LockMode,
  type LockServiceClient,
  type SessionAcquire,
  type SessionRequest,
  type SessionResponse,
} from '../../src/gen/lockstream/v1/lockstream.js';
import type { CallOutcome } from './lock-caller.js';

type Kind = NonNullable<SessionResponse['kind']>['$case'];

/** Orders the messages of every session in this process by when they arrived. */
let lastReceipt = 0;

/** A message as received, with its place in the arrival order across all sessions. */
export interface Received {
  readonly message: SessionResponse;
  readonly receipt: number;
}

/**
 * One raw Session stream, driven the way a test wants: every server message is recorded, and
 * each step (a request's `queued`, `acquired`, `ended`; the call's status) can be awaited.
 */
export class SessionDriver {
  readonly received: Received[] = [];
  /** Resolves with the call's final status; never rejects. */
  readonly outcome: Promise<CallOutcome>;
  readonly #call: grpc.ClientDuplexStream<SessionRequest, SessionResponse>;
  readonly #waiters: Array<() => void> = [];
  #ended: CallOutcome | undefined;

  constructor(client: LockServiceClient, first?: SessionRequest['kind']) {
    this.#call = client.session();
    this.outcome = new Promise((resolve) => {
      this.#call.on('status', (status: grpc.StatusObject) => {
        const requestEnded = status.metadata.get('lockstream-request').includes('ended');
        this.#ended = { code: status.code, details: status.details, requestEnded };
        resolve(this.#ended);
        this.#notify();
      });
    });
    this.#call.on('data', (message: SessionResponse) => {
      this.received.push({ message, receipt: ++lastReceipt });
      this.#notify();
    });
    this.#call.on('error', () => {});
    if (first) this.send(first);
  }

  /** Opens a session (`open`), with a grace and heartbeats in seconds. */
  static open(
    client: LockServiceClient,
    options: { resumeGrace?: Duration; heartbeatInterval?: Duration } = {},
  ): SessionDriver {
    return new SessionDriver(client, {
      $case: 'open',
      value: { resumeGrace: options.resumeGrace, heartbeatInterval: options.heartbeatInterval },
    });
  }

  /** Takes over the session `resumeToken` was issued for. */
  static resume(client: LockServiceClient, resumeToken: string, heartbeatInterval?: Duration): SessionDriver {
    return new SessionDriver(client, { $case: 'resume', value: { resumeToken, heartbeatInterval } });
  }

  send(kind: SessionRequest['kind']): void {
    this.#call.write({ kind });
  }

  acquire(requestId: number, request: Partial<Omit<SessionAcquire, 'requestId'>> & { name: string }): void {
    this.send({
      $case: 'acquire',
      value: {
        requestId,
        mode: LockMode.MUTEX,
        owner: '',
        waitTimeout: undefined,
        value: Buffer.alloc(0),
        limit: 0,
        locks: [],
        ...request,
      },
    });
  }

  release(requestId: number): void {
    this.send({ $case: 'release', value: { requestId } });
  }

  cancelRequest(requestId: number): void {
    this.send({ $case: 'cancel', value: { requestId } });
  }

  heartbeat(): void {
    this.send({ $case: 'heartbeat', value: {} });
  }

  halfClose(): void {
    this.#call.end();
  }

  /** Breaks the stream, as a client that dies or loses its connection does. */
  cancel(): void {
    this.#call.cancel();
  }

  /** The kinds of messages about `requestId`, in order. */
  kinds(requestId: number): Kind[] {
    return this.received
      .filter((r) => r.message.requestId === requestId)
      .flatMap((r) => (r.message.kind ? [r.message.kind.$case] : []));
  }

  /** Resolves with the session's resume token and grace (ms) from `opened`. */
  async opened(): Promise<{ token: string; graceMs: number }> {
    const { message } = await this.next(0, 'opened');
    if (message.kind?.$case !== 'opened') throw new Error('INVARIANT: not opened');
    const { resumeToken, resumeGrace } = message.kind.value;
    const graceMs = resumeGrace ? Number(resumeGrace.seconds) * 1000 + resumeGrace.nanos / 1e6 : 0;
    return { token: resumeToken, graceMs };
  }

  /** Resolves with the request's fencing token once it is acquired. */
  async acquired(requestId: number): Promise<bigint> {
    const { message } = await this.next(requestId, 'acquired');
    if (message.kind?.$case !== 'acquired') throw new Error('INVARIANT: not acquired');
    return message.kind.value.fencingToken;
  }

  /** Resolves with `ahead` of the request's n-th `queued` message. */
  async queued(requestId: number, index = 0): Promise<number> {
    const { message } = await this.next(requestId, 'queued', index);
    if (message.kind?.$case !== 'queued') throw new Error('INVARIANT: not queued');
    return message.kind.value.ahead;
  }

  /** Resolves with the request's end: its status code and message. */
  async ended(requestId: number): Promise<{ code: grpc.status; message: string }> {
    const { message } = await this.next(requestId, 'ended');
    if (message.kind?.$case !== 'ended') throw new Error('INVARIANT: not ended');
    return { code: message.kind.value.code, message: message.kind.value.message };
  }

  isAcquired(requestId: number): boolean {
    return this.kinds(requestId).includes('acquired');
  }

  /** Resolves with the n-th message of `kind` about `requestId` (0: the session) once it arrives. */
  async next(requestId: number, kind: Kind, index = 0): Promise<Received> {
    for (;;) {
      const found = this.received.filter(
        (r) => r.message.requestId === requestId && r.message.kind?.$case === kind,
      )[index];
      if (found) return found;
      if (this.#ended) {
        throw new Error(
          `session ended before ${kind} of request ${requestId}: ${grpc.status[this.#ended.code]} ${this.#ended.details}`,
        );
      }
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }

  #notify(): void {
    for (const wake of this.#waiters.splice(0)) wake();
  }
}
