/*
 * The engine's entry point (LockEngine): lock requests taken and leases handed out by the lock
 * recipe, on any store; requests another instance left are adopted, and holders asked to let go
 * (revoke).
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import {
  joinPath,
  type CoordinationStore,
  type NodeReplacement,
  type OwnedNode,
  type RecordTransactions,
} from '../stores/store.js';
import { LockRequest } from './request.js';
import type { RequestEngine } from './request-wait.js';
import { CallerLease } from './caller-lease.js';
import { ElectionHistory, notLeader } from './election-history.js';
import type { AcquireOptions, AcquireRequest, Lease } from './lock-request.js';
import { encodeLockName, validateLockName } from './lock-nodes.js';
import { QueueWaits } from './local-queue.js';
import { validateRequest } from './request-validation.js';
import { Revoker } from './revocation.js';
import { SemaphoreWakeups } from './semaphore-wakeups.js';
import { SessionDependents } from './session-dependents.js';

/** The store path under which every lock's queue lives, for lockstream's root `rootPath`. */
export function locksPathOf(rootPath: string): string {
  return joinPath(rootPath, 'locks');
}

export interface LockEngineOptions {
  readonly store: CoordinationStore;
  /** How a WRITE hold's downgrade replaces its node; absent: a downgrade is UNSUPPORTED. */
  readonly replacement?: NodeReplacement | undefined;
  /** How elections record their terms; absent: elections are UNSUPPORTED. */
  readonly records?: RecordTransactions | undefined;
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
 * lock or wait for the deletion of the one node that blocks ours (QueueWaits); on any failure
 * or abort, delete our node before giving up.
 */
export class LockEngine {
  readonly #store: CoordinationStore;
  readonly #locksPath: string;
  readonly #logger: Logger;
  readonly #revoker: Revoker;
  /** What every request of this engine (a LockRequest) works with. */
  readonly requests: RequestEngine;
  /** The histories of elections (see ElectionHistory). */
  readonly elections: ElectionHistory;

  constructor(options: LockEngineOptions) {
    const store = options.store;
    this.#store = store;
    this.#locksPath = locksPathOf(options.rootPath);
    this.#logger = options.logger;
    const semaphores = new SemaphoreWakeups(store, this.#logger);
    const instanceId = options.instanceId ?? randomUUID();
    this.elections = new ElectionHistory({
      store,
      records: options.records,
      rootPath: options.rootPath,
      instanceId,
      logger: this.#logger,
    });
    this.requests = {
      store,
      replacement: options.replacement,
      logger: this.#logger,
      instanceId,
      semaphores,
      waits: new QueueWaits({
        store,
        maxWaitersPerLock: options.maxWaitersPerLock ?? Number.POSITIVE_INFINITY,
        semaphores,
      }),
      dependents: new SessionDependents(),
      lockPath: (name) => this.lockPath(name),
      withdraw: (path) => this.#withdraw(path),
      elections: this.elections,
    };
    this.#revoker = new Revoker({
      store,
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
   * Queues for the lock (for a multi-lock, every lock of it) and resolves once it is held: an
   * in-process caller's request, a session of one request whose lease is handed to the caller
   * with the grant. Rejects with `LockError`: INVALID_ARGUMENT (bad request), TIMEOUT
   * (`waitTimeoutMs` passed, or the lock was not free for a try), UNAVAILABLE (store
   * unreachable); or with the withdrawal's reason when it is withdrawn. Nothing stays queued
   * after a rejection.
   */
  acquire(request: AcquireRequest, options: AcquireOptions): Promise<Lease> {
    return this.#call(request, options, undefined);
  }

  /**
   * Carries on a request whose nodes exist already, made by another instance in a session this
   * engine's store has taken over (see SessionTakeover): `nodes` in the request's order (a
   * multi-lock's in its locks' order). Resolves once it holds, as `acquire` does: at once if
   * it held before (a grant never goes back, and its fencing token is its node's), else when
   * its turn comes. Rejects as `acquire` does, and with LOCK_LOST when a node is gone or the
   * session ends while it waits (a taken-over session is not replaced: nothing is queued again).
   */
  adopt(request: AcquireRequest, nodes: readonly OwnedNode[], options: AcquireOptions): Promise<Lease> {
    return this.#call(request, options, nodes);
  }

  #call(
    request: AcquireRequest,
    options: AcquireOptions,
    adopted: readonly OwnedNode[] | undefined,
  ): Promise<Lease> {
    return new Promise((resolve, reject) => {
      try {
        if (!adopted) validateRequest(request);
        options.withdrawal.throwIfWithdrawn();
      } catch (error) {
        reject(error);
        return;
      }
      const lease = new CallerLease(options);
      const made = new LockRequest(this.requests, lease, 0, request, adopted);
      lease.request = made;
      lease.over = options.withdrawal.onWithdrawn((reason) => made.withdraw(reason));
      made.takeTurn(ignore);
      lease.granted.then(resolve, reject);
    });
  }

  /**
   * Ends the term `term` of election `name`: its leader's node is told to go at once, as by a
   * revocation whose deadline has passed (its instance tells the leader, then deletes the node).
   * NOT_HELD (see notLeader) when `term` is not the current leader's.
   */
  async resign(name: string, term: bigint): Promise<void> {
    validateLockName(name);
    const leader = await this.elections.leader(name);
    if (leader?.term !== term) throw notLeader(name, term);
    const asked = await this.#revoker.revokeNode(name, leader.node, `term ${term} ended by Resign`, 0);
    if (!asked) throw notLeader(name, term);
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

/** Nothing to do: an in-process request has no turn to give back among a session's store work. */
const ignore = (): void => {};
