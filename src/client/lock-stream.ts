import { status as Status, type ClientDuplexStream, type StatusObject } from '@grpc/grpc-js';
import type { Duration } from '../gen/google/protobuf/duration.js';
import {
  LockMode as WireLockMode,
  type AcquireRequest,
  type AcquireResponse,
} from '../gen/lockstream/v1/lockstream.js';
import { acquireFailure, type LockClientError, LockLostError, lossFailure } from './errors.js';

/** How a lock is shared: `mutex` and `write` are exclusive (and exclude each other), `read` is shared. */
export type LockMode = 'mutex' | 'read' | 'write';

/**
 * A held lock. It is held from the moment `acquire` resolves until `release()` resolves, or
 * until `lost` aborts. Dispose it (`await using`) to release it on scope exit.
 */
export interface Lock extends AsyncDisposable {
  /** The lock's name, as passed to `acquire`. */
  readonly name: string;
  readonly mode: LockMode;
  /**
   * The fencing token: larger for every later holder of this lock. Pass it to the resources the
   * lock protects so they can refuse a holder whose lock was lost. A `bigint`: exact, never a
   * rounded number (`token.toString()` for JSON).
   */
  readonly token: bigint;
  /**
   * Aborts, with a `LockLostError` as its reason, if the lock is lost before `release()`: the
   * server says so, or the stream to the server breaks (a client that cannot see the server
   * must assume it no longer holds the lock). Never aborts after a successful release.
   */
  readonly lost: AbortSignal;
  /**
   * True while the server cannot vouch for the lock (it lost contact with its coordination back
   * end): the lock may still be held, or `lost` may follow. A careful holder pauses writes to
   * what the lock protects until `whenConfirmed()` resolves.
   */
  readonly inDoubt: boolean;
  /**
   * Resolves at once while the lock is not in doubt, else once the server confirms it again.
   * Rejects with `LockLostError` if the lock is lost (or was lost) instead.
   */
  whenConfirmed(): Promise<void>;
  /**
   * Releases the lock. Resolves once the server confirms; idempotent (later calls return the
   * same promise). Rejects with `LockLostError` if the lock was lost first: the work done under
   * it may not have been exclusive.
   */
  release(): Promise<void>;
  /** Releases the lock; a lock that was already lost is not an error here (see `lost`). */
  [Symbol.asyncDispose](): Promise<void>;
}

const WIRE_MODES: Record<LockMode, WireLockMode> = {
  mutex: WireLockMode.MUTEX,
  read: WireLockMode.READ,
  write: WireLockMode.WRITE,
};

export interface LockRequest {
  readonly name: string;
  readonly mode: LockMode;
  /** ms; absent: wait until cancelled; 0: try once. */
  readonly waitTimeout: number | undefined;
  readonly owner: string;
  readonly onQueued: ((ahead: number) => void) | undefined;
  readonly onInDoubt: (() => void) | undefined;
  readonly onConfirmed: (() => void) | undefined;
}

type Phase =
  | { readonly kind: 'waiting' }
  | { readonly kind: 'held' }
  | { readonly kind: 'releasing'; readonly done: (error?: LockClientError) => void }
  | { readonly kind: 'ended' };

/**
 * One Acquire stream, from `start` to its final status: the lock while it is held. Follows the
 * server's messages (`queued`, `acquired`, `released`) and turns the final status into the
 * outcome that matters to the caller at that moment (a failed acquire, a release, a loss).
 */
export class LockStream implements Lock {
  readonly name: string;
  readonly mode: LockMode;
  readonly #call: ClientDuplexStream<AcquireRequest, AcquireResponse>;
  readonly #lost = new AbortController();
  readonly #granted: Promise<bigint>;
  #grant!: { resolve: (token: bigint) => void; reject: (error: unknown) => void };
  #token: bigint | undefined;
  #phase: Phase = { kind: 'waiting' };
  #released: Promise<void> | undefined;
  #inDoubt = false;
  readonly #confirmationWaiters: Array<{ resolve: () => void; reject: (error: unknown) => void }> = [];

