import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { LockError } from '../lock-error.js';
import {
  baseName,
  joinPath,
  parentPath,
  type CoordinationStore,
  type CreatedNode,
  type OwnedNode,
  type SequentialEntry,
  type StoreSession,
} from '../stores/store.js';
import { LockRequestNode } from './lease.js';
import { HANDED_OVER } from './loss-reasons.js';
import type { LockMode } from './lock-mode.js';
import {
  QueuePlace,
  Withdrawal,
  type AcquireOptions,
  type AcquireRequest,
  type Lease,
} from './lock-request.js';
import { encodeLockName, validateLockName } from './lock-name.js';
import { MultiLease } from './multi-lease.js';
import { nodePrefix, parseNodeName } from './node-name.js';
import { requestRecords } from './node-record.js';
import { releaseFreesWatchers, type HeldPosition } from './queue-position.js';
import { QueueWaits, withDeadline } from './queue-wait.js';
import { semaphoreShapeOf, validateRequest } from './request-validation.js';
import { Revoker } from './revoker.js';
import { SemaphoreWakeups, type SemaphoreWakeup } from './semaphore-wakeups.js';
import { SessionDependents } from './session-dependents.js';

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

/** One lock of a request (a multi-lock has several): its node, and its semaphore wake-up. */
interface Part {
  readonly request: AcquireRequest;
  readonly node: LockRequestNode;
  /** A semaphore request's wake-up, and the request id it is registered under. */
  readonly wakeup: SemaphoreWakeup | undefined;
  readonly requestId: string | undefined;
}

/**
 * The lock recipe, written once for every store (ZooKeeper's lock recipe, as Curator's
 * LockInternals): create an ephemeral sequential node, list the siblings, and either hold the
 * lock or wait for the deletion of the one node that blocks ours (QueueWaits); on any failure
 * or abort, delete our node before giving up.
 */
export class LockEngine {
  readonly #store: CoordinationStore;
  readonly #locksPath: string;
  readonly #logger: Logger;
  readonly #instanceId: string;
  readonly #semaphores: SemaphoreWakeups;
  readonly #waits: QueueWaits;
  readonly #revoker: Revoker;
  readonly #dependents = new SessionDependents();

