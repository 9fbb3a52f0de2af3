import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { onAbort } from '../../common/abort.js';
import { disposable } from '../../common/disposable.js';
import { MULTI_LOCK_MAX, SEMAPHORE_LIMIT_MAX, WAIT_TIMEOUT_MAX_MS } from '../../common/limits.js';
import {
  baseName,
  joinPath,
  NodeFollow,
  type CoordinationStore,
  type CreatedNode,
  type StoreSession,
} from '../stores/store.js';
import { LockError } from '../lock-error.js';
import { encodeLockName, validateLockName } from './lock-name.js';
import {
  disagreement,
  holders,
  position,
  releaseFreesWatchers,
  type HeldPosition,
  type Position,
  type SemaphoreWake,
} from './queue-position.js';
import { nodePrefix, parseNodeName, queueOrder, type SemaphoreShape } from './node-name.js';
import { MultiLease } from './multi-lease.js';
import { LockRequestNode, nodeVanished } from './lease.js';
import {
  encodeNodeRecord,
  parseNodeRecord,
  recordedValue,
  updateNodeRecord,
  type NodeRecord,
} from './node-record.js';
import { LocalQueue } from './local-queue.js';
import {
  QueuePlace,
  Withdrawal,
  type AcquireOptions,
  type AcquireRequest,
  type Lease,
  type LockTarget,
} from './lock-request.js';

export interface LockEngineOptions {
  readonly store: CoordinationStore;
  /** Root path of lockstream's nodes in the store, e.g. `/lockstream`. */
  readonly rootPath: string;
  readonly logger: Logger;
  /** Identifies this server in lock nodes. */
  readonly instanceId?: string;
  /** A request that finds more than this many requests ahead of it is refused. Default: no limit. */
  readonly maxWaitersPerLock?: number;
}

/**
 * The lock recipe, written once for every store (ZooKeeper's lock recipe, as Curator's
 * LockInternals): create an ephemeral sequential node, list the siblings, and either hold the
 * lock or wait for the deletion of the one node that blocks ours; on any failure or abort,
 * delete our node before giving up.
 */
export class LockEngine {
  readonly #store: CoordinationStore;
  readonly #locksPath: string;
  readonly #logger: Logger;
  readonly #instanceId: string;
  readonly #maxWaitersPerLock: number;
  /** The queues requests of this engine wait in, by lock path (see LocalQueue). */
  readonly #localQueues = new Map<string, LocalQueue>();
  /** Nodes of exclusive holders of this server, released while waiters here watched them. */
  readonly #releasedHolders = new Set<string>();
  /** Predecessor nodes that waiters of this engine wait for, with how many wait for each. */
  readonly #awaited = new Map<string, number>();
  /** This engine's semaphore requests that have not ended, by request id: a grant ahead wakes them here. */
  readonly #semaphoreRequests = new Map<string, SemaphoreWakeup>();

  constructor(options: LockEngineOptions) {
    this.#maxWaitersPerLock = options.maxWaitersPerLock ?? Number.POSITIVE_INFINITY;
    this.#store = options.store;
    this.#locksPath = joinPath(options.rootPath, 'locks');
    this.#logger = options.logger;
    this.#instanceId = options.instanceId ?? randomUUID();
  }

  /** The store path under which every lock's queue lives. */
  get locksPath(): string {
    return this.#locksPath;
  }

