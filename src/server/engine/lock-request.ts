/*
 * What the engine is asked for and what it hands out: a request and its mode, how to wait,
 * and the held lock. Apart from the engine, so that what implements these and what uses them
 * depend on this file, not on each other.
 */
import { onAbort } from '../../common/abort.js';
import type { LockError } from '../lock-error.js';

export interface AcquireRequest {
  readonly name: string;
  readonly mode: LockMode;
  /** Absent: wait until `signal` aborts. 0: try once without queuing. */
  readonly waitTimeoutMs?: number | undefined;
  /** Free-form, for operators; recorded in the lock node. */
  readonly owner?: string | undefined;
  /** The client's address, recorded in the lock node. */
  readonly peer?: string | undefined;
  /** Published with the request (see Lease.setValue); at most VALUE_MAX_BYTES. */
  readonly value?: Uint8Array | undefined;
  /** Semaphore mode only (and required there): the lock's capacity. */
  readonly limit?: number | undefined;
  /** Semaphore mode only: how much of the capacity the request takes. Default 1. */
  readonly weight?: number | undefined;
  /**
   * A multi-lock: these locks, all or none (2 to MULTI_LOCK_MAX distinct names). `name` is then
   * only how logs and messages name the set, and `mode`, `limit`, `weight` come from each target.
   */
  readonly locks?: readonly LockTarget[] | undefined;
}

/** One lock of a multi-lock request. */
export interface LockTarget {
  readonly name: string;
  readonly mode: LockMode;
  readonly limit?: number | undefined;
  readonly weight?: number | undefined;
}

/**
 * Which lockstream session a node's request belongs to and what it asked for beyond its node's
 * name: written in every node of a resumable session, so that an instance that takes the
 * store's session over can rebuild each of its lockstream sessions from their nodes and let
 * their clients resume there (see SessionAdoption).
 */
/** The RPC that opened a session: an Acquire or Campaign stream is a session of one request. */
export type SessionKind = 'acquire' | 'session' | 'campaign';

export interface RequestTag {
  /** The session's resume key: a hash of its resume token (which is never stored). */
  readonly key: string;
  /** The request's id in its session. */
  readonly id: number;
  readonly kind: SessionKind;
  /** The session's resume grace, ms. */
  readonly grace: number;
  /** The authenticated caller who opened the session: only it may resume it. */
  readonly caller?: string | undefined;
  /** A multi-lock's name for its set, and this lock's place in the set as asked. */
  readonly set?: string | undefined;
  readonly part?: number | undefined;
  /**
   * When a request with a wait timeout stops waiting: epoch ms, by the wall clock of the
   * instance that made it. Another instance that takes the request over reads it with its own
   * clock, so it is bounded there by `wait` (see SessionAdoption).
   */
  readonly until?: number | undefined;
  /** The request's wait timeout, ms (with `until`). */
  readonly wait?: number | undefined;
}

/** How an in-process caller asks for a lock (see LockEngine.acquire). */
export interface AcquireOptions {
  /** Withdrawing it withdraws the request (its node is deleted) and fails it with its reason. */
  readonly withdrawal: Withdrawal;
  /** Written in the request's nodes: the resumable session it belongs to (see RequestTag). */
  readonly tag?: RequestTag | undefined;
  /** Called whenever the request is (still) waiting, with how many requests are ahead of it. */
  readonly onQueued?: (ahead: number) => void;
}

/** What a grant tells of the lock held: its name, how it is held, and its fencing token(s). */
export interface HeldLock {
  readonly name: string;
  /** How it is held now: `read` after a downgrade. */
  readonly mode: LockMode;
  /** The fencing token: the lock node's creation id, larger for every later holder. */
  readonly fencingToken: bigint;
  /** A multi-lock's token for each of its locks, in the order asked for; undefined for one lock. */
  readonly tokens?: ReadonlyArray<{ readonly name: string; readonly token: bigint }> | undefined;
}

/**
 * A lock held by an in-process caller (LockEngine.acquire). It stays held until `release()` or
 * until `lost` aborts.
 */
