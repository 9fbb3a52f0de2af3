import { status as Status } from '@grpc/grpc-js';
import { VALUE_MAX_BYTES } from '../common/limits.js';
import type { SessionResponse } from '../gen/lockstream/v1/lockstream.js';
import {
  acquireFailure,
  LockClientClosedError,
  LockClientError,
  LockLostError,
  lossFailure,
} from './errors.js';
import type { Lock, LockMode, LockRequest, RevokeRequest } from './lock.js';
import type { EndStatus } from './resumable-stream.js';

/** What a request asks of the server after its `acquire`: a holder's asks, and letting go. */
export type RequestMessage =
  | { readonly kind: 'acquire' | 'release' | 'cancel' | 'downgrade' }
  | { readonly kind: 'value'; readonly value: Buffer };

/** A holder's asks, each acknowledged by the server (`value_set`, `downgraded`). */
type HolderRequest = Extract<RequestMessage, { kind: 'value' }> | typeof DOWNGRADE;

const ACQUIRE: RequestMessage = { kind: 'acquire' };
const RELEASE: RequestMessage = { kind: 'release' };
const CANCEL: RequestMessage = { kind: 'cancel' };
const DOWNGRADE = { kind: 'downgrade' } as const;

/** The stream a request travels on, as the request sees it. */
export interface RequestCarrier {
  /** Sends `message` about `lock`, or, while the stream is resumed, once it is back. */
  send(lock: LockHandle, message: RequestMessage): void;
  /** The request is over: its id is free. */
  forget(lock: LockHandle): void;
}

/**
 * How a request ended: its status (the stream's, when the stream ended with it). `unknown`: the
 * server no longer had it after a resume (its end was lost in the break). `clientClosed`: its
 * LockClient was closed.
 */
type RequestOutcome = EndStatus & { readonly unknown?: boolean; readonly clientClosed?: boolean };

const CLIENT_CLOSED: RequestOutcome = {
  code: Status.CANCELLED,
  details: 'the LockClient was closed',
  clientClosed: true,
};

/** waiting → held → releasing → ended, or waiting → cancelled → ended. */
type Phase = 'waiting' | 'cancelled' | 'held' | 'releasing' | 'ended';

const UNEXPECTED_END = { code: Status.UNKNOWN, details: 'the server ended the request without a release' };

/**
 * One lock request of the SDK, from `acquire` to its end: the lock while it is held. The same
 * on either RPC (an Acquire stream carries one request, a Session stream many): its carrier
 * feeds it the server's messages about it (`onMessage`) and the stream's breaks, resumes and
 * end; it keeps the grant and its token, loss, doubt, revocation and the caller's callbacks.
 */
export class LockHandle implements Lock {
  /** The request's number on its stream. */
  readonly id: number;
  readonly name: string;
  /** `read` once a write lock is downgraded. */
  mode: LockMode;
  readonly request: LockRequest;
  /** Whether the server may have heard of this request (its `acquire` went out on a stream). */
  sentToServer = false;
  readonly #carrier: RequestCarrier;
  #phase: Phase = 'waiting';
  #downgraded = false;
  readonly #granted: Promise<bigint>;
  #grant!: { resolve: (token: bigint) => void; reject: (error: unknown) => void };
  #token: bigint | undefined;
  #tokens: ReadonlyArray<{ readonly name: string; readonly token: bigint }> = [];
  /** Made when someone asks for `lost` (most callers only acquire and release). */
  #lost: AbortController | undefined;
  #lossFailure: LockLostError | undefined;
  #inDoubt = false;
  #revokeRequested: RevokeRequest | undefined;
  #confirmationWaiters: Array<{ resolve: () => void; reject: (error: unknown) => void }> | undefined;
  #released: Promise<void> | undefined;
  /** Settles `release()` once the request ends (set while releasing). */
  #releaseDone: ((error?: LockClientError) => void) | undefined;
  /** Holder's asks not yet acknowledged, oldest first. */
  #pending:
    Array<{ request: HolderRequest; resolve: () => void; reject: (error: unknown) => void }> | undefined;

  constructor(carrier: RequestCarrier, id: number, request: LockRequest) {
    this.#carrier = carrier;
    this.id = id;
    this.name = request.name;
    this.mode = request.mode;
    this.request = request;
    // No `.catch` guard: the LockClient awaits `granted()` as soon as the handle is made.
    this.#granted = new Promise((resolve, reject) => (this.#grant = { resolve, reject }));
  }