  constructor(call: ClientDuplexStream<AcquireRequest, AcquireResponse>, request: LockRequest) {
    this.name = request.name;
    this.mode = request.mode;
    this.#call = call;
    this.#granted = new Promise((resolve, reject) => (this.#grant = { resolve, reject }));
    // The caller awaits `granted()`; an unobserved rejection here is not a second failure.
    this.#granted.catch(() => {});
    call.on('data', (message: AcquireResponse) => this.#onMessage(message, request));
    call.on('status', (status: StatusObject) => this.#onStatus(status));
    // Every failure also arrives as the status; without a listener grpc-js would throw it.
    call.on('error', () => {});
    call.write({
      kind: {
        $case: 'start',
        value: {
          name: request.name,
          mode: WIRE_MODES[request.mode],
          waitTimeout: request.waitTimeout === undefined ? undefined : toDuration(request.waitTimeout),
          owner: request.owner,
        },
      },
    });
  }

  get token(): bigint {
    if (this.#token === undefined) throw new Error('INVARIANT: token read before the lock was granted');
    return this.#token;
  }

  get lost(): AbortSignal {
    return this.#lost.signal;
  }

  get inDoubt(): boolean {
    return this.#inDoubt;
  }

  whenConfirmed(): Promise<void> {
    if (this.#lost.signal.aborted) return Promise.reject(this.#lost.signal.reason as Error);
    if (!this.#inDoubt) return Promise.resolve();
    return new Promise((resolve, reject) => this.#confirmationWaiters.push({ resolve, reject }));
  }

  /** Resolves with the token once granted; rejects with the call's failure. */
  granted(): Promise<bigint> {
    return this.#granted;
  }

  /** Gives up waiting, rejecting `granted()` with `reason`; the server deletes the request's node. */
  cancel(reason: unknown): void {
    if (this.#phase.kind !== 'waiting') return;
    this.#phase = { kind: 'ended' };
    this.#grant.reject(reason);
    this.#call.cancel();
  }

  release(): Promise<void> {
    this.#released ??= new Promise<void>((resolve, reject) => {
      if (this.#lost.signal.aborted) {
        reject(this.#lost.signal.reason);
        return;
      }
      if (this.#phase.kind !== 'held') {
        reject(new Error('INVARIANT: release() before the lock was granted'));
        return;
      }
      this.#phase = {
        kind: 'releasing',
        done: (error) => (error ? reject(error) : resolve()),
      };
      this.#call.end();
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

  #onMessage(message: AcquireResponse, request: LockRequest): void {
    const kind = message.kind;
    switch (kind?.$case) {
      case 'queued':
        if (this.#phase.kind === 'waiting') request.onQueued?.(kind.value.ahead);
        return;
      case 'acquired':
        if (this.#phase.kind !== 'waiting') return;
        this.#token = kind.value.fencingToken;
        this.#phase = { kind: 'held' };
        this.#grant.resolve(kind.value.fencingToken);
        return;
      case 'inDoubt':
        if (this.#phase.kind === 'waiting' || this.#inDoubt) return;
        this.#inDoubt = true;
        request.onInDoubt?.();
        return;
      case 'confirmed':
        if (!this.#inDoubt) return;
        this.#inDoubt = false;
        for (const waiter of this.#confirmationWaiters.splice(0)) waiter.resolve();
        request.onConfirmed?.();
        return;
      case 'released':
      case undefined:
        // `released` is followed by the OK status, which settles the release; a message kind
        // this client does not know (from a newer server) is ignored.
        return;
    }
  }

  #loseLock(failure: LockLostError): void {
    this.#lost.abort(failure);
    for (const waiter of this.#confirmationWaiters.splice(0)) waiter.reject(failure);
  }

  #onStatus(status: StatusObject): void {
    const phase = this.#phase;
    this.#phase = { kind: 'ended' };
    switch (phase.kind) {
      case 'waiting':
        this.#grant.reject(acquireFailure(this.name, status));
        return;
      case 'held': {
        // The stream ended while we held the lock and had not asked to release it.
        this.#loseLock(lossFailure(this.name, status.code === Status.OK ? unexpectedEnd : status));
        return;
      }
      case 'releasing': {
        if (status.code === Status.OK) {
          phase.done();
          return;
        }
        const failure = lossFailure(this.name, status);
        this.#loseLock(failure);
        phase.done(failure);
        return;
      }
      case 'ended':
        return;
    }
  }
}

const unexpectedEnd = { code: Status.UNKNOWN, details: 'the server ended the stream without a release' };

/** Milliseconds as a protobuf Duration. */
function toDuration(ms: number): Duration {
  const seconds = Math.floor(ms / 1000);
  return { seconds: BigInt(seconds), nanos: Math.round((ms - seconds * 1000) * 1e6) };
}