export interface Lease extends HeldLock, AsyncDisposable {
  /** Aborts (reason: `LockError('LOCK_LOST')`) if the lock is lost before it is released. */
  readonly lost: AbortSignal;
  /** Why the lock was lost (as `lost`'s reason), once it is; undefined while held or released. */
  readonly lossReason: LockError | undefined;
  /**
   * Calls `listener` once if the lock is lost (not after release); returns an unsubscribe
   * function. A listener that tells the holder returns a promise that settles once it has: a
   * lock taken by a forced revocation is freed only after the holder was told (see
   * `LOSS_TELLING_BOUND_MS`), so that no one is granted it before its old holder hears.
   */
  onLost(listener: (reason: LockError) => void | Promise<void>): () => void;
  /**
   * Whether the store can vouch for the lock right now. False while the store's session is in
   * doubt (e.g. disconnected from ZooKeeper): the lock may still be ours, or `lost` may follow.
   */
  readonly confirmed: boolean;
  /** Calls `listener` whenever `confirmed` changes while held; returns a function that unsubscribes. */
  onConfirmedChange(listener: (confirmed: boolean) => void): () => void;
  /** Deletes the lock node. Idempotent. Rejects with `LOCK_LOST` if the lock was lost first. */
  release(): Promise<void>;
  /** Set once someone asked the holder to release the lock (RevokeLock). */
  readonly revokeRequest: RevokeRequest | undefined;
  /** Calls `listener` when a revocation is requested; returns a function that unsubscribes. */
  onRevokeRequested(listener: (request: RevokeRequest) => void): () => void;
}

/**
 * A request to release a held lock, and when it is taken away if not released, as the holder's
 * instance saw it: the deadline RevokeLock set is a duration from then (see HeldRevocation).
 */
export interface RevokeRequest {
  readonly reason: string;
  /** What the holder is told: this instance's wall clock when it saw the request, plus the time left. Undefined: cooperative only. */
  readonly forceAt: Date | undefined;
  /** When this instance takes the lock away, on its monotonic clock (performance.now()); what it acts on. */
  readonly forceAtMonotonic: number | undefined;
}

/**
 * How an in-process caller withdraws its request (see LockEngine.acquire): `withdraw(reason)`,
 * once; the request then fails with that reason, its nodes deleted first.
 */
export class Withdrawal {
  #withdrawn = false;
  #reason: unknown;
  #listeners: Array<(reason: unknown) => void> = [];

  /** A withdrawal that follows `signal` (for callers that have one). */
  static following(signal: AbortSignal): Withdrawal {
    const withdrawal = new Withdrawal();
    if (signal.aborted) withdrawal.withdraw(signal.reason);
    else onAbort(signal, () => withdrawal.withdraw(signal.reason));
    return withdrawal;
  }

  get withdrawn(): boolean {
    return this.#withdrawn;
  }

  get reason(): unknown {
    return this.#reason;
  }

  /** Calls `listener` once with the reason when withdrawn (at once if it is); returns an unsubscribe function. */
  onWithdrawn(listener: (reason: unknown) => void): () => void {
    if (this.#withdrawn) {
      listener(this.#reason);
      return () => {};
    }
    this.#listeners.push(listener);
    return () => {
      this.#listeners = this.#listeners.filter((each) => each !== listener);
    };
  }

  withdraw(reason: unknown): void {
    if (this.#withdrawn) return;
    this.#withdrawn = true;
    this.#reason = reason;
    const listeners = this.#listeners;
    this.#listeners = [];
    for (const listener of listeners) listener(reason);
  }

  throwIfWithdrawn(): void {
    if (this.#withdrawn) throw this.#reason;
  }
}

/** One lock a request holds, for accounting (the live page's activity). */
export interface HeldRequest {
  readonly name: string;
  readonly owner: string;
  readonly token: bigint;
}

/** The locks `lease` holds for `request`: its lock, or each of a multi-lock's. */
export function heldRequests(request: AcquireRequest, lease: HeldLock): HeldRequest[] {
  const owner = request.owner ?? '';
  if (!lease.tokens) return [{ name: request.name, owner, token: lease.fencingToken }];
  return lease.tokens.map(({ name, token }) => ({ name, owner, token }));
}

/**
 * How a lock is shared. `mutex` and `write` are both exclusive and share one queue with `read`;
 * `semaphore` is counted (see holds() in queue-position.ts) and shares its queue with
 * semaphore requests of the same limit only.
 */
/** The lock modes, and `candidate`: an election's (Campaign), exclusive like a mutex. */
export type LockMode = 'mutex' | 'read' | 'write' | 'semaphore' | 'candidate';

export function isExclusive(mode: LockMode): boolean {
  return mode !== 'read';
}

/**
 * Which lock modes conflict: two requests for one lock conflict (the later waits for the
 * earlier) unless both are reads. The grant rule (holds() in queue-position.ts, the one fold
 * over a queue) is built on this. A semaphore request ahead of a lock request (which fails as
 * soon as it lists, see disagreement()) conflicts with it, as does a lock request ahead of a
 * semaphore request.
 */
export function conflicts(a: LockMode, b: LockMode): boolean {
  return isExclusive(a) || isExclusive(b);
}
