/*
 * What a lock is to the SDK's users: the held Lock, its modes, a multi-lock's parts, a revocation.
 */
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

/** One lock of `acquireAll`: its name, mode (default `mutex`), and a semaphore's limit and weight. */
export interface LockSpec {
  readonly name: string;
  readonly mode?: LockMode;
  readonly limit?: number;
  readonly weight?: number;
}
