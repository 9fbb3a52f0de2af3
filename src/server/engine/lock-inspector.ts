/*
 * The read side of the locks (LockInspector): who holds and waits for a lock, the list of locks, a
 * watch on one, and whether a fencing token still holds, all read from the store alone.
 */
import {
  joinPath,
  NodeFollow,
  type BulkListing,
  type CoordinationStore,
  type NodeData,
  type StoreSession,
} from '../stores/store.js';
import { parseNodeRecord, publishedValue, recordedToken } from './lock-nodes.js';
import type { LockEngine } from './lock-engine.js';
import { onAbort } from '../../common/abort.js';
import { LockError } from '../lock-error.js';
import type { LockMode } from './lock-request.js';
import { decodeLockName, validateLockName } from './lock-nodes.js';
import { queueOrder, type QueueEntry } from './lock-nodes.js';
import { holders } from './queue-position.js';

/** One request in a lock's queue, from its node: what the instance serving it recorded. */
export interface LockRequestInfo {
  readonly mode: LockMode;
  readonly owner: string;
  readonly fencingToken: bigint;
  /** Undefined for a node whose data is not lockstream's. */
  readonly requestedAt: Date | undefined;
  readonly instance: string;
  readonly peer: string;
  /** What the request publishes (empty if nothing). */
  readonly value: Uint8Array;
  /** A semaphore request's weight; 0 in the lock modes. */
  readonly weight: number;
}

/** A semaphore's capacity and the part its holders use; both 0 for a lock. */
export interface SemaphoreCapacity {
  readonly limit: number;
  readonly usedWeight: number;
}

export interface LockDescription extends SemaphoreCapacity {
  readonly name: string;
  readonly holders: readonly LockRequestInfo[];
  readonly waiters: readonly LockRequestInfo[];
}

export interface LockSummary extends SemaphoreCapacity {
  readonly name: string;
  readonly holders: number;
  readonly waiters: number;
  /** Undefined when nobody holds the lock. */
  readonly heldMode: LockMode | undefined;
}

export interface LockPage {
  readonly locks: readonly LockSummary[];
  /** Empty on the last page. */
  readonly nextPageToken: string;
}

export const LIST_PAGE_SIZE_DEFAULT = 100;
export const LIST_PAGE_SIZE_MAX = 1000;
/** Lock parents read at once by ListLocks, at most: the listings of this many are in memory together. */
const LIST_READ_BATCH_MAX = 10_000;

/**
 * The read side: who holds and waits for what, answered from the store alone, so any instance
 * sees the requests of every instance on the same back end. Holders are computed the way the
 * engine grants (the first exclusive request, or the leading readers), from one listing.
 */
export class LockInspector {
  readonly #store: CoordinationStore;
  /** Lists many lock parents at once, where the store can; else one listing each. */
  readonly #listing: BulkListing | undefined;
  readonly #engine: LockEngine;

  constructor(options: { store: CoordinationStore; listing?: BulkListing | undefined; engine: LockEngine }) {
    this.#listing = options.listing;
    this.#store = options.store;
    this.#engine = options.engine;
  }

  async describe(name: string): Promise<LockDescription> {
    validateLockName(name);
    return this.#describe(name, (path) => this.#store.nodeData(path));
  }

  /** `read` reads a request's node (and may watch it). */
  async #describe(name: string, read: (path: string) => Promise<NodeData | null>): Promise<LockDescription> {
    const dir = this.#engine.lockPath(name);
    const queue = queueOrder(await this.#store.children(dir));
    const held = holders(queue).count;
    const infos = await Promise.all(
      queue.map(async (entry) => {
        const node = await read(joinPath(dir, entry.nodeName));
        return node && toInfo(entry, node);
      }),
    );
    // A request that left between the listing and the read is simply not there any more.
    const present = (info: LockRequestInfo | null): info is LockRequestInfo => info !== null;
    return {
      name,
      holders: infos.slice(0, held).filter(present),
      waiters: infos.slice(held).filter(present),
      ...capacity(queue),
    };
  }

