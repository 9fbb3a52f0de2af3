import { status as Status } from '@grpc/grpc-js';
import { VALUE_MAX_BYTES } from '../common/limits.js';
import { acquireFailure, LockClientError, LockLostError, lossFailure } from './errors.js';
import type { LockMode, LockRequest, PendingLock, RevokeRequest } from './lock.js';

/** Statuses that say the stream broke, not what the server decided: worth a resume. */
export const BREAKS: ReadonlySet<Status> = new Set([
  Status.UNAVAILABLE,
  Status.INTERNAL,
  Status.UNKNOWN,
  Status.CANCELLED,
]);

/**
 * How a request ended: the status the server gave it (or the client's own, for a broken
 * stream). `unknown`: the server no longer had it after a resume (its end was lost in the break).
 */
export interface RequestOutcome {
  readonly code: Status;
  readonly details: string;
  readonly unknown?: boolean;
}

/** What a holder may ask of the server besides a release. */
export type HolderRequest =
  { readonly kind: 'value'; readonly value: Buffer } | { readonly kind: 'downgrade' };

/**
 * What every lock request of the SDK keeps, whichever stream carries it (its own Acquire stream,
 * or the client's Session stream): the grant and its token, loss, doubt and revocation, and the
 * caller's callbacks. Subclasses speak the protocol and call the protected steps.
 */
