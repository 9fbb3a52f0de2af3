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

  /** For a TurnWait: the holders of this engine released while waiters here watched them. */
  get released(): ReleasedHolders {
    return this.#released;
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
  tellPlaces(queue: LocalQueue, me: string, options: AcquireOptions, semaphore: boolean): () => void {
    const stop = queue.wait(me, (ahead) => options.onQueued?.(ahead), semaphore);
    const { place } = options;
    place?.bind(() => queue.recount(me));
    return () => {
      place?.bind(undefined);
      stop();
    };
  }

  /** Counts a request in `dir`'s queue until `leave` is called; the LocalQueue goes with the last one. */
  waitingIn(dir: string): { readonly queue: LocalQueue; readonly leave: () => void } {
    let queue = this.#localQueues.get(dir);
    if (!queue) {
      queue = new LocalQueue(this.#store, dir);
      this.#localQueues.set(dir, queue);
    }
    const left = queue.join();
    const joined = queue;
    return {
      queue: joined,
      leave: () => {
        left();
        if (joined.empty && this.#localQueues.get(dir) === joined) this.#localQueues.delete(dir);
      },
    };
  }

  /** Where `me` stands in a listing of `dir`; a long queue's names are parsed once, not per listing. */
  position(dir: string, children: readonly string[], me: string): Position {
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
export class ReleasedHolders {
  /** Awaited nodes, with how many waiters here wait for each. */
  readonly #awaited = new Map<string, number>();
  readonly #released = new Set<string>();

  /** A waiter waits for `path` until it calls `stopAwaiting`. */
  awaiting(path: string): void {
    this.#awaited.set(path, (this.#awaited.get(path) ?? 0) + 1);
  }

  /** Whether a holder here released `path` while a waiter here awaited it. */
  released(path: string): boolean {
    return this.#released.has(path);
  }

  stopAwaiting(path: string): void {
    const count = (this.#awaited.get(path) ?? 1) - 1;
    if (count > 0) {
      this.#awaited.set(path, count);
    } else {
      this.#awaited.delete(path);
      this.#released.delete(path);
    }
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

/** What a TurnWait is made of: the request, where its node is, and how to end. */
interface TurnWaitParts<T> {
  readonly request: AcquireRequest;
  readonly session: StoreSession;
  readonly node: LockRequestNode;
  readonly stop: Withdrawal;
  readonly options: AcquireOptions;
  readonly wakeup: SemaphoreWakeup | undefined;
  /** The queue's path, and the request's node name in it. */
  readonly dir: string;
  readonly me: string;
  readonly granted: (current: HeldPosition, children: readonly string[]) => T;
  readonly resolve: (value: T) => void;
  readonly reject: (reason: unknown) => void;
}

/**
 * One waiting request's wait for its turn, the recipe's loop as a state machine: either hold,
 * or wait for the deletion of the one node that blocks ours (a semaphore request: for what
 * SemaphoreWake names) and list again. It ends, undoing all it set up, when the request is
 * granted, withdrawn (by its caller or deadline), its node vanishes, its session is lost, or
 * the store fails; at most one step (a deletion, a listing, a confirmation) is awaited at a time.
 */
class TurnWait<T> {
  readonly #waits: QueueWaits;
  readonly #parts: TurnWaitParts<T>;
  #queue: LocalQueue | undefined;
  #ended = false;
  #unlinkStop: (() => void) | undefined;
  #unlinkVanished: (() => void) | undefined;
  #leaveQueue: (() => void) | undefined;
  #untell: (() => void) | undefined;
  /** Stops the step awaited now. */
  #cancelStep: (() => void) | undefined;

  constructor(waits: QueueWaits, parts: TurnWaitParts<T>) {
    this.#waits = waits;
    this.#parts = parts;
  }

  start(current: Position, children: readonly string[]): void {
    const { request, node, stop, options, dir, me } = this.#parts;
    this.#unlinkStop = stop.onWithdrawn((reason) => this.#fail(reason));
    if (this.#ended) return;
    this.#unlinkVanished = node.onVanished((reason) => this.#fail(reason));
    if (this.#ended) return;
    const { queue, leave } = this.#waits.waitingIn(dir);
    this.#queue = queue;
    this.#leaveQueue = leave;
    if (current.kind === 'waiting' && current.ahead > this.#waits.maxWaitersPerLock) {
      this.#fail(
        new LockError(
          'RESOURCE_EXHAUSTED',
          `lock "${request.name}" has ${current.ahead} requests ahead; this server allows ${this.#waits.maxWaitersPerLock}`,
        ),
      );
      return;
    }
    // Told its place now and whenever it changes (a try never waits, so it is never told).
    if (request.waitTimeoutMs !== 0)
      this.#untell = this.#waits.tellPlaces(queue, me, options, request.mode === 'semaphore');
    this.#step(current, children);
  }

  #step(current: Position, children: readonly string[]): void {
    this.#cancelStep = undefined;
    if (this.#ended) return;
    const { request, session, dir, me } = this.#parts;
    if (current.kind === 'missing') {
      this.#fail(nodeVanished(request.name));
      return;
    }
    if (current.kind === 'held') {
      // Never grant on a session the store cannot vouch for: it may already be lost.
      if (session.confirmed) {
        this.#grant(current, children);
        return;
      }
      const unsubscribe = session.onConfirmedChange((confirmed) => {
        if (!confirmed) return;
        unsubscribe();
        this.#cancelStep = undefined;
        queueMicrotask(() => this.#step(current, children));
      });
      this.#cancelStep = unsubscribe;
      return;
    }
    if (request.waitTimeoutMs === 0) {
      this.#fail(
        new LockError(
          'TIMEOUT',
          `lock "${request.name}" is not free (${current.ahead} ahead) and wait_timeout is 0`,
        ),
      );
      return;
    }
    this.#queue!.report(me, current.ahead);
    if (this.#ended) return;
    if (current.wake) {
      this.#awaitSemaphoreWake(current.wake);
      return;
    }
    const predecessor = joinPath(dir, current.predecessor);
    const { released, store } = this.#waits;
    released.awaiting(predecessor);
    const cancelDeletion = store.onceDeleted(predecessor, (error) => {
      const clear = current.heldOncePredecessorGoes || released.released(predecessor);
      released.stopAwaiting(predecessor);
      this.#cancelStep = undefined;
      // Decided after the events delivered with this one: a session's close deletes its nodes
      // in one go, and the deletion of our own node may come right behind our predecessor's.
      queueMicrotask(() => this.#predecessorGone(children, clear, error));
    });
    this.#cancelStep = () => {
      cancelDeletion();
      released.stopAwaiting(predecessor);
    };
  }

  /**
   * Nothing that blocked us is left ahead when the predecessor's deletion alone grants us (see
   * heldOncePredecessorGoes), or when it was a holder of this server whose release frees its
   * watchers (see releaseFreesWatchers), released just now (`clear`): we hold the lock, no
   * listing needed. Our node still exists: its watch, armed since it was created, would have
   * fired first otherwise (a store reports a session's watch events in order).
   */
  #predecessorGone(children: readonly string[], clear: boolean, error?: LockError): void {
    if (this.#ended) return;
    if (error) this.#fail(error);
    else if (clear) this.#step({ kind: 'held', ahead: 0, head: undefined }, children);
    else this.#list();
  }

  /** A semaphore: released weight, or a grant ahead, may let us in; list again to know. */
  #awaitSemaphoreWake(wake: NonNullable<Extract<Position, { kind: 'waiting' }>['wake']>): void {
    const { dir } = this.#parts;
    const stopped = new AbortController();
    this.#cancelStep = () => stopped.abort();
    this.#waits.semaphores.wait(dir, wake, this.#parts.wakeup!, stopped.signal).then(
      (told) => {
        if (stopped.signal.aborted) return;
        if (told) this.#relisted(told);
        else this.#list();
      },
      (error: unknown) => {
        if (!stopped.signal.aborted) this.#fail(error);
      },
    );
  }

  /** Lists the queue, and takes the next step from where the request stands in it. */
  #list(): void {
    let cancelled = false;
    this.#cancelStep = () => (cancelled = true);
    this.#waits.store.children(this.#parts.dir).then(
      (children) => {
        if (!cancelled) this.#relisted(children);
      },
      (error: unknown) => {
        if (!cancelled) this.#fail(error);
      },
    );
  }

  #relisted(children: readonly string[]): void {
    const { dir, me } = this.#parts;
    this.#step(this.#waits.position(dir, children, me), children);
  }

  #grant(current: HeldPosition, children: readonly string[]): void {
    let granted: T;
    try {
      granted = this.#parts.granted(current, children);
    } catch (error) {
      this.#fail(error);
      return;
    }
    this.#end();
    this.#parts.resolve(granted);
  }

  #fail(reason: unknown): void {
    if (this.#ended) return;
    this.#end();
    this.#parts.reject(reason);
  }

  #end(): void {
    this.#ended = true;
    this.#cancelStep?.();
    this.#cancelStep = undefined;
    this.#untell?.();
    this.#leaveQueue?.();
    this.#unlinkVanished?.();
    this.#unlinkStop?.();
  }
}