  /**
   * Calls `onState` with the lock's description now and after every change to its queue or to a
   * request's node (a published value, a revocation), until `signal` aborts. One description at a time: changes during one, or while the promise
   * `onState` returned is pending (a slow reader's backed-up stream), are folded into the next.
   * Rejects (and stops) if a description fails.
   */
  async watch(
    name: string,
    signal: AbortSignal,
    onState: (state: LockDescription) => void | Promise<void>,
  ): Promise<void> {
    validateLockName(name);
    if (signal.aborted) return;
    let changed = true;
    let wake: (() => void) | undefined;
    const change = (): void => {
      changed = true;
      wake?.();
    };
    const unwatch = this.#store.watchChildren(this.#engine.lockPath(name), change);
    // Each request's node is followed from the description that first lists it until it is
    // deleted: one read that arms a watch, instead of a plain read per description. Follows
    // live in the store's session: after a loss they are made again on the new one.
    const followed = new Map<string, NodeFollow>();
    let followedIn: StoreSession | undefined;
    let unlinkLoss = (): void => {};
    const unfollow = (): void => {
      unlinkLoss();
      for (const follow of followed.values()) follow.stop();
      followed.clear();
    };
    signal.addEventListener(
      'abort',
      () => {
        unwatch();
        unfollow();
      },
      { once: true },
    );
    const followInCurrentSession = (): void => {
      const session = this.#store.session;
      if (session === followedIn) return;
      unfollow();
      followedIn = session;
      unlinkLoss = session.lost.aborted ? () => {} : onAbort(session.lost, change);
    };
    const read = (path: string): Promise<NodeData | null> => {
      if (followed.has(path) || signal.aborted) return this.#store.nodeData(path);
      const follow = new NodeFollow({
        onData: change,
        onDeleted: () => {
          followed.get(path)?.stop();
          followed.delete(path);
        },
      });
      followed.set(path, follow);
      return this.#store.watchNode(path, follow).then((node) => {
        if (!node) followed.delete(path);
        return node;
      });
    };
    const aborted = new Promise<void>((resolve) =>
      signal.addEventListener('abort', () => resolve(), { once: true }),
    );
    while (!signal.aborted) {
      if (!changed) {
        await Promise.race([new Promise<void>((resolve) => (wake = resolve)), aborted]);
        continue;
      }
      changed = false;
      followInCurrentSession();
      const state = await this.#describe(name, read);
      if (!signal.aborted) await onState(state);
    }
  }

  /**
   * Whether a request holding `name` has `token` now: reads only the holders' nodes. The answer
   * is the store's state alone, never a clock: a holder holds while its node is there and
   * among the holders. One forced out by a revocation's deadline holds until its server, having
   * told it, deletes its node (a second at most after the deadline, for a holder that does not
   * read); comparing the recorded deadline with this instance's wall clock instead said "not
   * held" an hour early after a step of +1 h, to a holder still within the deadline it was told.
   */
  async isHeld(name: string, token: bigint): Promise<boolean> {
    return (await this.holderOf(name, token)) !== undefined;
  }

  /**
   * The node of the request that holds `name` with fencing token `token` right now, and its
   * mode; undefined if none does. While that node exists, its request holds the lock: a holder
   * leaves the queue only by its node's deletion (a downgrade replaces it with another).
   */
  async holderOf(name: string, token: bigint): Promise<{ path: string; mode: LockMode } | undefined> {
    validateLockName(name);
    const dir = this.#engine.lockPath(name);
    const queue = queueOrder(await this.#store.children(dir));
    const holding = queue.slice(0, holders(queue).count);
    const nodes = await Promise.all(
      holding.map((entry) => this.#store.nodeData(joinPath(dir, entry.nodeName))),
    );
    const index = nodes.findIndex(
      (node) => node !== null && recordedToken(parseNodeRecord(node.data), node.creationId) === token,
    );
    if (index === -1) return undefined;
    const entry = holding[index]!;
    return { path: joinPath(dir, entry.nodeName), mode: entry.mode };
  }

  /**
   * Locks with holders or waiters whose names start with `prefix`, in name order, a page at a
   * time; only those `visible` accepts, if given (what the caller may see). The next page
   * token is the last name listed, and is empty when no lock after it has requests.
   *
   * Every lock parent is a candidate, also the empty ones that wait for ZooKeeper to remove
   * them (by default it looks for empty containers once a minute and removes at most 10,000 a
   * minute): after many names were used they outnumber the locks with requests by far. So the
   * parents are read in batches (childrenOfEach, a thousand per ZooKeeper request), growing
   * from just enough for a page of busy locks up to LIST_READ_BATCH_MAX.
   */
  async list(options: {
    prefix: string;
    pageSize: number;
    pageToken: string;
    visible?: (name: string) => boolean;
  }): Promise<LockPage> {
    const pageSize = options.pageSize === 0 ? LIST_PAGE_SIZE_DEFAULT : options.pageSize;
    if (!Number.isInteger(pageSize) || pageSize < 0 || pageSize > LIST_PAGE_SIZE_MAX) {
      throw new LockError(
        'INVALID_ARGUMENT',
        `page_size ${options.pageSize} is out of range: 0 to ${LIST_PAGE_SIZE_MAX}`,
      );
    }
    const after = decodePageToken(options.pageToken);
    const names = (await this.#store.children(this.#engine.locksPath))
      .map(decodedName)
      .filter(
        (name): name is string =>
          name !== undefined &&
          name.startsWith(options.prefix) &&
          (after === undefined || name > after) &&
          (options.visible === undefined || options.visible(name)),
      )
      .sort();
    const locks: LockSummary[] = [];
    // One more than a page: if every lock had requests, the last says whether a page follows.
    let batch = pageSize + 1;
    let start = 0;
    while (start < names.length) {
      const batchNames = names.slice(start, start + batch);
      start += batchNames.length;
      batch = Math.min(2 * batch, LIST_READ_BATCH_MAX);
      const queues = await this.#childrenOfEach(batchNames.map((name) => this.#engine.lockPath(name)));
      for (const [index, name] of batchNames.entries()) {
        const queue = queueOrder(queues[index] ?? []);
        // An empty parent waits for ZooKeeper to remove it: nobody holds or waits for that lock.
        if (queue.length === 0) continue;
        const last = locks.at(-1);
        if (locks.length === pageSize && last) return { locks, nextPageToken: encodePageToken(last.name) };
        const held = holders(queue).count;
        locks.push({
          name,
          holders: held,
          waiters: queue.length - held,
          heldMode: queue[0]?.mode,
          ...capacity(queue),
        });
      }
    }
    return { locks, nextPageToken: '' };
  }

  /** The children of each of `dirs`, in their order: in batches where the store can (BulkListing). */
  #childrenOfEach(dirs: readonly string[]): Promise<string[][]> {
    if (this.#listing) return this.#listing.childrenOfEach(dirs);
    return Promise.all(dirs.map((dir) => this.#store.children(dir)));
  }
}

function toInfo(entry: QueueEntry, node: NodeData): LockRequestInfo {
  const fencingToken = recordedToken(parseNodeRecord(node.data), node.creationId);
  return { mode: entry.mode, fencingToken, weight: entry.weight, ...parseNodeData(node.data) };
}

/** A queue's semaphore capacity (as its first request names it) and use; zeros for a lock. */
function capacity(queue: readonly QueueEntry[]): SemaphoreCapacity {
  const first = queue[0];
  if (first?.mode !== 'semaphore') return { limit: 0, usedWeight: 0 };
  return { limit: first.limit, usedWeight: holders(queue).usedWeight };
}

/** What the engine recorded in a request's node; tolerant of foreign data. */
function parseNodeData(data: Uint8Array): Omit<LockRequestInfo, 'mode' | 'fencingToken' | 'weight'> {
  const record = parseNodeRecord(data);
  const text = (value: unknown): string => (typeof value === 'string' ? value : '');
  const since = new Date(text(record.since));
  return {
    owner: text(record.owner),
    peer: text(record.peer),
    instance: text(record.server),
    requestedAt: Number.isNaN(since.getTime()) ? undefined : since,
    value: publishedValue(record),
  };
}

function decodedName(encoded: string): string | undefined {
  try {
    return decodeLockName(encoded);
  } catch {
    return undefined;
  }
}

function encodePageToken(lastName: string): string {
  return Buffer.from(lastName, 'utf8').toString('base64url');
}

function decodePageToken(token: string): string | undefined {
  if (token === '') return undefined;
  const name = Buffer.from(token, 'base64url').toString('utf8');
  if (name === '' || encodePageToken(name) !== token) {
    throw new LockError('INVALID_ARGUMENT', 'page_token is not one this server returned');
  }
  return name;
}
