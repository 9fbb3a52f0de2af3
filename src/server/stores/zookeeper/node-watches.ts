/* The ZooKeeper store's node and children watches and deletion waits, armed once per path and
 * dispatched from the link's one watcher. */
import { LockError } from '../../lock-error.js';
import { ListenerMap } from '../listener-map.js';
import type { NodeFollow, NodeWatchHandlers } from '../node-follow.js';
import { joinPath, parentPath } from '../node-paths.js';
import type { NodeData, StoreStats } from '../store.js';
import type { LinkOperations } from './link-operations.js';
import { ErrorCode } from './protocol/records.js';
import { unavailable } from './zookeeper-failures.js';
import type { TreeView } from './tree-view.js';
import type { LinkReply, NodeEventKind } from './zookeeper-link.js';

/** A waiter for a node's deletion (an object: the same function may wait twice). */
interface DeletionWaiter {
  readonly settle: (error?: LockError) => void;
  /** Set when it stops waiting: also while the path's waiters are being settled. */
  cancelled: boolean;
}

/**
 * The store's watches, dispatched from the link's one watcher. Watches are armed per path with
 * plain reads, not with a watcher function each: one watch per path serves every waiter and
 * follower of it on this server.
 */
export class NodeWatches {
  readonly #ops: LinkOperations;
  readonly #stats: StoreStats;
  /** Waiters for a node's deletion, by path: one back-end watch per path. */
  readonly #deletions = new ListenerMap<DeletionWaiter>();
  /** Held nodes followed for data changes and deletion (see watchNode). */
  readonly #followers = new ListenerMap<NodeWatchHandlers>();
  /** Parents watched for children changes (see watchChildren). */
  readonly #childWatchers = new ListenerMap<() => void>();
  /** Nodes being created to be followed, by parent path and prefix (see expectCreated). */
  readonly #expected = new Map<string, { changed: boolean; deleted: boolean }>();

  /**
   * The lock tree as its persistent recursive watch tells it, where the server has one: while
   * it is on, every change under the locks path arrives without a watch of its own, so nodes
   * are read without arming one (a one-shot watch beside it would only tell the change twice).
   */
  readonly #view: TreeView | undefined;

  constructor(ops: LinkOperations, stats: StoreStats, view?: TreeView) {
    this.#ops = ops;
    this.#stats = stats;
    this.#view = view;
  }

