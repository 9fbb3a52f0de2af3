/*
 * The engine's entry point (LockEngine): lock requests taken and leases handed out by the lock
 * recipe, on any store; requests another instance left are adopted, and holders asked to let go
 * (revoke).
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { joinPath, type CoordinationStore, type NodeReplacement, type OwnedNode } from '../stores/store.js';
import { Acquisition, type AcquireListener, type AcquisitionEngine } from './acquisition.js';
import type { AcquireOptions, AcquireRequest, Lease, RequestOptions } from './lock-request.js';
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
  /** What every request of this engine (an Acquisition) works with. */
  readonly #parts: AcquisitionEngine;

  constructor(options: LockEngineOptions) {
    const store = options.store;
    this.#store = store;
    this.#locksPath = locksPathOf(options.rootPath);
    this.#logger = options.logger;
    const semaphores = new SemaphoreWakeups(store, this.#logger);
    this.#parts = {
      store,
      replacement: options.replacement,
      logger: this.#logger,
      instanceId: options.instanceId ?? randomUUID(),
      semaphores,
      waits: new QueueWaits({
        store,
        maxWaitersPerLock: options.maxWaitersPerLock ?? Number.POSITIVE_INFINITY,
        semaphores,
      }),
      dependents: new SessionDependents(),
      lockPath: (name) => this.lockPath(name),
      withdraw: (path) => this.#withdraw(path),
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
   * Queues for the lock (for a multi-lock, every lock of it) and resolves once it is held.
   * Rejects with `LockError`: INVALID_ARGUMENT (bad request), TIMEOUT (`waitTimeoutMs` passed,
   * or the lock was not free for a try), UNAVAILABLE (store unreachable); or with the
   * withdrawal's reason when it is withdrawn. Nothing stays queued after a rejection.
   */
  acquire(request: AcquireRequest, options: AcquireOptions): Promise<Lease> {
    return new Promise((resolve, reject) => {
      this.request(request, options, {
        queued: options.onQueued ?? ignore,
        granted: resolve,
        failed: reject,
      });
    });
  }

  /**
   * As `acquire`, told through `listener` (its place while it waits, then its lease or why it
   * has none, always after this call returns): a waiting request keeps no promise.
   */
  request(request: AcquireRequest, options: RequestOptions, listener: AcquireListener): void {
    try {
      validateRequest(request);
      options.withdrawal.throwIfWithdrawn();
    } catch (error) {
      queueMicrotask(() => listener.failed(error));
      return;
    }
    new Acquisition(this.#parts, request, options, listener, false).queue();
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
    return new Promise((resolve, reject) => {
      this.adoptRequest(request, nodes, options, {
        queued: options.onQueued ?? ignore,
        granted: resolve,
        failed: reject,
      });
    });
  }

  /** As `adopt`, told through `listener` (as `request` is). */
  adoptRequest(
    request: AcquireRequest,
    nodes: readonly OwnedNode[],
    options: RequestOptions,
    listener: AcquireListener,
  ): void {
    if (options.withdrawal.withdrawn) {
      const { reason } = options.withdrawal;
      queueMicrotask(() => listener.failed(reason));
      return;
    }
    new Acquisition(this.#parts, request, options, listener, true).adopt(nodes);
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

/** Told nothing: a request whose caller listens for no place. */
const ignore = (): void => {};