export abstract class LockHandle implements PendingLock {
  readonly name: string;
  /** `read` once a write lock is downgraded. */
  mode: LockMode;
  #downgraded = false;
  protected readonly request: LockRequest;
  readonly #granted: Promise<bigint>;
  #grant!: { resolve: (token: bigint) => void; reject: (error: unknown) => void };
  #token: bigint | undefined;
  #tokens: ReadonlyArray<{ readonly name: string; readonly token: bigint }> = [];
  /** Made when someone asks for `lost` (most callers only acquire and release). */
  #lost: AbortController | undefined;
  #lossFailure: LockLostError | undefined;
  #inDoubt = false;
  #revokeRequested: RevokeRequest | undefined;
  readonly #confirmationWaiters: Array<{ resolve: () => void; reject: (error: unknown) => void }> = [];
  #released: Promise<void> | undefined;
  /** `setValue` calls not yet acknowledged, oldest first, with the value each sent. */
  readonly #pending: Array<{
    request: HolderRequest;
    resolve: () => void;
    reject: (error: unknown) => void;
  }> = [];

  constructor(request: LockRequest) {
    this.name = request.name;
    this.mode = request.mode;
    this.request = request;
    this.#granted = new Promise((resolve, reject) => (this.#grant = { resolve, reject }));
    // The caller awaits `granted()`; an unobserved rejection here is not a second failure.
    this.#granted.catch(() => {});
  }

  get token(): bigint {
    if (this.#token === undefined) throw new Error('INVARIANT: token read before the lock was granted');
    return this.#token;
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
    return new Promise((resolve, reject) => this.#confirmationWaiters.push({ resolve, reject }));
  }

  /** Resolves with the token once granted; rejects with the reason the request failed. */
  granted(): Promise<bigint> {
    return this.#granted;
  }

  abstract cancel(reason: unknown): void;

  release(): Promise<void> {
    this.#released ??= new Promise<void>((resolve, reject) => {
      if (this.#lossFailure) {
        reject(this.#lossFailure);
        return;
      }
      if (!this.isHeld()) {
        reject(new Error('INVARIANT: release() before the lock was granted'));
        return;
      }
      this.startRelease((error) => (error ? reject(error) : resolve()));
    });
    return this.#released;
  }

  setValue(value: Uint8Array | string): Promise<void> {
    const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : Buffer.from(value);
    if (bytes.byteLength > VALUE_MAX_BYTES) {
      return Promise.reject(
        new LockClientError(
          this.name,
          Status.INVALID_ARGUMENT,
          `value is ${bytes.byteLength} bytes; the limit is ${VALUE_MAX_BYTES}`,
        ),
      );
    }
    return this.#ask({ kind: 'value', value: bytes });
  }

  downgrade(): Promise<void> {
    if (this.mode !== 'write' && !this.#downgraded) {
      return Promise.reject(
        new LockClientError(
          this.name,
          Status.FAILED_PRECONDITION,
          `only a write lock can be downgraded, not a ${this.mode} lock; nothing is upgraded (release it and acquire a write lock)`,
        ),
      );
    }
    return this.#ask({ kind: 'downgrade' });
  }

  /** Sends a holder's request; resolves once the server has done it (see `acknowledged`). */
  #ask(request: HolderRequest): Promise<void> {
    if (this.#lossFailure) return Promise.reject(this.#lossFailure);
    if (!this.isHeld()) {
      return Promise.reject(
        new LockClientError(
          this.name,
          Status.FAILED_PRECONDITION,
          this.#released ? 'the lock was released' : 'the lock is not held yet',
        ),
      );
    }
    return new Promise((resolve, reject) => {
      this.#pending.push({ request, resolve, reject });
      this.sendHolderRequest(request);
    });
  }

  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.release();
    } catch (error) {
      if (!(error instanceof LockLostError)) throw error;
    }
  }

  /** Whether the lock is held and no release has begun. */
  protected abstract isHeld(): boolean;

  /** Asks the server to release the held lock; `done` settles `release()`. */
  protected abstract startRelease(done: (error?: LockClientError) => void): void;

  /** Sends `set_value` or `downgrade` (on the current stream: a resumed one gets `unacknowledged()` again). */
  protected abstract sendHolderRequest(request: HolderRequest): void;

  /**
   * The server did the oldest request of `kind` not yet acknowledged (`value_set`,
   * `downgraded`). The server applies them in the order sent, and acknowledges each on the
   * stream it came on.
   */
  protected acknowledged(kind: HolderRequest['kind']): void {
    const index = this.#pending.findIndex((pending) => pending.request.kind === kind);
    if (kind === 'downgrade') {
      this.mode = 'read';
      this.#downgraded = true;
    }
    if (index >= 0) this.#pending.splice(index, 1)[0]!.resolve();
  }

  /** Requests sent and not acknowledged, oldest first: sent again after a resume (doing one twice is harmless). */
  protected unacknowledged(): HolderRequest[] {
    return this.#pending.map((pending) => pending.request);
  }

  /** The request ended: what it did not do never will be. */
  #failPending(error: unknown): void {
    for (const pending of this.#pending.splice(0)) pending.reject(error);
  }

  /** The server granted the lock with `token` (a multi-lock: and `tokens`, one per lock). */
  protected grant(token: bigint, tokens: ReadonlyArray<{ name: string; fencingToken: bigint }> = []): void {
    this.#token = token;
    this.#tokens = tokens.map(({ name, fencingToken }) => ({ name, token: fencingToken }));
    this.#grant.resolve(token);
  }

  get tokens(): ReadonlyArray<{ readonly name: string; readonly token: bigint }> {
    return this.#tokens.length > 0 ? this.#tokens : [{ name: this.name, token: this.token }];
  }

  /** The request ended before a grant. */
  protected failGrant(error: unknown): void {
    this.#grant.reject(error);
  }

  /** The server cannot vouch for the held lock right now. */
  protected doubt(): void {
    if (this.#inDoubt) return;
    this.#inDoubt = true;
    this.request.onInDoubt?.();
  }

  /** A lock in doubt is confirmed held again. */
  protected confirm(): void {
    if (!this.#inDoubt) return;
    this.#inDoubt = false;
    for (const waiter of this.#confirmationWaiters.splice(0)) waiter.resolve();
    this.request.onConfirmed?.();
  }

  /** Someone asked for the lock back; told to the caller once, and again if a deadline is added. */
  protected revoke(request: RevokeRequest): void {
    const told = this.#revokeRequested;
    if (told && !(told.forceAt === undefined && request.forceAt !== undefined)) return;
    this.#revokeRequested = request;
    this.request.onRevokeRequested?.(request);
  }

  /**
   * The request is over with `outcome`, as it stood: still waiting (a failed acquire), held (a
   * loss), releasing (`done` settles the release: OK, or a loss), or cancelled (nobody waits).
   */
  protected settle(
    was: 'waiting' | 'held' | 'cancelled' | ((error?: LockClientError) => void),
    outcome: RequestOutcome,
  ): void {
    if (was === 'cancelled') return;
    if (this.#pending.length > 0) {
      this.#failPending(
        outcome.code === Status.OK
          ? new LockClientError(this.name, Status.FAILED_PRECONDITION, 'the lock was released first')
          : lossFailure(this.name, outcome),
      );
    }
    if (was === 'waiting') {
      // A request the server no longer has lost its place: retryable, like a refused call.
      this.failGrant(
        acquireFailure(
          this.name,
          outcome.unknown
            ? { code: Status.UNAVAILABLE, details: `lost its place in the queue: ${outcome.details}` }
            : outcome,
        ),
      );
      return;
    }
    if (was === 'held') {
      // The request ended while we held the lock and had not asked to release it.
      this.loseLock(lossFailure(this.name, outcome.code === Status.OK ? UNEXPECTED_END : outcome));
      return;
    }
    if (outcome.code === Status.OK) {
      was();
      return;
    }
    const failure = lossFailure(this.name, outcome);
    this.loseLock(failure);
    was(failure);
  }

  /** The held lock is lost: `lost` aborts, and whoever waits for a confirmation hears it. */
  protected loseLock(failure: LockLostError): void {
    this.#lossFailure = failure;
    this.#lost?.abort(failure);
    for (const waiter of this.#confirmationWaiters.splice(0)) waiter.reject(failure);
    this.#failPending(failure);
  }
}

/** Anything heartbeats go out on and come back from: an Acquire or a Session call. */
interface HeartbeatCall<T> {
  write(message: T): unknown;
  on(event: 'data', listener: () => void): unknown;
  off(event: 'data', listener: () => void): unknown;
}

/**
 * Sends `message` on `call` every `intervalMs` (0: none), and calls `silent` when the server has
 * said nothing for three intervals (a proxy may answer HTTP/2 pings for a server that is gone).
 * Returns a function that stops both.
 */
export function clientHeartbeat<T>(
  call: HeartbeatCall<T>,
  intervalMs: number,
  message: T,
  silent: (status: { code: Status; details: string }) => void,
): () => void {
  if (intervalMs === 0) return () => {};
  const ticker = setInterval(() => call.write(message), intervalMs);
  const silence = setTimeout(() => {
    silent({
      code: Status.UNAVAILABLE,
      details: `no message from the server for ${3 * intervalMs} ms (3 heartbeat intervals)`,
    });
  }, 3 * intervalMs);
  ticker.unref();
  silence.unref();
  const heard = (): void => {
    silence.refresh();
  };
  call.on('data', heard);
  return () => {
    clearInterval(ticker);
    clearTimeout(silence);
    call.off('data', heard);
  };
}

const UNEXPECTED_END = { code: Status.UNKNOWN, details: 'the server ended the request without a release' };

const RESUME_BACKOFF_MS = 100;
const RESUME_BACKOFF_MAX_MS = 1_000;

/**
 * Resuming after a break: new streams, backing off with jitter, until one gets through (`stop`)
 * or the grace is over, counted from the first break (the server counts from when it noticed,
 * which is no later).
 */
export class ResumeLoop {
  #state: { readonly timer: NodeJS.Timeout; attempts: number } | undefined;

  get active(): boolean {
    return this.#state !== undefined;
  }

  /** Calls `reopen` now on a first break, after a backoff on later ones; `giveUp` once `graceMs` has passed. */
  start(graceMs: number, reopen: () => void, giveUp: () => void): void {
    this.#state ??= {
      attempts: 0,
      timer: setTimeout(() => {
        this.#state = undefined;
        giveUp();
      }, graceMs),
    };
    const state = this.#state;
    const backoff = Math.min(RESUME_BACKOFF_MAX_MS, RESUME_BACKOFF_MS * 2 ** state.attempts) * Math.random();
    state.attempts += 1;
    setTimeout(
      () => {
        if (this.#state === state) reopen();
      },
      state.attempts === 1 ? 0 : backoff,
    ).unref();
  }

  stop(): void {
    if (this.#state) clearTimeout(this.#state.timer);
    this.#state = undefined;
  }
}