  /** The store path of a lock's queue. */
  lockPath(name: string): string {
    return joinPath(this.#locksPath, encodeLockName(name));
  }

  /**
   * Queues for the lock and resolves once it is held.
   * Rejects with `LockError`: INVALID_ARGUMENT (bad request), TIMEOUT (`waitTimeoutMs` passed,
   * or the lock was not free for a try), UNAVAILABLE (store unreachable); or with the signal's
   * reason when `signal` aborts. Nothing stays queued after a rejection.
   */
  async acquire(request: AcquireRequest, options: AcquireOptions): Promise<Lease> {
    validateRequest(request);
    if (request.locks) return this.#acquireAll(request, request.locks, options);
    options.withdrawal.throwIfWithdrawn();
    // Withdrawn by the caller or, with a wait timeout, by the deadline.
    using deadline = withDeadline(request, options.withdrawal);
    const { stop } = deadline;
    const dir = this.lockPath(request.name);
    const data = this.#recordOf(request);
    const shape = semaphoreShapeOf(request);
    for (;;) {
      const node = new LockRequestNode(this.#store, request);
      const requestId = randomUUID();
      // Known here before its node exists: a grant ahead that lists the node finds it local.
      const wakeup = shape ? new SemaphoreWakeup() : undefined;
      if (wakeup) this.#semaphoreRequests.set(requestId, wakeup);
      let created: CreatedNode;
      try {
        created = await this.#store.createSequential(
          dir,
          nodePrefix(request.mode, requestId, shape),
          data,
          node.follow,
        );
      } catch (error) {
        node.abandon();
        this.#semaphoreRequests.delete(requestId);
        throw error;
      }
      try {
        node.created(created, data);
        return await this.#waitForTurn(request, created, node, stop, options, wakeup, (current, children) =>
          this.#grant(request, node, created.path, current, children),
        );
      } catch (error) {
        node.abandon();
        const sessionLost = created.session.lost.aborted;
        if (!sessionLost) await this.#withdraw(created.path);
        // The session (and with it our place in the queue) ended while we waited: queue again
        // on the new session rather than fail a caller who held nothing.
        if (sessionLost && !stop.withdrawn) {
          this.#logger.debug({ lock: request.name }, 'session lost while waiting; queuing again');
          continue;
        }
        throw stop.withdrawn ? stop.reason : error;
      } finally {
        this.#semaphoreRequests.delete(requestId);
      }
    }
  }

