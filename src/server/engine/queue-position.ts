/*
 * The grant rule, written once as a fold over a lock's queue: `Ahead` adds up the requests
 * ahead of one, `holds` says whether that one holds with them ahead, and `verdict` what it
 * waits for if not. Everything else is read from it: a request's position (position()), how
 * many lead the queue holding and the weight they use (holders()), the places of the waiters
 * (waiterPlaces()), and the engine's shortcuts that grant without listing again
 * (`heldOncePredecessorGoes`, releaseFreesWatchers()).
 */
import { conflicts, type LockMode } from './lock-request.js';
import { modeOf, queueNodeOf, semaphoreShape, type QueueNode, type QueueNodeReader } from './lock-nodes.js';

export type Position =
  | {
      readonly kind: 'held';
      readonly ahead: number;
      /** The first request of the queue, if not ours: the one a new request must agree with. */
      readonly head: string | undefined;
      /** Semaphores: the request right behind ours, which may wait for our grant (see SemaphoreWake). */
      readonly successor?: string | undefined;
    }
  | {
      readonly kind: 'waiting';
      /** How many requests are ahead of ours, holders included. */
      readonly ahead: number;
      /** The one node whose deletion can change our position (no herd: never the parent). */
      readonly predecessor: string;
      /** The predecessor is the head of the queue. */
      readonly predecessorIsHead: boolean;
      /**
       * Whether the predecessor's deletion alone grants us: it is the head (later nodes queue
       * behind us, so nothing that blocks us is left ahead), and its node cannot be replaced by
       * one that still blocks us (a WRITE node that goes may be a downgrade to a READ node in
       * its place). Then we hold without listing again.
       */
      readonly heldOncePredecessorGoes: boolean;
      readonly head: string | undefined;
      /** Semaphores: what can change our position (instead of the predecessor's deletion alone). */
      readonly wake?: SemaphoreWake;
    }
  | { readonly kind: 'missing' };

export type HeldPosition = Extract<Position, { kind: 'held' }>;
export type WaitingPosition = Extract<Position, { kind: 'waiting' }>;

/**
 * What a waiting semaphore request waits for. Granted in queue order, it is blocked either by
 * holders only (it is the first waiter: any of their releases frees weight it may fit in, and
 * nothing else can), or by a waiting request right ahead of it (nothing changes for it until
 * that one is granted or goes; its grant is signalled to it, see LockEngine).
 */
export type SemaphoreWake =
  | { readonly kind: 'release'; readonly holders: readonly string[] }
  | { readonly kind: 'grant'; readonly predecessor: string };

/** A request as the grant rule sees it: its mode, and a semaphore request's limit and weight. */
type Claim = Pick<QueueNode, 'mode' | 'limit' | 'weight'>;

/**
 * What the requests ahead of one in its queue add up to: all the grant rule asks of them.
 * Every field is a count, a sum, or the earliest or latest request, so requests may be added
 * in any order: one pass over an unsorted listing gives what is ahead of one request (no sort
 * per request: every request lists its whole queue, and with 10,000 waiters an O(n log n) step
 * per request would dominate), one pass along the sorted queue what is ahead of each.
 */
class Ahead {
  count = 0;
  /** Those of them that conflict with a read (every mode but read). */
  exclusive = 0;
  /** Lock requests (not semaphore requests): a semaphore request never fits behind one. */
  locks = 0;
  /** The semaphore requests' weight. */
  weight = 0;
  head: QueueNode | undefined;
  last: QueueNode | undefined;
  lastExclusive: QueueNode | undefined;
  // Their sequences, kept beside them: compared for every request of every listing.
  #headSequence = Number.POSITIVE_INFINITY;
  #lastSequence = Number.NEGATIVE_INFINITY;
  #lastExclusiveSequence = Number.NEGATIVE_INFINITY;
  /** Every request ahead, if kept (a semaphore's first waiter watches them all). */
  readonly nodes: QueueNode[] | undefined;

  constructor(keepNodes: boolean) {
    this.nodes = keepNodes ? [] : undefined;
  }

  add(node: QueueNode): void {
    const { sequence } = node;
    this.count += 1;
    if (this.nodes) this.nodes.push(node);
    if (node.mode === 'semaphore') this.weight += node.weight;
    else this.locks += 1;
    if (sequence < this.#headSequence) {
      this.head = node;
      this.#headSequence = sequence;
    }
    if (sequence > this.#lastSequence) {
      this.last = node;
      this.#lastSequence = sequence;
    }
    if (conflicts(node.mode, 'read')) {
      this.exclusive += 1;
      if (sequence > this.#lastExclusiveSequence) {
        this.lastExclusive = node;
        this.#lastExclusiveSequence = sequence;
      }
    }
  }
}

/**
 * The grant rule: whether a request holds the lock with `ahead` ahead of it. The head of the
 * queue holds. A lock request holds when nothing ahead conflicts with it (see conflicts(): the exclusive requests ahead
 * always do, the reads only if it conflicts with a read). A semaphore request holds when the
 * weights up to and including its own fit its limit; a lock request ahead of it (one that is
 * about to fail, see disagreement()) never fits, so nothing passes it. The holders are always
 * the queue's leading requests: behind a waiting request every request waits too (sums only
 * grow along the queue, and what blocks a waiter blocks whoever is behind it).
 */
