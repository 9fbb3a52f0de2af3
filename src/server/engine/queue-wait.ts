import { LockError } from '../lock-error.js';
import { baseName, type CoordinationStore, type CreatedNode } from '../stores/store.js';
import type { LockRequestNode } from './lease.js';
import { LocalQueue } from './local-queue.js';
import { Withdrawal, type AcquireOptions, type AcquireRequest } from './lock-request.js';
import { disagreement, position, type HeldPosition, type Position } from './queue-position.js';
import type { SemaphoreWakeup, SemaphoreWakeups } from './semaphore-wakeups.js';
import { ReleasedHolders } from './released-holders.js';
import { TurnWait, type TurnWaits } from './turn-wait.js';

/**
 * The waits of one engine's requests for their turn: a request that holds at once is granted
 * here; one that must wait becomes a TurnWait (the recipe's loop). Also what those waits share:
 * the queues they wait in (LocalQueue: their places, and the parsed names of long queues), and
 * the holders of this engine released while waiters here watched them.
 */
export class QueueWaits implements TurnWaits {
  readonly #store: CoordinationStore;
  readonly #maxWaitersPerLock: number;
  readonly #semaphores: SemaphoreWakeups;
  /** The queues requests of this engine wait in, by lock path (see LocalQueue). */
  readonly #localQueues = new Map<string, LocalQueue>();
  readonly #released = new ReleasedHolders();

  constructor(options: {
    readonly store: CoordinationStore;
    readonly maxWaitersPerLock: number;
    readonly semaphores: SemaphoreWakeups;
  }) {
    this.#store = options.store;
    this.#maxWaitersPerLock = options.maxWaitersPerLock;
    this.#semaphores = options.semaphores;
  }

  /**
   * Waits until the request's node may hold its lock; `granted` then says what to hand out.
   * A request that must wait is a TurnWait: a state machine, not a suspended async frame.
   */
  waitForTurn<T>(
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
    const children: readonly string[] = created.siblings;
    const current: Position = this.position(dir, children, me);
    try {
      if (current.kind !== 'missing' && current.head !== undefined) {
        const why = disagreement(current.head, me);
        if (why !== undefined) throw new LockError('MISMATCHED_REQUEST', `lock "${request.name}": ${why}`);
      }
      if (current.kind === 'held' && session.confirmed) {
        // Uncontended: no wait, nothing to undo.
        stop.throwIfWithdrawn();
        session.lost.throwIfAborted();
        return Promise.resolve(granted(current, children));
      }
    } catch (error) {
      return Promise.reject(error);
    }
    return new Promise<T>((resolve, reject) => {
      const parts = { request, session, node, stop, options, wakeup, dir, me, granted, resolve, reject };
      new TurnWait<T>(this, parts).start(current, children);
    });
  }

  /** For a TurnWait: the store. */
  get store(): CoordinationStore {
    return this.#store;
  }

  /** For a TurnWait: the semaphore wake-ups. */
  get semaphores(): SemaphoreWakeups {
    return this.#semaphores;
  }

  /** For a TurnWait: the most requests a request may find ahead of it. */
  get maxWaitersPerLock(): number {
    return this.#maxWaitersPerLock;
  }

  /**
   * The holders of this engine released while waiters here watched them: a TurnWait reads it;
   * a lease of this server whose release frees its watchers (see releaseFreesWatchers) adds its
   * node when released, and waiters here that watch that node then hold without listing again.
   */
  get released(): ReleasedHolders {
    return this.#released;
  }

  /** Counts a request in `dir`'s queue until it calls `leave` with the queue returned. */
  join(dir: string): LocalQueue {
    let queue = this.#localQueues.get(dir);
    if (!queue) {
      queue = new LocalQueue(this.#store, dir);
      this.#localQueues.set(dir, queue);
    }
    queue.join();
    return queue;
  }

  /** A request joined with `join` has left `queue`; the LocalQueue goes with the last one. */
  leave(dir: string, queue: LocalQueue): void {
    queue.leave();
    if (queue.empty && this.#localQueues.get(dir) === queue) this.#localQueues.delete(dir);
  }

  /** Where `me` stands in a listing of `dir`; a long queue's names are parsed once, not per listing. */
  position(dir: string, children: readonly string[], me: string): Position {
    const queue = this.#localQueues.get(dir);
    return queue ? position(children, me, queue.nodeReader(children)) : position(children, me);
  }
}

const nothingToDispose = (): void => {};

/**
 * What stops a request: the caller's withdrawal, and with a wait timeout, its deadline too (a
 * withdrawal of the engine's own that follows the caller's). A timer only where a deadline is.
 */
export function withDeadline(
  request: AcquireRequest,
  withdrawal: Withdrawal,
): { readonly stop: Withdrawal } & Disposable {
  const ms = request.waitTimeoutMs;
  if (ms === undefined || ms === 0) return { stop: withdrawal, [Symbol.dispose]: nothingToDispose };
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