  constructor(options: LockEngineOptions) {
    this.#store = options.store;
    this.#locksPath = joinPath(options.rootPath, 'locks');
    this.#logger = options.logger;
    this.#instanceId = options.instanceId ?? randomUUID();
    this.#semaphores = new SemaphoreWakeups(this.#store, this.#logger);
    this.#waits = new QueueWaits({
      store: this.#store,
      maxWaitersPerLock: options.maxWaitersPerLock ?? Number.POSITIVE_INFINITY,
      semaphores: this.#semaphores,
    });
    this.#revoker = new Revoker({
      store: this.#store,
      logger: this.#logger,
      withdraw: (path) => this.#withdraw(path),
    });
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
   * Queues for the lock (for a multi-lock, every lock of it) and resolves once it is held.
   * Rejects with `LockError`: INVALID_ARGUMENT (bad request), TIMEOUT (`waitTimeoutMs` passed,
   * or the lock was not free for a try), UNAVAILABLE (store unreachable); or with the signal's
   * reason when `signal` aborts. Nothing stays queued after a rejection.
   */
  async acquire(request: AcquireRequest, options: AcquireOptions): Promise<Lease> {
    validateRequest(request);
    options.withdrawal.throwIfWithdrawn();
    // Withdrawn by the caller or, with a wait timeout, by the deadline. Disposed in a plain
    // finally, not with `using`: its compiled form keeps a disposal stack (an object, an
    // array of seventeen slots and a closure) in the frame of every waiter.
    const deadline = withDeadline(request, options.withdrawal);
    try {
      // When the request was made: its record is written again from it if it queues again (a
      // waiter's frame keeps this string, not the record's bytes and the pooled buffer they are in).
      const since = new Date().toISOString();
      for (;;) {
        // A waiter keeps this frame until its turn: it holds little; a try's state is in #queue's callbacks.
        const lease = await this.#queue(request, since, deadline.stop, options);
        if (lease) return lease;
        // The session (and with it our place in the queue) ended while we waited: queue again
        // on the new session rather than fail a caller who held nothing.
        this.#logger.debug({ lock: request.name }, 'session lost while waiting; queuing again');
      }
    } finally {
      deadline[Symbol.dispose]();
    }
  }

  /**
   * Carries on a request whose nodes exist already, made by another instance in a session this
   * engine's store has taken over (see SessionTakeover): `nodes` in the request's order (a
   * multi-lock's in its locks' order). Resolves once it holds, as `acquire` does: at once if
   * it held before (a grant never goes back, and its fencing token is its node's), else when
   * its turn comes. Rejects as `acquire` does, and with LOCK_LOST when a node is gone or the
   * session ends while it waits (a taken-over session is not replaced: nothing is queued again).
   */
  async adopt(request: AcquireRequest, nodes: readonly OwnedNode[], options: AcquireOptions): Promise<Lease> {
    options.withdrawal.throwIfWithdrawn();
    const deadline = withDeadline(request, options.withdrawal);
    try {
      const parts = nodes.map((owned, i): Part => {
        const target = request.locks ? { ...request, ...request.locks[i]!, locks: undefined } : request;
        const shape = semaphoreShapeOf(target);
        const requestId = shape ? parseNodeName(baseName(owned.path))?.requestId : undefined;
        const wakeup = requestId === undefined ? undefined : this.#semaphores.register(requestId);
        return {
          request: target,
          node: new LockRequestNode(this.#store, target, this.#dependents),
          wakeup,
          requestId,
        };
      });
      const session = this.#store.session;
      const paths = nodes.map((owned) => owned.path);
      // Each node's follow is armed first, then its queue listed: what the listing misses, the follow tells.
      const reading = Promise.all(
        nodes.map(async (owned, i): Promise<CreatedNode> => {
          const followed = await this.#store.watchNode(owned.path, parts[i]!.node.follow);
          const siblings = await this.#store.children(parentPath(owned.path));
          return { path: owned.path, session, siblings, creationId: owned.creationId, followed };
        }),
      );
      // -1: whatever a node's record says now (a revocation, perhaps) is news to this engine.
      const written = nodes.map(() => -1);
      const waiting = reading.then((created) =>
        this.#waitCreated(request, parts, created, written, deadline.stop, options),
      );
      const lease = await this.#settled(waiting, parts, paths, session, deadline.stop);
      if (lease) return lease;
      throw new LockError(
        'LOCK_LOST',
        `lock "${request.name}": its taken-over session ended while it waited`,
      );
    } finally {
      deadline[Symbol.dispose]();
    }
  }

  /**
   * Queues once: creates the request's nodes (a multi-lock's in one transaction) and waits for
   * their turn. Resolves with the lease, or with undefined when the session was lost while it
   * waited and the request was not withdrawn; on any other failure deletes the nodes and rejects.
   */
  #queue(
    request: AcquireRequest,
    since: string,
    stop: Withdrawal,
    options: AcquireOptions,
  ): Promise<Lease | undefined> {
    const data = requestRecords(request, { server: this.#instanceId, since, tag: options.tag });
    const targets = request.locks?.map((target): AcquireRequest => ({
      ...request,
      ...target,
      locks: undefined,
    }));
    // Mapped, not pushed to: a waiter keeps `parts`, and a pushed-to empty array has seventeen slots.
    const made = (targets ?? [request]).map((target, i) => this.#part(target, data[i] ?? data[0]!));
    const parts = made.map(({ part }) => part);
    const entries = made.map(({ entry }) => entry);
    const creating = targets
      ? this.#store.createSequentialAll(entries)
      : this.#createSequential(entries[0]!).then((node) => [node]);
    const written = data.map((record) => record.byteLength);
    return creating.then(
      (created) => {
        const waiting = this.#waitCreated(request, parts, created, written, stop, options);
        const paths = created.map((node) => node.path);
        return this.#settled(waiting, parts, paths, created[0]!.session, stop);
      },
      (error: unknown) => {
        for (const part of parts) part.node.abandon();
        this.#forget(parts);
        throw error;
      },
    );
  }

  /** The wait of a request whose nodes were created: a rejection, never a throw. */
  #waitCreated(
    request: AcquireRequest,
    parts: readonly Part[],
    created: readonly CreatedNode[],
    written: readonly number[],
    stop: Withdrawal,
    options: AcquireOptions,
  ): Promise<Lease> {
    try {
      parts.forEach((part, i) => part.node.created(created[i]!, written[i] ?? written[0]!));
      return request.locks
        ? this.#waitForAll(request, parts, created, stop, options)
        : this.#waitForOne(parts[0]!, created[0]!, stop, options);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** What follows a wait: the lease, or its nodes deleted (unless their session took them) and a rejection. */
  #settled(
    waiting: Promise<Lease>,
    parts: readonly Part[],
    paths: readonly string[],
    session: StoreSession,
    stop: Withdrawal,
  ): Promise<Lease | undefined> {
    return waiting.then(
      (lease) => {
        this.#forget(parts);
        return lease;
      },
      async (error: unknown) => {
        try {
          for (const part of parts) part.node.abandon();
          // A request handed over to another instance leaves its nodes to it.
          if (!session.lost.aborted && stop.reason !== HANDED_OVER)
            await Promise.all(paths.map((path) => this.#withdraw(path)));
          // Asked again after the withdrawal: a closed session deletes its nodes before the
          // store hears that the session is over, so a waiter may see its node vanish first.
          if (session.lost.aborted && !stop.withdrawn) return undefined;
          throw stop.withdrawn ? stop.reason : error;
        } finally {
          this.#forget(parts);
        }
      },
    );
  }

  #forget(parts: readonly Part[]): void {
    for (const part of parts) if (part.requestId !== undefined) this.#semaphores.forget(part.requestId);
  }

  /**
   * One lock of a request, before its node is created, and what the store is asked to create
   * for it (kept apart: a waiter keeps its part, not the node's record).
   */
  #part(request: AcquireRequest, data: Buffer): { part: Part; entry: SequentialEntry } {
    const shape = semaphoreShapeOf(request);
    const requestId = randomUUID();
    // Known here before its node exists: a grant ahead that lists the node finds it local.
    const wakeup = shape ? this.#semaphores.register(requestId) : undefined;
    const node = new LockRequestNode(this.#store, request, this.#dependents);
    const entry = {
      dir: this.lockPath(request.name),
      prefix: nodePrefix(request.mode, requestId, shape),
      data,
      follow: node.follow,
    };
    // Only a semaphore part keeps its request id (a string of a dozen joined pieces, as
    // randomUUID makes it): nothing else needs it once the node's prefix is written.
    return { part: { request, node, wakeup, requestId: shape ? requestId : undefined }, entry };
  }

  #createSequential({ dir, prefix, data, follow }: SequentialEntry): Promise<CreatedNode> {
    return this.#store.createSequential(dir, prefix, data, follow);
  }

  /** A single lock: its node waits for its turn, and the lock is handed out. */
  #waitForOne(part: Part, created: CreatedNode, stop: Withdrawal, options: AcquireOptions): Promise<Lease> {
    // What a waiter keeps until its turn: the grant's three values, not the part and the
    // created node (the node's record, written and read back, and the first listing).
    const { node, request } = part;
    const { path } = created;
    return this.#waits.waitForTurn(request, created, node, stop, options, part.wakeup, (current, children) =>
      this.#grant(node, request.mode, path, current, children),
    );
  }

  /**
   * A multi-lock, all or none: its nodes were created in one transaction (so the request has
   * one place in a single order across every lock: two multi-locks cannot each wait for the
   * other); each waits for its turn as a single request does, and the locks are handed out
   * together once every node's turn has come. Any part's failure (deadline, withdrawal, a
   * vanished node) ends the whole request.
   */
  async #waitForAll(
    request: AcquireRequest,
    parts: readonly Part[],
    created: readonly CreatedNode[],
    stop: Withdrawal,
    options: AcquireOptions,
  ): Promise<Lease> {
    // One withdrawal for every part: the caller's (or the deadline's), or the first failure.
    const together = new Withdrawal();
    const unlink = stop.onWithdrawn((reason) => together.withdraw(reason));
    const aheads = parts.map(() => 0);
    const places = parts.map(() => new QueuePlace());
    options.place?.bind({
      recount: async () => (await Promise.all(places.map((place) => place.recount()))).some(Boolean),
    });
    try {
      const turns = await Promise.all(
        parts.map((part, i) =>
          this.#waits
            .waitForTurn(
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
            )
            .catch((error: unknown) => {
              together.withdraw(error);
              throw error;
            }),
        ),
      );
      const leases = parts.map((part, i) =>
        this.#grant(part.node, part.request.mode, created[i]!.path, turns[i]!.current, turns[i]!.children),
      );
      return new MultiLease(request.name, leases, this.#store);
    } finally {
      unlink();
      options.place?.bind(undefined);
    }
  }

  /**
   * Hands out the lock. A semaphore request may have a waiter right behind it that waits for
   * this grant: it is told (see SemaphoreWakeups).
   */
  #grant(
    node: LockRequestNode,
    mode: LockMode,
    path: string,
    current: HeldPosition,
    children: readonly string[],
  ): LockRequestNode {
    node.hold(releaseFreesWatchers(mode) ? this.#waits.released : undefined);
    if (current.successor !== undefined) this.#semaphores.granted(path, current.successor, children);
    return node;
  }

  /**
   * Asks every holder of `name` to release it (see Revoker); with `forceAfterMs`, takes the
   * lock from a holder that has not released by then. Resolves with how many holders were asked.
   */
  async revoke(name: string, reason: string, forceAfterMs: number | undefined): Promise<number> {
    validateLockName(name);
    return this.#revoker.revoke(name, this.lockPath(name), reason, forceAfterMs);
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
