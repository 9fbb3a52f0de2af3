import type { LockMode } from './lock-mode.js';
import { conflicts } from './lock-mode.js';

/**
 * One request in a lock's queue, parsed from its node name: `<mode>-<request id>-<sequence>`
 * for the lock modes, `sem-<limit>-<weight>-<request id>-<sequence>` for a semaphore request.
 */
export interface QueueEntry {
  readonly nodeName: string;
  readonly mode: LockMode;
  readonly requestId: string;
  /** ZooKeeper's sequence suffix: queue order within one lifetime of the lock's parent. */
  readonly sequence: number;
  /** A semaphore request's limit and weight; 0 for the lock modes. */
  readonly limit: number;
  readonly weight: number;
}

/** A semaphore request's capacity and its share of it. */
export interface SemaphoreShape {
  readonly limit: number;
  readonly weight: number;
}

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
      /**
       * The predecessor is the head of the queue: once it is deleted, nothing that blocks us
       * remains ahead (later nodes queue behind us), so we hold without listing again.
       */
      readonly predecessorIsHead: boolean;
      readonly head: string | undefined;
      /** Semaphores: what can change our position (instead of the predecessor's deletion alone). */
      readonly wake?: SemaphoreWake;
    }
  | { readonly kind: 'missing' };

export type HeldPosition = Extract<Position, { kind: 'held' }>;

/**
 * What a waiting semaphore request waits for. Granted in queue order, it is blocked either by
 * holders only (it is the first waiter: any of their releases frees weight it may fit in, and
 * nothing else can), or by a waiting request right ahead of it (nothing changes for it until
 * that one is granted or goes; its grant is signalled to it, see LockEngine).
 */
export type SemaphoreWake =
  | { readonly kind: 'release'; readonly holders: readonly string[] }
  | { readonly kind: 'grant'; readonly predecessor: string };

/** The node name prefix for a request; the store appends the sequence number. */
export function nodePrefix(mode: LockMode, requestId: string, shape?: SemaphoreShape): string {
  if (mode !== 'semaphore') return `${mode}-${requestId}-`;
  if (!shape) throw new TypeError('a semaphore request needs a limit and a weight');
  return `sem-${shape.limit}-${shape.weight}-${requestId}-`;
}

const DASH = 0x2d;
const REQUEST_ID_LENGTH = 36;
/** Where randomUUID() puts its dashes, from the start of the request id. */
const UUID_DASHES = [8, 13, 18, 23] as const;

/** Whether `text` stands in `nodeName` at `offset` (startsWith without its call overhead). */
function hasAt(nodeName: string, text: string, offset: number): boolean {
  for (let i = 0; i < text.length; i += 1) {
    if (nodeName.charCodeAt(offset + i) !== text.charCodeAt(i)) return false;
  }
  return true;
}

/** The length of the `<mode>-` (or `sem-<limit>-<weight>-`) prefix of a request node's name, 0 if it has none. */
function modePrefixLength(nodeName: string): number {
  const first = nodeName.charCodeAt(0);
  if (first === 0x6d /* m */) return hasAt(nodeName, 'mutex-', 0) ? 6 : 0;
  if (first === 0x77 /* w */) return hasAt(nodeName, 'write-', 0) ? 6 : 0;
  if (first === 0x72 /* r */) return hasAt(nodeName, 'read-', 0) ? 5 : 0;
  if (first === 0x73 /* s */) return hasAt(nodeName, 'sem-', 0) ? semaphoreFieldsEnd(nodeName) : 0;
  return 0;
}

/** Digits a semaphore node's limit or weight may have (SEMAPHORE_LIMIT_MAX has 7). */
const SHAPE_MAX_DIGITS = 7;

/** Where the `<limit>-<weight>-` after `sem-` ends, 0 if it is malformed. */
function semaphoreFieldsEnd(nodeName: string): number {
  let i = 4;
  for (let field = 0; field < 2; field += 1) {
    const start = i;
    while (i - start <= SHAPE_MAX_DIGITS && isDigit(nodeName.charCodeAt(i))) i += 1;
    if (i === start || i - start > SHAPE_MAX_DIGITS || nodeName.charCodeAt(i) !== DASH) return 0;
    i += 1;
  }
  return i;
}

function isDigit(code: number): boolean {
  return code >= 0x30 && code <= 0x39;
}

/** The limit and weight a semaphore node's name carries (a name `sequenceOf` accepted as one). */
export function semaphoreShape(nodeName: string): SemaphoreShape {
  const limitEnd = nodeName.indexOf('-', 4);
  const weightEnd = nodeName.indexOf('-', limitEnd + 1);
  return {
    limit: Number(nodeName.slice(4, limitEnd)),
    weight: Number(nodeName.slice(limitEnd + 1, weightEnd)),
  };
}

/**
 * Sequence numbers of one lock's queue, by node name. `position()` needs every child's sequence
 * for every request, so a queue of n waiters costs n²/2 lookups (50 million for 10,000 waiters);
 * names repeat from listing to listing, so a long queue parses each once. Only long queues
 * keep one (see the engine), and it is pruned to the names still listed, so memory follows
 * the queues that exist, not the requests that have been.
 */
