/*
 * The revocation rule. RevokeLock asks a holder to release its lock, cooperatively or with a
 * deadline (force_after). A holder keeps the first request it was told, except that a request
 * with a deadline escalates one without: the holder is told again, with the deadline, before
 * the deadline can take the lock. A deadline, once told, stands: a later RevokeLock neither
 * moves it (earlier or later) nor removes it. So a holder never loses its lock before a
 * deadline it was told, nor at one it was never told.
 *
 * No wall clock decides when. RevokeLock records its deadline as a duration (forceAfterMs); the
 * holder's instance, as it sees the request, tells the holder its own wall clock plus that
 * duration and takes the lock away that long after, by its monotonic clock. Instances whose
 * clocks disagree, or a clock stepped meanwhile, move neither the deadline nor its timer; the
 * deadline comes later than the revoking call by how late the holder's instance saw it
 * (milliseconds, or the wait for a reconnection), never earlier. CheckToken does not compare
 * deadlines at all: a holder holds until its node is deleted (see LockInspector.isHeld).
 */
import type { Logger } from 'pino';
import { baseName, joinPath, type CoordinationStore } from '../stores/store.js';
import type { RevokeRequest } from './lock-request.js';
import { parseNodeRecord, queueOrder, updateNodeRecord, type NodeRecord } from './lock-nodes.js';
import { holders } from './queue-position.js';

/** A revocation as a node's record keeps it (see NodeRecord). */
export type RecordedRevoke = NonNullable<NodeRecord['revoke']>;

/**
 * The revocation a holder's record should carry once RevokeLock asks `asked`, or undefined to
 * leave `standing` as it is (see the rule above).
 */
export function revokeToRecord(
  standing: RecordedRevoke | undefined,
  asked: RecordedRevoke,
): RecordedRevoke | undefined {
  if (standing === undefined) return asked;
  return hasDeadline(standing) || !hasDeadline(asked) ? undefined : asked;
}

function hasDeadline(revoke: RecordedRevoke): boolean {
  return revoke.forceAfterMs !== undefined || revoke.forceAt !== undefined;
}

/** Whether a revocation the holder was told (`told`) gives way to `next`: none yet, or a deadline for a request without one. */
export function escalates(told: RevokeRequest | undefined, next: RevokeRequest): boolean {
  return told === undefined || (told.forceAt === undefined && next.forceAt !== undefined);
}

/**
 * A holder's revocation: what RevokeLock asked of it (written into its node's record, see
 * Revoker), as its nodes' follows bring it, told to the holder (again when a deadline escalates
 * a cooperative request); and once a deadline is told, the timer that takes the lock away when
 * it passes. One per held request: a multi-lock's parts share it, so its holder is told one
 * deadline for the set.
 */
export class HeldRevocation {
  /** Called once the deadline of the request told has passed. */
  readonly #forced: (request: RevokeRequest) => void;
  readonly #told: (request: RevokeRequest) => void;
  #request: RevokeRequest | undefined;
  #forceTimer: MonotonicDeadline | undefined;
  #stopped = false;

  /** `told` is called with each request the holder is told. */
  constructor(forced: (request: RevokeRequest) => void, told: (request: RevokeRequest) => void) {
    this.#forced = forced;
    this.#told = told;
  }

  /** The request the holder was told, if any. */
  get request(): RevokeRequest | undefined {
    return this.#request;
  }

