/*
 * The queues this engine's requests wait in, as this server sees them: each lock's LocalQueue
 * (its waiters' places and parsed names), QueueWaits (every LocalQueue of the engine, and where
 * a request stands in a listing), and ReleasedHolders (holders here whose release frees the
 * waiters here that watched them).
 */
import { AS_TOLD, type CoordinationStore } from '../stores/store.js';
import {
  bySequence,
  QueueNodeCache,
  queueNodeOf,
  sequenceOf,
  type QueueNode,
  type QueueNodeReader,
} from './lock-nodes.js';
import { position, waiterPlaces, type Position } from './queue-position.js';
import type { SemaphoreWakeups } from './semaphore-wakeups.js';

/** Queues shorter than this are parsed afresh on every listing: cheap, and nothing to keep. */
const NODE_CACHE_FROM = 64;

/** The shortest time between two listings for the waiters' places, while the queue changes. */
export const RELIST_INTERVAL_MS = 25;

/** What a waiting request is told: how many requests are ahead of it. */
export interface QueueListener {
  queued(ahead: number): void;
}

/** A request of this server waiting in the queue, and what it was last told. */
interface LocalWaiter {
  readonly nodeName: string;
  readonly sequence: number;
  lastAhead: number;
  readonly listener: QueueListener;
  /** A semaphore request: its place can change without the node it waits for going. */
  readonly semaphore: boolean;
}

/**
 * Whether a waiter's place can change while the node its own wait watches stays: a lock
 * request with one request ahead waits for that one (its predecessor), whose deletion its own
 * watch reports; with more ahead, any of them may leave first.
 */
function needsQueueWatch(waiter: LocalWaiter): boolean {
  return waiter.semaphore || waiter.lastAhead > 1;
}

/**
 * One lock's queue as the requests of this server that are in it see it. A waiting request is
 * told how many requests are ahead of it whenever that number changes, not only when the one
 * it waits for leaves: while requests of this server wait in the queue with more than the one
 * they wait for ahead of them, one children watch per lock per server and one listing per
 * change (changes close together share one) keep their counts right, without waking any other
 * client. A queue whose waiters each have only their predecessor ahead (one waiter behind one
 * holder, the common case) needs no watch and no listing: their own waits see every change. The queue's parsed nodes live here
 * too, for as long as requests of this server are in it.
 */
export class LocalQueue {
  readonly #store: CoordinationStore;
  readonly #dir: string;
  /**
   * The waiters here: one is kept as it is (a queue nearly always has one waiter of this
   * server), a Map by node name is made for a second.
   */
  #waiter: LocalWaiter | undefined;
  #waiters: Map<string, LocalWaiter> | undefined;
  #cache: QueueNodeCache | undefined;
  /** Requests of this server between their create and their grant or end (waiters and tries). */
  #members = 0;
  /** Stops the children watch, while one is armed. */
  #unwatch: (() => void) | undefined;
  /** Waiters here whose place can change unseen by their own wait (see needsQueueWatch). */
  #needingWatch = 0;
  #relistQueued = false;
  #lastListedAt = Number.NEGATIVE_INFINITY;
  #listing = false;
  #listAgain = false;

  constructor(store: CoordinationStore, dir: string) {
    this.#store = store;
    this.#dir = dir;
  }

  /** A request of this server joined; `leave` once it has left (granted or not). */
  join(): void {
    this.#members += 1;
  }

  leave(): void {
    this.#members -= 1;
  }

  get empty(): boolean {
    return this.#members === 0;
  }

  /**
   * `nodeName` waits in the queue: `listener` is told its number ahead, now (`report`) and
   * after every change, until `unwait`.
   */
  wait(nodeName: string, listener: QueueListener, semaphore: boolean): void {
    const sequence = sequenceOf(nodeName);
    const waiter: LocalWaiter = { nodeName, sequence, lastAhead: -1, listener, semaphore };
    this.unwait(nodeName);
    this.#add(waiter);
    if (needsQueueWatch(waiter)) this.#needWatch(1);
  }