function holds(ahead: Ahead, me: Claim): boolean {
  if (ahead.count === 0) return true;
  if (me.mode === 'semaphore') return ahead.locks === 0 && ahead.weight + me.weight <= me.limit;
  return ahead.exclusive === 0 && !conflicts('read', me.mode);
}

/**
 * Where a request stands with `ahead` ahead of it. A waiting lock request watches the latest
 * request ahead that conflicts with it: an exclusive one the node just before it, a read the
 * last exclusive node before it. A waiting semaphore request watches the holders if it is the
 * first waiter (all ahead hold), else the waiter right ahead of it.
 */
function verdict(ahead: Ahead, me: Claim, successor: QueueNode | undefined): Position {
  const head = ahead.head?.nodeName;
  if (holds(ahead, me)) {
    return me.mode === 'semaphore'
      ? { kind: 'held', ahead: ahead.count, head, successor: successor?.nodeName }
      : { kind: 'held', ahead: ahead.count, head };
  }
  if (me.mode === 'semaphore') {
    const predecessor = ahead.last!.nodeName;
    const firstWaiter = ahead.locks === 0 && ahead.weight <= me.limit;
    const wake: SemaphoreWake = firstWaiter
      ? { kind: 'release', holders: ahead.nodes!.map((node) => node.nodeName) }
      : { kind: 'grant', predecessor };
    return {
      kind: 'waiting',
      ahead: ahead.count,
      predecessor,
      predecessorIsHead: false,
      heldOncePredecessorGoes: false,
      head,
      wake,
    };
  }
  const blocker = conflicts('read', me.mode) ? ahead.last! : ahead.lastExclusive!;
  const predecessorIsHead = blocker === ahead.head;
  return {
    kind: 'waiting',
    ahead: ahead.count,
    predecessor: blocker.nodeName,
    predecessorIsHead,
    heldOncePredecessorGoes: predecessorIsHead && !(blocker.mode === 'write' && conflicts('read', me.mode)),
    head,
  };
}

/**
 * Whether a lock held in `mode` is all that blocks whoever watches its node: an exclusive
 * holder is alone at the head (nothing conflicts with it, and it conflicts with every request),
 * and a waiter watches the latest request ahead that blocks it, so once the holder's node goes
 * nothing that blocks that waiter is left ahead (the engine then grants it without listing).
 * Semaphore holders share the lock by weight: their release may not be enough.
 */
export function releaseFreesWatchers(mode: LockMode): boolean {
  return mode !== 'semaphore' && conflicts(mode, 'read');
}

/**
 * Where our request `me` stands in `children` (a listing of its queue, in any order). One pass
 * over the children, no sort (see Ahead); `read` parses the names (a long queue's through its
 * QueueNodeCache).
 */
export function position(
  children: readonly string[],
  me: string,
  read: QueueNodeReader = queueNodeOf,
): Position {
  const mine = read(me);
  if (!mine) return { kind: 'missing' };
  const semaphore = mine.mode === 'semaphore';
  const ahead = new Ahead(semaphore);
  let found = false;
  let successor: QueueNode | undefined;
  for (const child of children) {
    if (child === me) {
      found = true;
      continue;
    }
    // Nodes that are not lock requests (written by someone else) take no part in the queue.
    const node = read(child);
    if (node === undefined) continue;
    if (node.sequence < mine.sequence) ahead.add(node);
    else if (semaphore && (successor === undefined || node.sequence < successor.sequence)) successor = node;
  }
  if (!found) return { kind: 'missing' };
  return verdict(ahead, mine, successor);
}

/**
 * How many requests lead `queue` (in queue order) holding it, and the semaphore weight they
 * use: the fold along the queue, up to its first waiter.
 */
export function holders(queue: readonly QueueNode[]): { count: number; usedWeight: number } {
  const ahead = new Ahead(false);
  for (const node of queue) {
    if (!holds(ahead, node)) break;
    ahead.add(node);
  }
  return { count: ahead.count, usedWeight: ahead.weight };
}

/** The waiters of `queue` (in queue order), by sequence, with how many requests are ahead of each. */
export function waiterPlaces(queue: readonly QueueNode[]): Map<number, number> {
  const places = new Map<number, number>();
  for (let ahead = holders(queue).count; ahead < queue.length; ahead += 1) {
    places.set(queue[ahead]!.sequence, ahead);
  }
  return places;
}

/**
 * Why a new request `me` cannot join a queue whose first request is `head`, or undefined if it
 * can: a name is a semaphore of one limit, an election (its candidates), or a lock (MUTEX,
 * READ, WRITE), while requests for it exist. Said once, when a request first lists its queue.
 */
export function disagreement(head: string, me: string): string | undefined {
  const headMode = modeOf(head);
  const myMode = modeOf(me);
  const describe = (mode: LockMode, nodeName: string): string =>
    mode === 'semaphore'
      ? `a semaphore of limit ${semaphoreShape(nodeName).limit}`
      : mode === 'candidate'
        ? 'an election (its candidates campaign for it)'
        : `${mode.toUpperCase()} mode`;
  const special = (mode: LockMode): boolean => mode === 'semaphore' || mode === 'candidate';
  if (!special(headMode) && !special(myMode)) return undefined;
  if (
    headMode === myMode &&
    (myMode !== 'semaphore' || semaphoreShape(head).limit === semaphoreShape(me).limit)
  )
    return undefined;
  return `the request first in its queue uses it as ${describe(headMode, head)}; this request asks for ${describe(myMode, me)}`;
}