  /**
   * A holder's node record, as read or changed: a revocation request may be in it. The holder
   * is told a request that escalates what it was told (see escalates()), and a deadline's timer
   * starts as it is told, so it never fires before the holder was told.
   */
  seen(data: Uint8Array): void {
    if (this.#stopped) return;
    const request = parseRevokeRequest(data);
    if (!request || !escalates(this.#request, request)) return;
    this.#request = request;
    this.#told(request);
    if (request.forceAtMonotonic === undefined) return;
    this.#forceTimer?.clear();
    this.#forceTimer = new MonotonicDeadline(request.forceAtMonotonic, () => this.#forced(request));
  }

  /** The hold ended: nothing more is told or forced. */
  stop(): void {
    this.#stopped = true;
    this.#forceTimer?.clear();
  }
}

/**
 * Calls `fire` once the monotonic clock has reached `at` (performance.now()), never before: a
 * timer may fire early, as Node truncates its delay to whole milliseconds and counts it from
 * the event loop's cached time, so it is set again for whatever is left.
 */
export class MonotonicDeadline {
  #timer: NodeJS.Timeout | undefined;

  constructor(at: number, fire: () => void) {
    this.#arm(at, fire);
  }

  clear(): void {
    clearTimeout(this.#timer);
  }

  #arm(at: number, fire: () => void): void {
    this.#timer = setTimeout(
      () => {
        if (performance.now() < at) this.#arm(at, fire);
        else fire();
      },
      Math.ceil(Math.max(0, at - performance.now())),
    );
  }
}

/**
 * The revocation in a node's data, as seen now: its deadline, a duration in the record, starts
 * now (see the rule above).
 */
function parseRevokeRequest(data: Uint8Array): RevokeRequest | undefined {
  const revoke = parseNodeRecord(data).revoke;
  if (typeof revoke !== 'object' || revoke === null) return undefined;
  const reason = typeof revoke.reason === 'string' ? revoke.reason : '';
  const leftMs = deadlineLeftMs(revoke);
  if (leftMs === undefined) return { reason, forceAt: undefined, forceAtMonotonic: undefined };
  return { reason, forceAt: new Date(Date.now() + leftMs), forceAtMonotonic: performance.now() + leftMs };
}

/**
 * How long from now a recorded revocation's deadline is, or undefined for none: its
 * `forceAfterMs`; in a record an older lockstream wrote (only `forceAt`), what is left of it by
 * this instance's wall clock (the one thing a stepped or skewed clock moves).
 */
export function deadlineLeftMs(revoke: RecordedRevoke): number | undefined {
  const { forceAfterMs: after, forceAt } = revoke as { forceAfterMs?: unknown; forceAt?: unknown };
  if (typeof after === 'number' && Number.isFinite(after) && after >= 0) return after;
  const at = typeof forceAt === 'string' ? Date.parse(forceAt) : Number.NaN;
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/** How long after a forced revocation's deadline the revoking server deletes what is left. */
const FORCE_BACKSTOP_MS = 2_000;

/**
 * A revocation request as recorded. The deadline is recorded as a duration, which the holder's
 * instance measures from when it sees it by its monotonic clock; the wall clock times are for
 * people (see HeldRevocation).
 */
function revokeRequest(reason: string, forceAfterMs: number | undefined): RecordedRevoke {
  const now = Date.now();
  return {
    reason,
    requestedAt: new Date(now).toISOString(),
    ...(forceAfterMs === undefined
      ? {}
      : { forceAt: new Date(now + forceAfterMs).toISOString(), forceAfterMs }),
  };
}

/**
 * RevokeLock (Curator's Revoker): the request is written into each holder's node, where the
 * holder's server, which follows the node, sees it and tells the holder.
 */
export class Revoker {
  readonly #store: CoordinationStore;
  readonly #logger: Logger;
  /** Deletes a node, logging (not throwing) a failure. */
  readonly #withdraw: (path: string) => Promise<void>;

  constructor(options: {
    readonly store: CoordinationStore;
    readonly logger: Logger;
    readonly withdraw: (path: string) => Promise<void>;
  }) {
    this.#store = options.store;
    this.#logger = options.logger;
    this.#withdraw = options.withdraw;
  }

  /**
   * Asks every holder of the lock whose queue is `dir` to release it. With `forceAfterMs`, a
   * holder that has not released by then loses the lock (unless it was told a deadline before,
   * which stands): its own server tells it the deadline and ends the hold, and this one deletes
   * the node shortly after the deadline as a backstop. Resolves with how many holders were asked.
   */
  async revoke(name: string, dir: string, reason: string, forceAfterMs: number | undefined): Promise<number> {
    const queue = queueOrder(await this.#store.children(dir));
    const holding = queue.slice(0, holders(queue).count).map((entry) => joinPath(dir, entry.nodeName));
    const revoke = revokeRequest(reason, forceAfterMs);
    const asked = await Promise.all(holding.map((listed) => this.#ask(listed, revoke)));
    this.#logger.info(
      { lock: name, reason, holders: asked.filter(Boolean).length, forceAfterMs },
      'revocation requested',
    );
    return asked.filter(Boolean).length;
  }

  /**
   * Asks the holder whose node is `path` alone to release, as `revoke` asks each (an election's
   * Resign, naming its leader's term): false when the node is gone.
   */
  async revokeNode(
    name: string,
    path: string,
    reason: string,
    forceAfterMs: number | undefined,
  ): Promise<boolean> {
    const asked = await this.#ask(path, revokeRequest(reason, forceAfterMs));
    this.#logger.info({ lock: name, node: path, reason, asked, forceAfterMs }, 'revocation requested');
    return asked;
  }

  /** Writes the request into the holder's node (whose path was listed): false once it is gone. */
  async #ask(listed: string, revoke: RecordedRevoke): Promise<boolean> {
    // Asked before: the first request stands, but a deadline escalates a request without
    // one, and a deadline stands once written (see revokeToRecord).
    const ask = (path: string): Promise<NodeRecord | 'missing'> =>
      updateNodeRecord(this.#store, path, (current) => {
        const next = revokeToRecord(current.revoke, revoke);
        return next === undefined ? undefined : { ...current, revoke: next };
      });
    let path = listed;
    let record = await ask(path);
    // Downgraded since the listing: its node was replaced by one in the same place.
    const replacement = record === 'missing' ? await this.#replacementOf(path) : undefined;
    if (replacement !== undefined) {
      path = replacement;
      record = await ask(path);
    }
    if (record === 'missing') return false;
    const leftMs = deadlineLeftMs(record.revoke ?? revoke);
    if (leftMs !== undefined) this.#backstop(path, leftMs);
    return true;
  }

  /** The node that replaced `path` (a downgrade keeps the request id and sequence), if any. */
  async #replacementOf(path: string): Promise<string | undefined> {
    const dir = path.slice(0, path.lastIndexOf('/'));
    const name = baseName(path);
    const place = name.slice(name.indexOf('-'));
    const replacement = (await this.#store.children(dir)).find(
      (child) => child !== name && child.slice(child.indexOf('-')) === place,
    );
    return replacement === undefined ? undefined : joinPath(dir, replacement);
  }

  /**
   * Deletes a holder's node a little after the deadline it was told, should its own server not
   * have (it may be gone): its waiters must not wait on a holder that was told to go. `leftMs`
   * is the recorded duration, counted from now by this instance's monotonic clock: the holder's
   * server counts it from when it saw the request, which for ours is about now and for one an
   * earlier RevokeLock recorded was before now, so this never comes before the deadline it
   * keeps (later, for an earlier one: a backstop may be late, never early).
   */
  #backstop(path: string, leftMs: number): void {
    const timer = setTimeout(() => void this.#withdraw(path), leftMs + FORCE_BACKSTOP_MS);
    timer.unref();
  }
}