  /**
   * Several locks, all or none: one node per lock, created in one transaction (so this request
   * has one place in a single order across every lock: two multi-locks cannot each wait for the
   * other), then each waits for its turn as a single request does; the locks are handed out
   * together once every node's turn has come. Any part's failure (deadline, withdrawal, a
   * vanished node) ends the whole request, and every node is deleted.
   */
  async #acquireAll(
    request: AcquireRequest,
    targets: readonly LockTarget[],
    options: AcquireOptions,
  ): Promise<Lease> {
    options.withdrawal.throwIfWithdrawn();
    using deadline = withDeadline(request, options.withdrawal);
    const { stop } = deadline;
    const data = this.#recordOf(request);
    for (;;) {
      const parts = targets.map((target) => {
        const part: AcquireRequest = { ...request, ...target, locks: undefined };
        const shape = semaphoreShapeOf(part);
        const requestId = randomUUID();
        const wakeup = shape ? new SemaphoreWakeup() : undefined;
        if (wakeup) this.#semaphoreRequests.set(requestId, wakeup);
        const node = new LockRequestNode(this.#store, part);
        const entry = {
          dir: this.lockPath(target.name),
          prefix: nodePrefix(part.mode, requestId, shape),
          data,
          follow: node.follow,
        };
        return { request: part, requestId, wakeup, node, entry };
      });
      const forget = (): void => {
        for (const part of parts) this.#semaphoreRequests.delete(part.requestId);
      };
      let created: CreatedNode[];
      try {
        created = await this.#store.createSequentialAll(parts.map((part) => part.entry));
      } catch (error) {
        for (const part of parts) part.node.abandon();
        forget();
        throw error;
      }
      // One withdrawal for every part: the caller's (or the deadline's), or the first failure.
      const together = new Withdrawal();
      const unlink = stop.onWithdrawn((reason) => together.withdraw(reason));
      const aheads = parts.map(() => 0);
      const places = parts.map(() => new QueuePlace());
      options.place?.bind(async () =>
        (await Promise.all(places.map((place) => place.recount()))).some(Boolean),
      );
      try {
        parts.forEach((part, i) => part.node.created(created[i]!, data));
        const turns = await Promise.all(
          parts.map((part, i) =>
            this.#waitForTurn(
              part.request,
              created[i]!,
              part.node,
              together,
              {
                withdrawal: together,
                place: places[i]!,
                onQueued: (ahead) => {
                  aheads[i] = ahead;
                  options.onQueued?.(aheads.reduce((sum, each) => sum + each, 0));
                },
              },
              part.wakeup,
              (current, children) => {
                aheads[i] = 0;
                return { current, children };
              },
            ).catch((error: unknown) => {
              together.withdraw(error);
              throw error;
            }),
          ),
        );
        const leases = parts.map((part, i) =>
          this.#grant(part.request, part.node, created[i]!.path, turns[i]!.current, turns[i]!.children),
        );
        return new MultiLease(request.name, leases, this.#store);
      } catch (error) {
        for (const part of parts) part.node.abandon();
        const sessionLost = created[0]!.session.lost.aborted;
        if (!sessionLost) await Promise.all(created.map((node) => this.#withdraw(node.path)));
        if (sessionLost && !stop.withdrawn) {
          this.#logger.debug({ lock: request.name }, 'session lost while waiting; queuing again');
          continue;
        }
        throw stop.withdrawn ? stop.reason : error;
      } finally {
        unlink();
        forget();
        options.place?.bind(undefined);
      }
    }
  }

  /** What a request's node records (see NodeRecord). */
  #recordOf(request: AcquireRequest): Buffer {
    const record: NodeRecord = {
      owner: request.owner ?? '',
      peer: request.peer ?? '',
      server: this.#instanceId,
      since: new Date().toISOString(),
    };
    const value = recordedValue(request.value);
    if (value !== undefined) record.value = value;
    return encodeNodeRecord(record);
  }

  /** Waits until the request's node may hold its lock; `granted` then says what to hand out. */
  async #waitForTurn<T>(
    request: AcquireRequest,
    created: CreatedNode,
    node: LockRequestNode,
    stop: Withdrawal,
    options: AcquireOptions,
    wakeup: SemaphoreWakeup | undefined,
    granted: (current: HeldPosition, children: readonly string[]) => T,
  ): Promise<T> {
    const { path, session } = created;
    const dir = path.slice(0, path.lastIndexOf('/'));
    const me = baseName(path);
    let children: readonly string[] = created.siblings;
    let current: Position = this.#position(dir, children, me);
    if (current.kind !== 'missing' && current.head !== undefined) {
      const why = disagreement(current.head, me);
      if (why !== undefined) throw new LockError('MISMATCHED_REQUEST', `lock "${request.name}": ${why}`);
    }
    if (current.kind === 'held' && session.confirmed) {
      // Uncontended: no wait, so no signal linking the request to its session and node.
      stop.throwIfWithdrawn();
      session.lost.throwIfAborted();
      return granted(current, children);
    }
    // One signal for everything that ends the wait, made only for a request that waits.
    using waitEnd = new WaitEnd(stop, session, node);
    const waitSignal = waitEnd.signal;
    using waiting = this.#waitingIn(dir);
    if (current.kind === 'waiting' && current.ahead > this.#maxWaitersPerLock) {
      throw new LockError(
        'RESOURCE_EXHAUSTED',
        `lock "${request.name}" has ${current.ahead} requests ahead; this server allows ${this.#maxWaitersPerLock}`,
      );
    }
    // Told its place now and whenever it changes (a try never waits, so it is never told).
    const { queue } = waiting;
    using _told = request.waitTimeoutMs === 0 ? undefined : disposable(this.#tellPlaces(queue, me, options));
    for (;;) {
      waitSignal.throwIfAborted();
      if (current.kind === 'missing') throw nodeVanished(request.name);
      if (current.kind === 'held') {
        // Never grant on a session the store cannot vouch for: it may already be lost.
        await whenConfirmed(session, waitSignal);
        return granted(current, children);
      }
      if (request.waitTimeoutMs === 0) {
        throw new LockError(
          'TIMEOUT',
          `lock "${request.name}" is not free (${current.ahead} ahead) and wait_timeout is 0`,
        );
      }
      queue.report(me, current.ahead);
      if (current.wake) {
        // A semaphore: released weight, or a grant ahead, may let us in; list again to know.
        const told = await this.#semaphoreWait(dir, current.wake, wakeup!, waitSignal);
        children = told ?? (await this.#store.children(dir));
        current = this.#position(dir, children, me);
        continue;
      }
      const predecessor = joinPath(dir, current.predecessor);
      // Nothing that blocked us is left ahead when the predecessor's deletion alone grants us
      // (see heldOncePredecessorGoes), or when it was a holder of this server whose release
      // frees its watchers (see releaseFreesWatchers), released just now: we hold the lock, no
      // listing needed. Our node still exists: its watch, armed since it was created, would
      // have fired first otherwise (a store reports a session's watch events in order).
      const headClears = current.heldOncePredecessorGoes;
      let clear: boolean;
      this.#awaited.set(predecessor, (this.#awaited.get(predecessor) ?? 0) + 1);
      try {
        await this.#store.waitUntilDeleted(predecessor, { signal: waitSignal });
        waitSignal.throwIfAborted();
        clear = headClears || this.#releasedHolders.has(predecessor);
      } finally {
        const count = (this.#awaited.get(predecessor) ?? 1) - 1;
        if (count > 0) this.#awaited.set(predecessor, count);
        else {
          this.#awaited.delete(predecessor);
          this.#releasedHolders.delete(predecessor);
        }
      }
      if (clear) {
        current = { kind: 'held', ahead: 0, head: undefined };
      } else {
        children = await this.#store.children(dir);
        current = this.#position(dir, children, me);
      }
    }
  }

  /**
   * Hands out the lock. A semaphore request may have a waiter right behind it that waits for
   * this grant (its answer may change now: it may fit too, or it is now the first waiter and
   * must watch the holders): it is told, in this process with the listing that granted us, or
   * through our node's record (`granted`) when it is another instance's.
   */
  #grant(
    request: AcquireRequest,
    node: LockRequestNode,
    path: string,
    current: HeldPosition,
    children: readonly string[],
  ): LockRequestNode {
    node.hold(releaseFreesWatchers(request.mode) ? this.#releasing(path) : undefined);
    const { successor } = current;
    if (successor === undefined) return node;
    const entry = parseNodeName(successor);
    const local = entry ? this.#semaphoreRequests.get(entry.requestId) : undefined;
    if (local) {
      local.wake(children);
      return node;
    }
    updateNodeRecord(this.#store, path, (record) =>
      record.granted ? undefined : { ...record, granted: true },
    ).catch((error: unknown) =>
      // The waiter behind is woken when we release instead: later, never wrongly.
      this.#logger.warn(
        { err: error, path },
        'could not tell the semaphore request behind this one of its grant',
      ),
    );
    return node;
  }

  /**
   * Waits until something may have changed a waiting semaphore request's answer (see
   * SemaphoreWake), or a grant ahead in this process tells it so; resolves with the listing
   * that grant was made on, if it came with one.
   */
  async #semaphoreWait(
    dir: string,
    wake: SemaphoreWake,
    wakeup: SemaphoreWakeup,
    signal: AbortSignal,
  ): Promise<readonly string[] | undefined> {
    const told = wakeup.take();
    if (told) return told;
    const stop = new AbortController();
    const stopWith = onAbort(signal, () => stop.abort(signal.reason));
    if (signal.aborted) stop.abort(signal.reason);
    try {
      const waits: Array<Promise<readonly string[] | undefined>> = [wakeup.next(stop.signal)];
      if (wake.kind === 'release') {
        for (const holder of wake.holders) {
          waits.push(
            this.#store
              .waitUntilDeleted(joinPath(dir, holder), { signal: stop.signal })
              .then(() => undefined),
          );
        }
      } else {
        waits.push(this.#grantedOrGone(joinPath(dir, wake.predecessor), stop.signal).then(() => undefined));
      }
      return await Promise.race(waits);
    } finally {
      stop.abort(STOPPED);
      stopWith();
    }
  }

  /** Resolves once the node at `path` says it was granted (its record), changes, or is gone. */
  async #grantedOrGone(path: string, signal: AbortSignal): Promise<void> {
    let changed!: () => void;
    const change = new Promise<void>((resolve) => (changed = resolve));
    const follow = new NodeFollow({ onData: () => changed(), onDeleted: () => changed() });
    try {
      const node = await this.#store.watchNode(path, follow);
      if (!node || parseNodeRecord(node.data).granted || signal.aborted) return;
      const unlink = onAbort(signal, () => changed());
      await change;
      unlink();
    } finally {
      follow.stop();
    }
  }

  /**
   * Called as a lease of this server whose release frees its watchers releases its node:
   * waiters here that watch that node then know nothing that blocks them is ahead. Only nodes a
   * waiter here waits for are kept, and at most MAX_RELEASED_HOLDERS (a waiter that gave up
   * leaves its entry behind).
   */
  #releasing(path: string): () => void {
    return () => {
      if (!this.#awaited.has(path)) return; // nobody here waits for it
      if (this.#releasedHolders.size >= MAX_RELEASED_HOLDERS) {
        const oldest = this.#releasedHolders.values().next();
        if (!oldest.done) this.#releasedHolders.delete(oldest.value);
      }
      this.#releasedHolders.add(path);
    };
  }

  /** Tells `me`'s place to `options.onQueued` while it waits, and lets `options.place` ask for a recount. */
  #tellPlaces(queue: LocalQueue, me: string, options: AcquireOptions): () => void {
    const stop = queue.wait(me, (ahead) => options.onQueued?.(ahead));
    const { place } = options;
    place?.bind(() => queue.recount(me));
    return () => {
      place?.bind(undefined);
      stop();
    };
  }

  /** Counts a request in `dir`'s queue until disposed; the LocalQueue goes with the last one. */
  #waitingIn(dir: string): { readonly queue: LocalQueue } & Disposable {
    let queue = this.#localQueues.get(dir);
    if (!queue) {
      queue = new LocalQueue(this.#store, dir);
      this.#localQueues.set(dir, queue);
    }
    const leave = queue.join();
    const joined = queue;
    return {
      queue: joined,
      [Symbol.dispose]: () => {
        leave();
        if (joined.empty && this.#localQueues.get(dir) === joined) this.#localQueues.delete(dir);
      },
    };
  }

  /** Where `me` stands in a listing of `dir`; a long queue's names are parsed once, not per listing. */
  #position(dir: string, children: readonly string[], me: string): Position {
    const queue = this.#localQueues.get(dir);
    return queue ? position(children, me, queue.nodeReader(children)) : position(children, me);
  }

  /**
   * Asks every holder of `name` to release it (Curator's Revoker: the request is written into
   * the holder's node, where its server's watch sees it). With `forceAfterMs`, a holder that has
   * not released by then loses the lock: its own server ends it, and this one deletes the node
   * shortly after as a backstop. Resolves with how many holders were asked.
   */
  async revoke(name: string, reason: string, forceAfterMs: number | undefined): Promise<number> {
    validateLockName(name);
    const dir = this.lockPath(name);
    const queue = queueOrder(await this.#store.children(dir));
    const holding = queue.slice(0, holders(queue).count).map((entry) => joinPath(dir, entry.nodeName));
    const now = Date.now();
    const revoke = {
      reason,
      requestedAt: new Date(now).toISOString(),
      ...(forceAfterMs === undefined ? {} : { forceAt: new Date(now + forceAfterMs).toISOString() }),
    };
    const asked = await Promise.all(
      holding.map(async (listed) => {
        // Asked before: the first request stands, deadline (or none) included, so a holder never
        // loses its lock before a deadline it was told, nor at one it was never told.
        const ask = (path: string): Promise<NodeRecord | 'missing'> =>
          updateNodeRecord(this.#store, path, (current) =>
            current.revoke ? undefined : { ...current, revoke },
          );
        let path = listed;
        let record = await ask(path);
        // Downgraded since the listing: its node was replaced by one in the same place.
        const replacement = record === 'missing' ? await this.#replacementOf(path) : undefined;
        if (replacement !== undefined) {
          path = replacement;
          record = await ask(path);
        }
        if (record === 'missing') return false;
        const standing = record.revoke ?? revoke;
        const forceAt = standing.forceAt === undefined ? Number.NaN : Date.parse(standing.forceAt);
        if (!Number.isNaN(forceAt)) this.#backstop(path, forceAt);
        return true;
      }),
    );
    this.#logger.info(
      { lock: name, reason, holders: asked.filter(Boolean).length, forceAfterMs },
      'revocation requested',
    );
    return asked.filter(Boolean).length;
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
   * have (it may be gone): its waiters must not wait on a holder that was told to go.
   */
  #backstop(path: string, forceAt: number): void {
    const timer = setTimeout(
      () => void this.#withdraw(path),
      Math.max(0, forceAt - Date.now()) + FORCE_BACKSTOP_MS,
    );
    timer.unref();
  }

  async #withdraw(path: string): Promise<void> {
    try {
      await this.#store.delete(path);
    } catch (error) {
      // The node stays until our session ends; nothing else can be done from here.
      this.#logger.warn({ err: error, path }, 'could not delete a withdrawn lock request');
    }
  }
}