export class SequenceCache {
  readonly #sequences = new Map<string, number>();

  sequenceOf(nodeName: string): number {
    let sequence = this.#sequences.get(nodeName);
    if (sequence === undefined) {
      sequence = parseSequence(nodeName);
      this.#sequences.set(nodeName, sequence);
    }
    return sequence;
  }

  /** Forgets the names that `children` (the latest listing) no longer has, once they are most. */
  prune(children: readonly string[]): void {
    if (this.#sequences.size <= 2 * children.length) return;
    const listed = new Set(children);
    for (const name of this.#sequences.keys()) if (!listed.has(name)) this.#sequences.delete(name);
  }

  get size(): number {
    return this.#sequences.size;
  }
}

/** The sequence number of a request node, or NaN when the name is not one (see parseSequence). */
export function sequenceOf(nodeName: string): number {
  return parseSequence(nodeName);
}

/**
 * The sequence number of a request node `<mode>-<request id>-<sequence>`, or NaN when the name
 * is not one. ZooKeeper formats the sequence with %010d: ten digits, or a sign and 9-10 digits
 * once the parent's signed 32-bit counter has overflowed (-2147483648 .. -000000001). Checks only
 * the request id's shape (its dashes); parseNodeName checks it in full.
 */
function parseSequence(nodeName: string): number {
  const idStart = modePrefixLength(nodeName);
  if (idStart === 0) return Number.NaN;
  const idEnd = idStart + REQUEST_ID_LENGTH;
  for (const dash of UUID_DASHES) if (nodeName.charCodeAt(idStart + dash) !== DASH) return Number.NaN;
  if (nodeName.charCodeAt(idEnd) !== DASH) return Number.NaN;
  let i = idEnd + 1;
  const negative = nodeName.charCodeAt(i) === DASH;
  if (negative) i += 1;
  const digits = nodeName.length - i;
  if (!(negative ? digits === 9 || digits === 10 : digits === 10)) return Number.NaN;
  let value = 0;
  for (; i < nodeName.length; i += 1) {
    const digit = nodeName.charCodeAt(i) - 0x30;
    if (digit < 0 || digit > 9) return Number.NaN;
    value = value * 10 + digit;
  }
  return negative ? -value : value;
}

/** The mode of a node whose name `sequenceOf` accepted (from its first letter). */
export function modeOf(nodeName: string): LockMode {
  const first = nodeName.charCodeAt(0);
  if (first === 0x6d /* m */) return 'mutex';
  if (first === 0x72 /* r */) return 'read';
  return first === 0x73 /* s */ ? 'semaphore' : 'write';
}

const REQUEST_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Parses a request node's name in full (the request id too), or returns null. */
export function parseNodeName(nodeName: string): QueueEntry | null {
  const sequence = parseSequence(nodeName);
  if (Number.isNaN(sequence)) return null;
  const idStart = modePrefixLength(nodeName);
  const requestId = nodeName.slice(idStart, idStart + REQUEST_ID_LENGTH);
  if (!REQUEST_ID.test(requestId)) return null;
  const mode = modeOf(nodeName);
  const { limit, weight } = mode === 'semaphore' ? semaphoreShape(nodeName) : { limit: 0, weight: 0 };
  return { nodeName, mode, requestId, sequence, limit, weight };
}

/** Children in queue order: by the numeric sequence suffix, never by the whole name. */
export function queueOrder(children: readonly string[]): QueueEntry[] {
  const entries: QueueEntry[] = [];
  for (const child of children) {
    const entry = parseNodeName(child);
    // Nodes that are not lock requests (written by someone else) take no part in the queue.
    if (entry) entries.push(entry);
  }
  return entries.sort((a, b) => a.sequence - b.sequence);
}

/**
 * Where our request stands. Exclusive requests (mutex, write) hold when they are first and
 * otherwise wait for the node just before them; shared requests (read) hold when no exclusive
 * request is ahead and otherwise wait for the last exclusive request ahead of them.
 *
 * One pass over the children, no sort: every request lists its whole queue (the recipe's
 * getChildren), so with 10,000 waiters an O(n log n) step per request would dominate.
 */
export function position(children: readonly string[], me: string, cache?: SequenceCache): Position {
  const sequenceOfChild = cache ? (name: string) => cache.sequenceOf(name) : sequenceOf;
  const mySequence = sequenceOfChild(me);
  if (Number.isNaN(mySequence)) return { kind: 'missing' };
  const myMode = modeOf(me);
  if (myMode === 'semaphore') return semaphorePosition(children, me, mySequence, sequenceOfChild);
  let found = false;
  let ahead = 0;
  /** The lowest request of the queue, and the highest one ahead of ours that blocks it. */
  let head: string | undefined;
  let headSequence = Number.POSITIVE_INFINITY;
  let blocker: string | undefined;
  let blockerSequence = Number.NEGATIVE_INFINITY;
  for (const child of children) {
    if (child === me) {
      found = true;
      continue;
    }
    const sequence = sequenceOfChild(child);
    // Nodes that are not lock requests (written by someone else) take no part in the queue;
    // NaN compares false, so they fall through here.
    if (!(sequence < mySequence)) continue;
    ahead += 1;
    if (sequence < headSequence) {
      head = child;
      headSequence = sequence;
    }
    if (sequence > blockerSequence && conflicts(modeOf(child), myMode)) {
      blocker = child;
      blockerSequence = sequence;
    }
  }
  if (!found) return { kind: 'missing' };
  if (blocker === undefined) return { kind: 'held', ahead, head };
  return { kind: 'waiting', ahead, predecessor: blocker, predecessorIsHead: blocker === head, head };
}

/**
 * Where a semaphore request stands: it holds when the weights of the requests ahead of it plus
 * its own fit its limit (those ahead then hold too: the sums only grow along the queue, so a
 * light request never overtakes a heavy one). A lock request ahead of it (one that is about to
 * fail, see agreement()) weighs more than the limit: nothing passes it.
 */
function semaphorePosition(
  children: readonly string[],
  me: string,
  mySequence: number,
  sequenceOfChild: (name: string) => number,
): Position {
  const { limit, weight } = semaphoreShape(me);
  let found = false;
  let ahead = 0;
  let weightAhead = 0;
  const nodesAhead: string[] = [];
  let head: string | undefined;
  let headSequence = Number.POSITIVE_INFINITY;
  let predecessor: string | undefined;
  let predecessorSequence = Number.NEGATIVE_INFINITY;
  let successor: string | undefined;
  let successorSequence = Number.POSITIVE_INFINITY;
  for (const child of children) {
    if (child === me) {
      found = true;
      continue;
    }
    const sequence = sequenceOfChild(child);
    if (sequence > mySequence) {
      if (sequence < successorSequence) {
        successor = child;
        successorSequence = sequence;
      }
      continue;
    }
    if (!(sequence < mySequence)) continue; // not a lock request (NaN)
    ahead += 1;
    nodesAhead.push(child);
    weightAhead += modeOf(child) === 'semaphore' ? semaphoreShape(child).weight : limit + 1;
    if (sequence < headSequence) {
      head = child;
      headSequence = sequence;
    }
    if (sequence > predecessorSequence) {
      predecessor = child;
      predecessorSequence = sequence;
    }
  }
  if (!found) return { kind: 'missing' };
  if (predecessor === undefined || weightAhead + weight <= limit) {
    return { kind: 'held', ahead, head, successor };
  }
  // Within the limit, everything ahead holds: we are the first waiter.
  const wake: SemaphoreWake =
    weightAhead <= limit ? { kind: 'release', holders: nodesAhead } : { kind: 'grant', predecessor };
  return { kind: 'waiting', ahead, predecessor, predecessorIsHead: false, head, wake };
}

/**
 * Why a new request `me` cannot join a queue whose first request is `head`, or undefined if it
 * can: a name is a semaphore of one limit, or a lock (MUTEX, READ, WRITE), while requests for
 * it exist. Said once, when a request first lists its queue.
 */
export function disagreement(head: string, me: string): string | undefined {
  const headMode = modeOf(head);
  const myMode = modeOf(me);
  const describe = (mode: LockMode, nodeName: string): string =>
    mode === 'semaphore'
      ? `a semaphore of limit ${semaphoreShape(nodeName).limit}`
      : `${mode.toUpperCase()} mode`;
  if (headMode !== 'semaphore' && myMode !== 'semaphore') return undefined;
  if (headMode === myMode && semaphoreShape(head).limit === semaphoreShape(me).limit) return undefined;
  return `the request first in its queue uses it as ${describe(headMode, head)}; this request asks for ${describe(myMode, me)}`;
}

/**
 * How many of `queue` (in queue order) hold the lock: the leading requests that nothing ahead
 * conflicts with. Holders never conflict with each other, so a request conflicts with one of
 * them exactly when it conflicts with the first.
 */
export function holderCount(queue: readonly QueueEntry[]): number {
  const first = queue[0];
  if (!first) return 0;
  if (first.mode === 'semaphore') return semaphoreUse(queue).holders;
  let held = 1;
  while (held < queue.length && !conflicts(first.mode, queue[held]!.mode)) held += 1;
  return held;
}

/**
 * A semaphore's queue (led by a semaphore request): its limit (the first request's), how many
 * lead the queue holding, and the weight they use.
 */
export function semaphoreUse(queue: readonly QueueEntry[]): { limit: number; holders: number; used: number } {
  const limit = queue[0]?.limit ?? 0;
  let holders = 0;
  let used = 0;
  for (const entry of queue) {
    if (entry.mode !== 'semaphore' || used + entry.weight > limit) break;
    used += entry.weight;
    holders += 1;
  }
  return { limit, holders, used };
}
