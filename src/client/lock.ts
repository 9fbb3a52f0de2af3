import type { Duration } from '../gen/google/protobuf/duration.js';
import {
  LockMode as WireLockMode,
  type LockTarget,
  type SessionAcquire,
} from '../gen/lockstream/v1/lockstream.js';

/**
 * How a lock is shared: `mutex` and `write` are exclusive (and exclude each other), `read` is
 * shared; `semaphore` is counted (holders whose weights fit the limit, see AcquireOptions.limit).
 */
export type LockMode = 'mutex' | 'read' | 'write' | 'semaphore';

/**
 * A held lock. It is held from the moment `acquire` resolves until `release()` resolves, or
 * until `lost` aborts. Dispose it (`await using`) to release it on scope exit.
 */
export interface Lock extends AsyncDisposable {
  /** The lock's name, as passed to `acquire` (for `acquireAll`: the names, joined by " + "). */
  readonly name: string;
  /** How it is held: as asked, or `read` once a `write` lock was downgraded. */
  readonly mode: LockMode;
  /**
   * The fencing token: larger for every later holder of this lock. Pass it to the resources the
   * lock protects so they can refuse a holder whose lock was lost. A `bigint`: exact, never a
   * rounded number (`token.toString()` for JSON).
   */
  readonly token: bigint;
  /** Each lock's name and token: one for `acquire`, one per lock for `acquireAll`, in its order. */
  readonly tokens: ReadonlyArray<{ readonly name: string; readonly token: bigint }>;
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
   * Set once someone asked for the lock back (an operator's `lockstream revoke`): finish up and
   * release it. With `forceAt`, the lock is taken away then (`lost` aborts) if still held; a
   * request without one may later be replaced by one with a deadline (`onRevokeRequested` is
   * called again), which then stands.
   */
  readonly revokeRequested: RevokeRequest | undefined;
  /**
   * Publishes `value` with the lock (a string is sent as UTF-8; at most 1024 bytes): what
   * `describe` and `watch` show for this holder on every server, e.g. where to reach an
   * elected leader. Resolves once it is published; calls apply in order. Rejects with
   * `LockLostError` if the lock is lost first, and with an error if it was released.
   */
  setValue(value: Uint8Array | string): Promise<void>;
  /**
   * Turns a `write` lock into a `read` lock in one step: its token stays, nobody is granted in
   * between, and readers queued behind it that waited only for it are granted (a writer behind
   * it keeps waiting). `mode` is `read` once it resolves. Rejects without asking the server for
   * a `mutex` or `read` lock: nothing is upgraded (two readers upgrading at once would wait for
   * each other forever); release it and acquire a `write` lock instead.
   */
  downgrade(): Promise<void>;
  /**
   * Releases the lock. Resolves once the server confirms; idempotent (later calls return the
   * same promise). Rejects with `LockLostError` if the lock was lost first: the work done under
   * it may not have been exclusive.
   */
  release(): Promise<void>;
  /** Releases the lock; a lock that was already lost is not an error here (see `lost`). */
  [Symbol.asyncDispose](): Promise<void>;
}

/** A request to give a held lock back. */
export interface RevokeRequest {
  readonly reason: string;
  /** When the lock is taken away if still held; undefined: the request is cooperative only. */
  readonly forceAt: Date | undefined;
}

export const WIRE_MODES: Readonly<Record<LockMode, WireLockMode>> = {
  mutex: WireLockMode.MUTEX,
  read: WireLockMode.READ,
  write: WireLockMode.WRITE,
  semaphore: WireLockMode.SEMAPHORE,
};

/** One lock of `acquireAll`: its name, mode (default `mutex`), and a semaphore's limit and weight. */
export interface LockSpec {
  readonly name: string;
  readonly mode?: LockMode;
  readonly limit?: number;
  readonly weight?: number;
}

/** A request's `acquire`, named `requestId`. One object, no spread: it is made for every acquire. */
export function wireRequest(request: LockRequest, requestId: number): SessionAcquire {
  // A multi-lock names its locks in `locks` only.
  const locks = request.locks;
  return {
    requestId,
    name: locks ? '' : request.name,
    mode: locks ? WireLockMode.UNSPECIFIED : WIRE_MODES[request.mode],
    waitTimeout: request.waitTimeout === undefined ? undefined : toDuration(request.waitTimeout),
    owner: request.owner,
    value: request.value,
    limit: locks ? 0 : request.limit,
    weight: locks ? undefined : request.weight,
    locks: locks ? locks.map(lockTarget) : NO_TARGETS,
  };
}

/** Never changed: the `locks` of every single-lock request. */
const NO_TARGETS: LockTarget[] = [];

function lockTarget(lock: LockSpec): LockTarget {
  const mode = lock.mode ?? (lock.limit === undefined ? 'mutex' : 'semaphore');
  return { name: lock.name, mode: WIRE_MODES[mode], limit: lock.limit ?? 0, weight: lock.weight };
}

export interface LockRequest {
  readonly name: string;
  readonly mode: LockMode;
  /** ms; absent: wait until cancelled; 0: try once. */
  readonly waitTimeout: number | undefined;
  readonly owner: string;
  /** Published with the request; empty: none. */
  readonly value: Buffer;
  /** A semaphore's limit; 0 in the lock modes. */
  readonly limit: number;
  /** A semaphore request's weight; undefined: 1 (and in the lock modes). */
  readonly weight: number | undefined;
  /** A multi-lock's locks (`name` then only names the set); undefined for one lock. */
  readonly locks: readonly LockSpec[] | undefined;
  readonly onQueued: ((ahead: number) => void) | undefined;
  readonly onInDoubt: (() => void) | undefined;
  readonly onConfirmed: (() => void) | undefined;
  readonly onRevokeRequested: ((request: RevokeRequest) => void) | undefined;
}

/** Milliseconds as a protobuf Duration. */
export function toDuration(ms: number): Duration {
  const seconds = Math.floor(ms / 1000);
  return { seconds: BigInt(seconds), nanos: Math.round((ms - seconds * 1000) * 1e6) };
}

/** A protobuf Duration in milliseconds; 0 when absent. */
export function fromDuration(duration: Duration | undefined): number {
  return duration === undefined ? 0 : Number(duration.seconds) * 1000 + Math.floor(duration.nanos / 1e6);
}