/** How long after a forced revocation's deadline the revoking server deletes what is left. */
const FORCE_BACKSTOP_MS = 2_000;

/** Released exclusive holders remembered for the waiters behind them, at most. */
const MAX_RELEASED_HOLDERS = 10_000;

function validateRequest(request: AcquireRequest): void {
  if (request.locks) {
    validateMultiLock(request.locks);
  } else {
    validateLockName(request.name);
    validateSemaphore(request);
  }
  const { waitTimeoutMs } = request;
  if (
    waitTimeoutMs !== undefined &&
    !(Number.isInteger(waitTimeoutMs) && waitTimeoutMs >= 0 && waitTimeoutMs <= WAIT_TIMEOUT_MAX_MS)
  ) {
    throw new LockError(
      'INVALID_ARGUMENT',
      `invalid wait timeout ${waitTimeoutMs} ms: expected a whole number from 0 to ${WAIT_TIMEOUT_MAX_MS}`,
    );
  }
}

/**
 * What stops a request: the caller's withdrawal, and with a wait timeout, its deadline too (a
 * withdrawal of the engine's own that follows the caller's). A timer only where a deadline is.
 */
function withDeadline(
  request: AcquireRequest,
  withdrawal: Withdrawal,
): { readonly stop: Withdrawal } & Disposable {
  const ms = request.waitTimeoutMs;
  if (ms === undefined || ms === 0) return { stop: withdrawal, [Symbol.dispose]: () => {} };
  const stop = new Withdrawal();
  const unlink = withdrawal.onWithdrawn((reason) => stop.withdraw(reason));
  const timer = setTimeout(() => {
    const what = request.locks ? `locks ${request.name} were` : `lock "${request.name}" was`;
    stop.withdraw(new LockError('TIMEOUT', `${what} not acquired within ${ms} ms`));
  }, ms);
  return {
    stop,
    [Symbol.dispose]: () => {
      clearTimeout(timer);
      unlink();
    },
  };
}

