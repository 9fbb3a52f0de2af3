import type { CoordinationStore } from '../stores/store.js';
import { LocalQueue } from './local-queue.js';
import { position, type Position } from './queue-position.js';
import type { SemaphoreWakeups } from './semaphore-wakeups.js';
import { ReleasedHolders } from './released-holders.js';

/**
 * What the waits of one engine's requests (Acquisitions) share: the queues they wait in
 * (LocalQueue: their places, and the parsed names of long queues), where a request stands in a
 * listing, and the holders of this engine released while waiters here watched them.
 */
export class QueueWaits {
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

  /** For an Acquisition's wait: the semaphore wake-ups. */
  get semaphores(): SemaphoreWakeups {
    return this.#semaphores;
  }

  /** For an Acquisition's wait: the most requests a request may find ahead of it. */
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