  get token(): bigint {
    if (this.#token === undefined) throw new Error('INVARIANT: token read before the lock was granted');
    return this.#token;
  }

  get tokens(): ReadonlyArray<{ readonly name: string; readonly token: bigint }> {
    return this.#tokens.length > 0 ? this.#tokens : [{ name: this.name, token: this.token }];
  }

  get lost(): AbortSignal {
    if (!this.#lost) {
      this.#lost = new AbortController();
      if (this.#lossFailure) this.#lost.abort(this.#lossFailure);
    }
    return this.#lost.signal;
  }

  get revokeRequested(): RevokeRequest | undefined {
    return this.#revokeRequested;
  }

  get inDoubt(): boolean {
    return this.#inDoubt;
  }

  whenConfirmed(): Promise<void> {
    if (this.#lossFailure) return Promise.reject(this.#lossFailure);
    if (!this.#inDoubt) return Promise.resolve();
    return new Promise((resolve, reject) => (this.#confirmationWaiters ??= []).push({ resolve, reject }));
  }

  /** Resolves with the token once granted; rejects with the reason the request failed. */
  granted(): Promise<bigint> {
    return this.#granted;
  }

  /** Gives up waiting, rejecting `granted()` with `reason`; the server withdraws the request. */
  cancel(reason: unknown): void {
    if (this.#phase !== 'waiting') return;
    this.#phase = 'cancelled';
    this.#grant.reject(reason);
    this.#carrier.send(this, CANCEL);
  }

  release(): Promise<void> {
    this.#released ??= new Promise<void>((resolve, reject) => {
      if (this.#lossFailure) {
        reject(this.#lossFailure);
        return;
      }
      if (this.#phase !== 'held') {
        reject(new Error('INVARIANT: release() before the lock was granted'));
        return;
      }
      this.#phase = 'releasing';
      this.#releaseDone = (error) => (error ? reject(error) : resolve());
      this.#carrier.send(this, RELEASE);
    });
    return this.#released;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.release();
    } catch (error) {
      if (!(error instanceof LockLostError)) throw error;
    }
  }

  setValue(value: Uint8Array | string): Promise<void> {
    const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : Buffer.from(value);
    if (bytes.byteLength > VALUE_MAX_BYTES) {
      return this.#refuse(
        Status.INVALID_ARGUMENT,
        `value is ${bytes.byteLength} bytes; the limit is ${VALUE_MAX_BYTES}`,
      );
    }
    return this.#ask({ kind: 'value', value: bytes });
  }

  downgrade(): Promise<void> {
    if (this.mode !== 'write' && !this.#downgraded) {
      return this.#refuse(
        Status.FAILED_PRECONDITION,
        `only a write lock can be downgraded, not a ${this.mode} lock; nothing is upgraded (release it and acquire a write lock)`,
      );
    }
    return this.#ask(DOWNGRADE);
  }

  /** The message that queues the request (marks it as possibly known to the server). */
  acquireMessage(): RequestMessage {
    this.sentToServer = true;
    return ACQUIRE;
  }

  /** A message from the server about this request, in the Session RPC's terms. */
  onMessage(kind: SessionResponse['kind']): void {
    const phase = this.#phase;
    switch (kind?.$case) {
      case 'queued':
        if (phase === 'waiting') this.request.onQueued?.(kind.value.ahead);
        return;
      case 'acquired':
        if (phase === 'waiting') {
          this.#phase = 'held';
          this.#token = kind.value.fencingToken;
          if (kind.value.tokens.length > 0) {
            this.#tokens = kind.value.tokens.map(({ name, fencingToken }) => ({ name, token: fencingToken }));
          }
          this.#grant.resolve(kind.value.fencingToken);
        }
        // Otherwise: the report of a resumed stream (the same token), or a grant that crossed
        // our cancel (the server releases it on the cancel).
        return;
      case 'inDoubt':
        if (phase === 'held' || phase === 'releasing') this.#doubt();
        return;
      case 'confirmed':
        this.#confirm();
        return;
      case 'revokeRequested':
        if (phase === 'held') this.#revoke({ reason: kind.value.reason, forceAt: kind.value.forceAt });
        return;
      case 'ended': {
        const code: Status = kind.value.code;
        this.#end({ code, details: kind.value.message });
        return;
      }
      case 'valueSet':
        this.#acknowledged('value');
        return;
      case 'downgraded':
        this.mode = 'read';
        this.#downgraded = true;
        this.#acknowledged('downgrade');
        return;
      case 'released':
      case 'opened':
      case 'resumed':
      case 'heartbeat':
      case undefined:
        // `released` is followed by the request's end, which settles the release; the others
        // are about the stream; a kind this client does not know (a newer server's) is ignored.
        return;
    }
  }

  /** The stream broke and is being resumed: a held lock is in doubt meanwhile. */
  streamBroke(): void {
    if (this.#phase === 'held' || this.#phase === 'releasing') this.#doubt();
  }

  /** The resumed stream reported this request: still ours. Re-sends what the break may have lost. */
  resumed(): void {
    const phase = this.#phase;
    if (phase === 'held' || phase === 'releasing') this.#confirm();
    if (this.#pending) for (const { request } of this.#pending) this.#carrier.send(this, request);
    if (phase === 'releasing') this.#carrier.send(this, RELEASE);
    if (phase === 'cancelled') this.#carrier.send(this, CANCEL);
  }

  /** Still waiting for its grant (not let go): asking again for a request the server lost is harmless. */
  get waiting(): boolean {
    return this.#phase === 'waiting';
  }

  /** The resumed stream does not have this request: it ended, and its end was lost. */
  unknownAfterResume(): void {
    // Let go before the break: gone because the server did what was asked (its `ended` was lost).
    if (this.#phase === 'releasing' || this.#phase === 'cancelled') {
      this.#end({ code: Status.OK, details: '' });
      return;
    }
    this.#end({
      code: Status.NOT_FOUND,
      details: 'the server no longer has this request after its stream was resumed',
      unknown: true,
    });
  }

  /** The stream ended with `status`: so did this request. */
  streamEnded(status: EndStatus): void {
    this.#end(status);
  }

  /** The LockClient was closed (the request was given up on the stream). */
  clientClosed(): void {
    this.#end(CLIENT_CLOSED);
  }

  /** Sends a holder's ask; resolves once the server has done it (see `#acknowledged`). */
  #ask(request: HolderRequest): Promise<void> {
    if (this.#lossFailure) return Promise.reject(this.#lossFailure);
    if (this.#phase !== 'held') {
      return this.#refuse(
        Status.FAILED_PRECONDITION,
        this.#released ? 'the lock was released' : 'the lock is not held yet',
      );
    }
    return new Promise((resolve, reject) => {
      (this.#pending ??= []).push({ request, resolve, reject });
      this.#carrier.send(this, request);
    });
  }

  /** A holder's ask refused on this side, before anything is sent. */
  #refuse(code: Status, details: string): Promise<never> {
    return Promise.reject(new LockClientError(this.name, code, details));
  }

  /**
   * The server did the oldest ask of `kind` not yet acknowledged. It applies them in the order
   * sent, and acknowledges each on the stream it came on; one sent twice (after a resume) is
   * harmless.
   */
  #acknowledged(kind: HolderRequest['kind']): void {
    const pending = this.#pending;
    const index = pending ? pending.findIndex((ask) => ask.request.kind === kind) : -1;
    if (index >= 0) pending!.splice(index, 1)[0]!.resolve();
  }

  #doubt(): void {
    if (this.#inDoubt) return;
    this.#inDoubt = true;
    this.request.onInDoubt?.();
  }

  #confirm(): void {
    if (!this.#inDoubt) return;
    this.#inDoubt = false;
    const waiters = this.#confirmationWaiters;
    this.#confirmationWaiters = undefined;
    if (waiters) for (const waiter of waiters) waiter.resolve();
    this.request.onConfirmed?.();
  }

  /** Someone asked for the lock back; told to the caller once, and again if a deadline is added. */
  #revoke(request: RevokeRequest): void {
    const told = this.#revokeRequested;
    if (told && !(told.forceAt === undefined && request.forceAt !== undefined)) return;
    this.#revokeRequested = request;
    this.request.onRevokeRequested?.(request);
  }