/**
 * A waiting request's one signal (the store's wait and the wait for confirmation take a
 * signal): aborts when the request is withdrawn, its session is lost, or its node vanishes.
 */
class WaitEnd implements Disposable {
  readonly #controller = new AbortController();
  readonly #unlinks: Array<() => void>;

  constructor(stop: Withdrawal, session: StoreSession, node: LockRequestNode) {
    const end = (reason: unknown): void => this.#controller.abort(reason);
    const sessionLost = (): void => end(session.lost.reason);
    if (session.lost.aborted) sessionLost();
    this.#unlinks = [
      stop.onWithdrawn(end),
      session.lost.aborted ? () => {} : onAbort(session.lost, sessionLost),
      node.onVanished(end),
    ];
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  [Symbol.dispose](): void {
    for (const unlink of this.#unlinks) unlink();
  }
}

/** Resolves once the store vouches for `session` again; rejects with the reason if `signal` aborts. */
async function whenConfirmed(session: StoreSession, signal: AbortSignal): Promise<void> {
  if (session.confirmed) return;
  signal.throwIfAborted();
  await new Promise<void>((resolve, reject) => {
    const onAbort = (): void => {
      unsubscribe();
      reject(signal.reason);
    };
    const unsubscribe = session.onConfirmedChange((confirmed) => {
      if (!confirmed) return;
      unsubscribe();
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** A semaphore request's limit and weight (default 1); undefined in the lock modes. */
function semaphoreShapeOf(request: AcquireRequest): SemaphoreShape | undefined {
  return request.mode === 'semaphore' ? { limit: request.limit!, weight: request.weight ?? 1 } : undefined;
}

/** A multi-lock's targets: 2 to MULTI_LOCK_MAX distinct, valid locks; errors say which one. */
function validateMultiLock(locks: readonly LockTarget[]): void {
  if (locks.length < 2 || locks.length > MULTI_LOCK_MAX) {
    throw new LockError(
      'INVALID_ARGUMENT',
      `locks names ${locks.length} lock${locks.length === 1 ? '' : 's'}: a multi-lock takes 2 to ${MULTI_LOCK_MAX}`,
    );
  }
  const seen = new Set<string>();
  locks.forEach((target, i) => {
    try {
      validateLockName(target.name);
      validateSemaphore(target);
    } catch (error) {
      if (error instanceof LockError) throw new LockError(error.code, `locks[${i}]: ${error.message}`);
      throw error;
    }
    if (seen.has(target.name)) {
      throw new LockError(
        'INVALID_ARGUMENT',
        `locks[${i}]: "${target.name}" is named twice in one multi-lock`,
      );
    }
    seen.add(target.name);
  });
}

/** A semaphore's limit and weight, or their absence in the other modes. */
function validateSemaphore({ mode, limit, weight }: Pick<AcquireRequest, 'mode' | 'limit' | 'weight'>): void {
  if (mode !== 'semaphore') {
    if (limit || weight !== undefined) {
      throw new LockError(
        'INVALID_ARGUMENT',
        `${limit ? 'limit' : 'weight'} applies to SEMAPHORE mode only; this request asks for ${mode.toUpperCase()} mode`,
      );
    }
    return;
  }
  if (limit === undefined || limit === 0) {
    throw new LockError(
      'INVALID_ARGUMENT',
      `limit is required in SEMAPHORE mode: 1 to ${SEMAPHORE_LIMIT_MAX}`,
    );
  }
  if (!Number.isInteger(limit) || limit < 1 || limit > SEMAPHORE_LIMIT_MAX) {
    throw new LockError(
      'INVALID_ARGUMENT',
      `limit ${limit} is out of range: expected 1 to ${SEMAPHORE_LIMIT_MAX}`,
    );
  }
  if (weight !== undefined && !(Number.isInteger(weight) && weight >= 1 && weight <= limit)) {
    throw new LockError(
      'INVALID_ARGUMENT',
      weight > limit && Number.isInteger(weight)
        ? `weight ${weight} is more than the limit ${limit}: the request could never be granted`
        : `weight ${weight} is out of range: expected 1 to the limit (${limit})`,
    );
  }
}

/** Why a semaphore wait's own watches are dropped once one of them has answered. */
const STOPPED = new LockError('CANCELLED', 'the wait is over');

/**
 * How a grant in this process wakes a semaphore request waiting right behind it, with the
 * listing it was granted on (nothing is deleted from a queue's listing without a release, so
 * the waiter may count on it: at worst it is a little behind). A wake that comes while the
 * request is not waiting is kept for its next wait.
 */
class SemaphoreWakeup {
  #told: readonly string[] | undefined;
  #waiting: ((children: readonly string[]) => void) | undefined;

  wake(children: readonly string[]): void {
    if (this.#waiting) this.#waiting(children);
    else this.#told = children;
  }

  /** The listing of a wake that came while the request was not waiting, once. */
  take(): readonly string[] | undefined {
    const told = this.#told;
    this.#told = undefined;
    return told;
  }

  /** Resolves with the next wake's listing; never settles once `signal` aborts. */
  next(signal: AbortSignal): Promise<readonly string[]> {
    return new Promise((resolve) => {
      if (signal.aborted) return;
      this.#waiting = resolve;
      onAbort(signal, () => {
        if (this.#waiting === resolve) this.#waiting = undefined;
      });
    });
  }
}