  async watchNode(path: string, follow: NodeFollow): Promise<NodeData | null> {
    if (follow.stopped) return null;
    const { handlers } = follow;
    this.#followers.add(path, handlers);
    follow.attachTo(this.#followers, path);
    let node: NodeData | null = null;
    try {
      node = await this.#ops.getData(path, !this.#covered(path));
      return node;
    } finally {
      if (node === null) this.#followers.delete(path, handlers);
    }
  }

  /**
   * A node about to be created at `dir`/`prefix` + its sequence number is to be followed from
   * its create (see followCreated): what the tree's watch tells of it before the create's reply
   * has been taken in is kept. Call `forget` if the create fails.
   */
  expectCreated(dir: string, prefix: string): { readonly key: string; forget(): void } {
    const key = joinPath(dir, prefix);
    this.#expected.set(key, { changed: false, deleted: false });
    return { key, forget: () => this.#expected.delete(key) };
  }

  /**
   * Follows a node this session has just created, as `watchNode` would, without reading it:
   * the tree's watch tells its changes, and the create told its creation id and data (`node`).
   * A change told between the reply and now (see expectCreated) is read as watchNode would.
   */
  followCreated(path: string, follow: NodeFollow, node: NodeData, expected: string): NodeData | null {
    const told = this.#expected.get(expected);
    this.#expected.delete(expected);
    if (follow.stopped || told?.deleted) return null;
    this.#followers.add(path, follow.handlers);
    follow.attachTo(this.#followers, path);
    if (told?.changed) void this.#readFollowed(path);
    return node;
  }

  /** Whether the tree's watch tells every change of `path` now. */
  #covered(path: string): boolean {
    const view = this.#view;
    return view !== undefined && view.on && path.startsWith(`${view.locksPath}/`);
  }

  watchChildren(dir: string, onChange: () => void): () => void {
    if (this.#childWatchers.add(dir, onChange) && !this.#covered(dir)) void this.#armChildWatch(dir);
    return () => this.#childWatchers.delete(dir, onChange);
  }

  onceDeleted(path: string, onDeleted: (error?: LockError) => void): () => void {
    const waiter: DeletionWaiter = { settle: onDeleted, cancelled: false };
    if (this.#deletions.add(path, waiter)) {
      if (!this.#covered(path)) void this.#armDeletionWatch(path);
      else if (this.#view!.has(path) === false) queueMicrotask(() => this.#settleWaiters(path));
      // Known to exist: its deletion will be told. Not known: read it once, without a watch.
      else if (this.#view!.has(path) === undefined) void this.#checkDeleted(path);
    }
    // The ZooKeeper watch stays armed when the last waiter leaves (3.5 has no way to remove
    // one); it fires for nobody later, and no other waiter is disturbed.
    return () => {
      waiter.cancelled = true;
      this.#deletions.delete(path, waiter);
    };
  }

  /**
   * A change the tree's watch told (see TreeView): as a link event, and, since a recursive
   * watch tells no children changes, a change of the node's parent for its children watchers.
   */
  onTreeEvent(kind: NodeEventKind, path: string): void {
    if (kind === 'created' || kind === 'deleted') this.#onParentEvent(parentPath(path));
    if (this.#expected.size > 0 && kind !== 'created') {
      // A sequential node's name is its prefix and ten digits.
      const told = this.#expected.get(path.slice(0, -10));
      if (told && kind === 'deleted') told.deleted = true;
      else if (told) told.changed = true;
    }
    if (kind !== 'created') this.onNodeEvent(kind, path);
  }

  /**
   * The tree's watch is back after a gap in which changes went untold: every node waited for or
   * followed is read again, and every children watcher told of a possible change.
   */
  onTreeResumed(): void {
    for (const path of this.#deletions.keys()) void this.#checkDeleted(path);
    for (const path of this.#followers.keys()) void this.#readFollowed(path);
    for (const dir of this.#childWatchers.keys()) this.#onParentEvent(dir);
  }

  /** A node event from the current session's link. */
  onNodeEvent(kind: NodeEventKind, path: string): void {
    if (kind === 'children' || kind === 'created') {
      this.#onParentEvent(path);
      return;
    }
    const deleted = kind === 'deleted';
    // A watched parent that is deleted (its queue emptied) changed too.
    if (deleted) this.#onParentEvent(path);
    if (this.#deletions.has(path)) {
      if (deleted) {
        this.#stats.waitersWoken += this.#deletions.count(path);
        this.#settleWaiters(path);
      } else if (!this.#covered(path)) {
        void this.#armDeletionWatch(path); // data changed: the watch is used up
      }
    }
    if (!this.#followers.has(path)) return;
    if (deleted) {
      const followers = this.#followers.get(path);
      this.#followers.delete(path);
      for (const follower of followers) follower.onDeleted();
    } else {
      void this.#readFollowed(path);
    }
  }

  /**
   * A new session replaced a lost one. Its deletion waiters get their watches again on the new
   * session: a node that went with the old session wakes them at once, another session's node
   * keeps them waiting. Followers hold on the old session: their leases are lost with it.
   * Dashboards keep watching: their watches move to the new session.
   */
  sessionReplaced(): void {
    this.#followers.clear();
    for (const dir of this.#childWatchers.keys()) void this.#armChildWatch(dir);
    for (const path of this.#deletions.keys()) void this.#armDeletionWatch(path);
  }

  /**
   * The store closed, or its session is over with no other to follow: every waiter fails with
   * `error` (UNAVAILABLE), and nothing is followed any more.
   */
  close(error?: LockError): void {
    const closed = error ?? new LockError('UNAVAILABLE', 'the ZooKeeper store is closed');
    for (const path of this.#deletions.keys()) this.#settleWaiters(path, closed);
    this.#followers.clear();
    this.#childWatchers.clear();
  }

  /**
   * Arms a children watch on `dir`, or, while it does not exist, an exists watch that fires
   * when it is created (a lock's parent comes and goes with its queue).
   */
  async #armChildWatch(dir: string): Promise<void> {
    this.#stats.childrenListings += 1;
    try {
      const listing = await this.#ops.call('getChildren', (link) => link.getChildren(dir, true));
      if (listing.rc !== ErrorCode.noNode) return;
      const exists = await this.#ops.call('exists', (link) => link.exists(dir, true));
      // Created in between: watch its children after all (an exists watch then fires on deletion only).
      if (exists.rc === ErrorCode.ok) await this.#armChildWatch(dir);
    } catch {
      // Store closed or unreachable: the session's fate reaches watchers through the caller.
    }
  }

  /**
   * Arms a getData watch (Curator's choice over exists(): on a missing node exists() would
   * leave a watch behind that never fires) and settles the path's waiters when the node is deleted, at
   * once if it is already gone, or with the error if the watch cannot be armed.
   */
  #armDeletionWatch(path: string): Promise<void> {
    this.#stats.watchesArmed += 1;
    return this.#checkDeleted(path, true);
  }

  /**
   * Reads whether a waited-for node is gone and settles its waiters if so (or with the error if
   * it cannot be read); `watch` arms a watch for its deletion, which the tree's watch makes
   * needless (it tells the deletion anyway).
   */
  async #checkDeleted(path: string, watch = false): Promise<void> {
    try {
      const reply = await this.#ops.call('getData', (link) => link.getData(path, watch));
      if (reply.rc === ErrorCode.noNode) this.#settleWaiters(path);
      else if (reply.rc !== ErrorCode.ok) this.#settleWaiters(path, unavailable('getData', reply.rc));
    } catch (error) {
      this.#settleWaiters(path, error instanceof LockError ? error : unavailable('getData', -1));
    }
  }

  #settleWaiters(path: string, error?: LockError): void {
    const waiters = this.#deletions.get(path);
    this.#deletions.delete(path);
    for (const waiter of waiters) if (!waiter.cancelled) waiter.settle(error);
  }

  /** Reads a followed node again with a watch (it changed), and tells its followers. */
  async #readFollowed(path: string): Promise<void> {
    let reply: LinkReply<NodeData>;
    try {
      reply = await this.#ops.call('getData', (link) => link.getData(path, !this.#covered(path)));
    } catch {
      return; // the store is closed or unreachable: what holds on the session hears it there
    }
    const targets = this.#followers.get(path);
    if (reply.rc === ErrorCode.noNode) {
      this.#followers.delete(path);
      for (const target of targets) target.onDeleted();
    } else if (reply.rc === ErrorCode.ok && reply.value !== null) {
      const { data } = reply.value;
      for (const target of targets) target.onData(data);
    }
  }

  /**
   * A children or creation event on a watched parent: re-arm (unless the tree's watch tells
   * every change of it anyway), and tell its watchers.
   */
  #onParentEvent(dir: string): void {
    if (!this.#childWatchers.has(dir)) return;
    if (!this.#covered(dir)) void this.#armChildWatch(dir);
    for (const onChange of this.#childWatchers.get(dir)) onChange();
  }
}