  /**
   * The request is over with `outcome`, as it stood: still waiting (a failed acquire), held (a
   * loss), releasing (OK settles the release; anything else is a loss), or cancelled (nobody
   * waits).
   */
  #end(outcome: RequestOutcome): void {
    const phase = this.#phase;
    if (phase === 'ended') return;
    this.#phase = 'ended';
    this.#carrier.forget(this);
    if (phase === 'cancelled') return;
    if (this.#pending && this.#pending.length > 0) {
      this.#failPending(
        outcome.code === Status.OK
          ? new LockClientError(this.name, Status.FAILED_PRECONDITION, 'the lock was released first')
          : lossFailure(this.name, outcome),
      );
    }
    if (phase === 'waiting') {
      if (outcome.clientClosed) {
        this.#grant.reject(new LockClientClosedError(this.name));
        return;
      }
      // A request the server no longer has lost its place: retryable, like a refused call.
      this.#grant.reject(
        acquireFailure(
          this.name,
          outcome.unknown
            ? { code: Status.UNAVAILABLE, details: `lost its place in the queue: ${outcome.details}` }
            : outcome,
        ),
      );
      return;
    }
    if (phase === 'held') {
      // The request ended while we held the lock and had not asked to release it.
      this.#lose(lossFailure(this.name, outcome.code === Status.OK ? UNEXPECTED_END : outcome));
      return;
    }
    const done = this.#releaseDone!;
    if (outcome.code === Status.OK) {
      done();
      return;
    }
    const failure = lossFailure(this.name, outcome);
    this.#lose(failure);
    done(failure);
  }

  /** The held lock is lost: `lost` aborts, and whoever waits for a confirmation hears it. */
  #lose(failure: LockLostError): void {
    this.#lossFailure = failure;
    this.#lost?.abort(failure);
    const waiters = this.#confirmationWaiters;
    this.#confirmationWaiters = undefined;
    if (waiters) for (const waiter of waiters) waiter.reject(failure);
    this.#failPending(failure);
  }

  /** The request ended: what it did not do never will be. */
  #failPending(error: unknown): void {
    const pending = this.#pending;
    this.#pending = undefined;
    if (pending) for (const ask of pending) ask.reject(error);
  }
}
