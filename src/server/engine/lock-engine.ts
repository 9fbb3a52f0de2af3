import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { joinPath, type CoordinationStore, type CreatedNode, type SequentialEntry } from '../stores/store.js';
import { LockRequestNode } from './lease.js';
import {
  QueuePlace,
  Withdrawal,
  type AcquireOptions,
  type AcquireRequest,
  type Lease,
} from './lock-request.js';
import { encodeLockName, validateLockName } from './lock-name.js';
import { MultiLease } from './multi-lease.js';
import { nodePrefix } from './node-name.js';
import { encodeNodeRecord, recordedValue, type NodeRecord } from './node-record.js';
import { releaseFreesWatchers, type HeldPosition } from './queue-position.js';
import { QueueWaits, withDeadline } from './queue-wait.js';
import { semaphoreShapeOf, validateRequest } from './request-validation.js';
import { Revoker } from './revoker.js';
import { SemaphoreWakeups, type SemaphoreWakeup } from './semaphore-wakeups.js';

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

/** One lock of a request (a multi-lock has several): its node, as asked of the store, and its follower. */
interface Part {
  readonly request: AcquireRequest;
  readonly requestId: string;
  readonly node: LockRequestNode;
  readonly wakeup: SemaphoreWakeup | undefined;
  readonly entry: SequentialEntry;
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
    // Withdrawn by the caller or, with a wait timeout, by the deadline.
    using deadline = withDeadline(request, options.withdrawal);
    const { stop } = deadline;
    const data = this.#recordOf(request);
    const targets = request.locks?.map((target): AcquireRequest => ({
      ...request,
      ...target,
      locks: undefined,
    }));
    for (;;) {
      const parts = (targets ?? [request]).map((target) => this.#part(target, data));
      try {
        let created: CreatedNode[];
        try {
          created = targets
            ? await this.#store.createSequentialAll(parts.map((part) => part.entry))
            : [await this.#createSequential(parts[0]!.entry)];
        } catch (error) {
          for (const part of parts) part.node.abandon();
          throw error;
        }
        try {
          parts.forEach((part, i) => part.node.created(created[i]!, data));
          return targets
            ? await this.#waitForAll(request, parts, created, stop, options)
            : await this.#waitForOne(parts[0]!, created[0]!, stop, options);
        } catch (error) {
          for (const part of parts) part.node.abandon();
          const sessionLost = created[0]!.session.lost.aborted;
          if (!sessionLost) await Promise.all(created.map((node) => this.#withdraw(node.path)));
          // The session (and with it our place in the queue) ended while we waited: queue again
          // on the new session rather than fail a caller who held nothing.
          if (sessionLost && !stop.withdrawn) {
            this.#logger.debug({ lock: request.name }, 'session lost while waiting; queuing again');
            continue;
          }
          throw stop.withdrawn ? stop.reason : error;
        }
      } finally {
        for (const part of parts) this.#semaphores.forget(part.requestId);
      }
    }
  }

  /** One lock of a request, before its node is created. */
  #part(request: AcquireRequest, data: Buffer): Part {
    const shape = semaphoreShapeOf(request);
    const requestId = randomUUID();
    // Known here before its node exists: a grant ahead that lists the node finds it local.
    const wakeup = shape ? this.#semaphores.register(requestId) : undefined;
    const node = new LockRequestNode(this.#store, request);
    const entry = {
      dir: this.lockPath(request.name),
      prefix: nodePrefix(request.mode, requestId, shape),
      data,
      follow: node.follow,
    };
    return { request, requestId, node, wakeup, entry };
  }

  #createSequential({ dir, prefix, data, follow }: SequentialEntry): Promise<CreatedNode> {
    return this.#store.createSequential(dir, prefix, data, follow);
  }

  /** A single lock: its node waits for its turn, and the lock is handed out. */
  #waitForOne(part: Part, created: CreatedNode, stop: Withdrawal, options: AcquireOptions): Promise<Lease> {
    return this.#waits.waitForTurn(
      part.request,
      created,
      part.node,
      stop,
      options,
      part.wakeup,
      (current, children) => this.#grant(part, created.path, current, children),
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
    options.place?.bind(async () =>
      (await Promise.all(places.map((place) => place.recount()))).some(Boolean),
    );
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
        this.#grant(part, created[i]!.path, turns[i]!.current, turns[i]!.children),
      );
      return new MultiLease(request.name, leases, this.#store);
    } finally {
      unlink();
      options.place?.bind(undefined);
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

  /**
   * Hands out the lock. A semaphore request may have a waiter right behind it that waits for
   * this grant: it is told (see SemaphoreWakeups).
   */
  #grant(part: Part, path: string, current: HeldPosition, children: readonly string[]): LockRequestNode {
    const { node } = part;
    node.hold(releaseFreesWatchers(part.request.mode) ? this.#waits.releasing(path) : undefined);
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
