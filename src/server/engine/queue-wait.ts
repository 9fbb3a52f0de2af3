import { onAbort } from '../../common/abort.js';
import { disposable } from '../../common/disposable.js';
import { LockError } from '../lock-error.js';
import {
  baseName,
  joinPath,
  type CoordinationStore,
  type CreatedNode,
  type StoreSession,
} from '../stores/store.js';
import { nodeVanished, type LockRequestNode } from './lease.js';
import { LocalQueue } from './local-queue.js';
import { Withdrawal, type AcquireOptions, type AcquireRequest } from './lock-request.js';
import { disagreement, position, type HeldPosition, type Position } from './queue-position.js';
import type { SemaphoreWakeup, SemaphoreWakeups } from './semaphore-wakeups.js';

/**
 * The wait of one request's node for its turn, the recipe's loop: list the queue, and either
 * hold, or wait for the deletion of the one node that blocks ours (a semaphore request: for
 * what SemaphoreWake names) and list again. Also what the waits of one engine share: the
 * queues they wait in (LocalQueue: their places, and the parsed names of long queues), and the
 * holders of this engine released while waiters here watched them.
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

  /** Waits until the request's node may hold its lock; `granted` then says what to hand out. */
  async waitForTurn<T>(
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
        const told = await this.#semaphores.wait(dir, current.wake, wakeup!, waitSignal);
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
      let clear: boolean;
      {
        using awaiting = this.#released.awaiting(predecessor);
        await this.#store.waitUntilDeleted(predecessor, { signal: waitSignal });
        waitSignal.throwIfAborted();
        clear = current.heldOncePredecessorGoes || awaiting.released;
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
   * What to call as a lease of this server, whose release frees its watchers (see
   * releaseFreesWatchers), releases the node at `path`: waiters here that watch that node then
   * hold without listing again.
   */
  releasing(path: string): () => void {
    return () => this.#released.add(path);
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
}

/** Released holders remembered for the waiters behind them, at most. */
const MAX_RELEASED_HOLDERS = 10_000;

/**
 * Nodes that waiters of this engine wait for, and those of them that holders of this engine
 * released, whose release frees their watchers. Only nodes a waiter here waits for are kept,
 * and at most MAX_RELEASED_HOLDERS (a waiter that gave up leaves its entry behind).
 */
class ReleasedHolders {
  /** Awaited nodes, with how many waiters here wait for each. */
  readonly #awaited = new Map<string, number>();
  readonly #released = new Set<string>();

  /** A waiter waits for `path` until disposed; `released` says whether a holder here released it. */
  awaiting(path: string): { readonly released: boolean } & Disposable {
    this.#awaited.set(path, (this.#awaited.get(path) ?? 0) + 1);
    const released = this.#released;
    return {
      get released() {
        return released.has(path);
      },
      [Symbol.dispose]: () => {
        const count = (this.#awaited.get(path) ?? 1) - 1;
        if (count > 0) {
          this.#awaited.set(path, count);
        } else {
          this.#awaited.delete(path);
          this.#released.delete(path);
        }
      },
    };
  }

  add(path: string): void {
    if (!this.#awaited.has(path)) return; // nobody here waits for it
    if (this.#released.size >= MAX_RELEASED_HOLDERS) {
      const oldest = this.#released.values().next();
      if (!oldest.done) this.#released.delete(oldest.value);
    }
    this.#released.add(path);
  }
}

/**
 * What stops a request: the caller's withdrawal, and with a wait timeout, its deadline too (a
 * withdrawal of the engine's own that follows the caller's). A timer only where a deadline is.
 */
export function withDeadline(
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