  unwait(nodeName: string): void {
    const waiter = this.#get(nodeName);
    if (!waiter) return;
    if (this.#waiters) this.#waiters.delete(nodeName);
    else this.#waiter = undefined;
    if (needsQueueWatch(waiter)) this.#needWatch(-1);
  }

  /** Tells `nodeName` it has `ahead` requests ahead, unless it was told that last. */
  report(nodeName: string, ahead: number): void {
    const waiter = this.#get(nodeName);
    if (!waiter || waiter.lastAhead === ahead) return;
    this.#setLastAhead(waiter, ahead);
    waiter.listener.queued(ahead);
  }

  #get(nodeName: string): LocalWaiter | undefined {
    if (this.#waiters) return this.#waiters.get(nodeName);
    return this.#waiter?.nodeName === nodeName ? this.#waiter : undefined;
  }

  #add(waiter: LocalWaiter): void {
    if (this.#waiters) {
      this.#waiters.set(waiter.nodeName, waiter);
    } else if (this.#waiter) {
      this.#waiters = new Map([
        [this.#waiter.nodeName, this.#waiter],
        [waiter.nodeName, waiter],
      ]);
      this.#waiter = undefined;
    } else {
      this.#waiter = waiter;
    }
  }

  get #size(): number {
    return this.#waiters ? this.#waiters.size : this.#waiter ? 1 : 0;
  }

  #setLastAhead(waiter: LocalWaiter, ahead: number): void {
    const needed = needsQueueWatch(waiter);
    waiter.lastAhead = ahead;
    const needs = needsQueueWatch(waiter);
    if (needs !== needed) this.#needWatch(needs ? 1 : -1);
  }

  /**
   * Arms the children watch when the first waiter needs it, and lists once then (a change
   * between the waiter's last listing and the watch would go unseen otherwise); stops it when
   * the last one no longer does.
   */
  #needWatch(change: 1 | -1): void {
    this.#needingWatch += change;
    if (this.#needingWatch > 0 && !this.#unwatch) {
      this.#unwatch = this.#store.watchChildren(this.#dir, () => this.#relist());
      this.#relist();
    } else if (this.#needingWatch === 0 && this.#unwatch) {
      this.#unwatch();
      this.#unwatch = undefined;
    }
  }

  /**
   * Lists the queue now and tells `nodeName` its place even if unchanged (a new stream took it
   * over), and the other waiters theirs if changed. False if it is not waiting here or the
   * listing failed.
   */
  async recount(nodeName: string): Promise<boolean> {
    if (!this.#get(nodeName)) return false;
    let children: string[];
    try {
      children = await this.#store.children(this.#dir, AS_TOLD);
    } catch {
      return false;
    }
    const waiter = this.#get(nodeName);
    if (!waiter) return false;
    this.#setLastAhead(waiter, -1);
    this.tell(children);
    return waiter.lastAhead !== -1;
  }

  /**
   * Tells every waiter here its place in `children`, a listing of the queue; not those the
   * listing shows holding (they are granted instead, by their own wait).
   */
  tell(children: readonly string[]): void {
    if (this.#size === 0) return;
    const read = this.nodeReader(children);
    const queue: QueueNode[] = [];
    for (const child of children) {
      const node = read(child);
      if (node) queue.push(node);
    }
    const places = waiterPlaces(queue.sort(bySequence));
    const waiters = this.#waiters ? [...this.#waiters.values()] : this.#waiter ? [this.#waiter] : [];
    for (const waiter of waiters) {
      // A waiter not listed is gone (or going), and one not blocked holds: its own wait says so.
      const ahead = places.get(waiter.sequence);
      if (ahead !== undefined) this.report(waiter.nodeName, ahead);
    }
  }

  /** How to read the names of a listing: a long queue's through its cache (pruned to the listing). */
  nodeReader(children: readonly string[]): QueueNodeReader {
    if (children.length < NODE_CACHE_FROM) {
      this.#cache = undefined;
      return queueNodeOf;
    }
    this.#cache ??= new QueueNodeCache();
    this.#cache.prune(children);
    return this.#cache.read;
  }

  /**
   * Lists the queue after a change and tells the waiters: at once after a quiet moment, at most
   * every RELIST_INTERVAL_MS while the queue is busy (a lock handed over every millisecond would
   * otherwise cost a listing and a message to every waiter per handover); one listing at a time.
   */
  #relist(): void {
    if (this.#relistQueued) return;
    this.#relistQueued = true;
    const wait = this.#lastListedAt + RELIST_INTERVAL_MS - performance.now();
    if (wait <= 0) setImmediate(() => void this.#listAndTell());
    else setTimeout(() => void this.#listAndTell(), wait);
  }

  async #listAndTell(): Promise<void> {
    this.#relistQueued = false;
    this.#lastListedAt = performance.now();
    if (this.#listing) {
      this.#listAgain = true;
      return;
    }
    // The last waiter may have left since the change: nobody to tell, nothing to list.
    if (this.#size === 0) return;
    this.#listing = true;
    try {
      do {
        this.#listAgain = false;
        const children = await this.#store.children(this.#dir, AS_TOLD);
        this.tell(children);
      } while (this.#listAgain && this.#size > 0);
    } catch {
      // The store is unreachable: each waiter hears of it through its own wait.
    } finally {
      this.#listing = false;
    }
  }
}

/**
 * What the waits of one engine's requests (LockRequests) share: the queues they wait in
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

  /** For a request's wait: the semaphore wake-ups. */
  get semaphores(): SemaphoreWakeups {
    return this.#semaphores;
  }

  /** For a request's wait: the most requests a request may find ahead of it. */
  get maxWaitersPerLock(): number {
    return this.#maxWaitersPerLock;
  }

  /**
   * The holders of this engine released while waiters here watched them: a waiting part reads
   * it (see request-wait.ts); a holder of this server whose release frees its watchers (see releaseFreesWatchers) adds its
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
