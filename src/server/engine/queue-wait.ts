import { LockError } from '../lock-error.js';
import { baseName, type CoordinationStore, type CreatedNode } from '../stores/store.js';
import type { LockRequestNode } from './lease.js';
import { LocalQueue } from './local-queue.js';
import { Withdrawal, type AcquireRequest, type QueuePlace } from './lock-request.js';
import { disagreement, position, type Position } from './queue-position.js';
import type { SemaphoreWakeup, SemaphoreWakeups } from './semaphore-wakeups.js';
import { ReleasedHolders } from './released-holders.js';
import { TurnWait, type TurnOwner, type TurnWaits } from './turn-wait.js';

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
   * Waits until the request's node may hold its lock, then tells `owner` its turn came (or why
   * the wait ended without it; at once in either case when no wait is needed). A request that
   * must wait is a TurnWait: a state machine, not a suspended async frame.
   */
  waitForTurn(
    request: AcquireRequest,
    created: CreatedNode,
    node: LockRequestNode,
    stop: Withdrawal,
    place: QueuePlace | undefined,
    wakeup: SemaphoreWakeup | undefined,
    owner: TurnOwner,
  ): void {
    const { path, session } = created;
    const dir = path.slice(0, path.lastIndexOf('/'));
    const me = baseName(path);
    const children: readonly string[] = created.siblings;
    let current: Position;
    try {
      current = this.position(dir, children, me);
      if (current.kind !== 'missing' && current.head !== undefined) {
        const why = disagreement(current.head, me);
        if (why !== undefined) throw new LockError('MISMATCHED_REQUEST', `lock "${request.name}": ${why}`);
      }
      if (current.kind === 'held' && session.confirmed) {
        // Uncontended: no wait, nothing to undo.
        stop.throwIfWithdrawn();
        session.lost.throwIfAborted();
        owner.turn(current, children);
        return;
      }
    } catch (error) {
      owner.turnFailed(error);
      return;
    }
    const parts = { request, session, node, stop, place, wakeup, dir, me, owner };
    new TurnWait(this, parts).start(current, children);
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

/**
 * A withdrawal of the engine's own for a request with a wait timeout: it follows the caller's,
 * and comes by itself when the timeout passes.
 */
class Deadline extends Withdrawal {
  readonly #timer: NodeJS.Timeout;
  readonly #unlink: () => void;

  constructor(request: AcquireRequest, withdrawal: Withdrawal, ms: number) {
    super();
    this.#unlink = withdrawal.onWithdrawn((reason) => this.withdraw(reason));
    this.#timer = setTimeout(() => {
      const what = request.locks ? `locks ${request.name} were` : `lock "${request.name}" was`;
      this.withdraw(new LockError('TIMEOUT', `${what} not acquired within ${ms} ms`));
    }, ms);
  }

  end(): void {
    clearTimeout(this.#timer);
    this.#unlink();
  }
}

/**
 * What stops a request: the caller's withdrawal itself, or with a wait timeout, a Deadline that
 * follows it (a timer only where a deadline is); `endDeadline` once the request is over.
 */
export function withDeadline(request: AcquireRequest, withdrawal: Withdrawal): Withdrawal {
  const ms = request.waitTimeoutMs;
  return ms === undefined || ms === 0 ? withdrawal : new Deadline(request, withdrawal, ms);
}

/** The request that `stop` (from withDeadline) stops is over: its timer, if any, goes. */
export function endDeadline(stop: Withdrawal): void {
  if (stop instanceof Deadline) stop.end();
}
