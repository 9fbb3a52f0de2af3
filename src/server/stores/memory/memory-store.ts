/* The embedded store: the store port's semantics, ZooKeeper's, kept in memory for one process. */
import { LockError } from '../../lock-error.js';
import type { NodeWatchHandlers, NodeFollow } from '../node-follow.js';
import { ancestors, baseName, joinPath, parentPath } from '../node-paths.js';
import {
  emptyStats,
  type CreatedNode,
  type ListingOptions,
  type NodeData,
  type RecordOp,
  type ReplacedNode,
  type TransactOutcome,
  type SequentialEntry,
  type SetDataOutcome,
  type StoreBackend,
  type StoreSession,
  type StoreStats,
} from '../store.js';
import { ListenerMap } from '../listener-map.js';
import { SessionState } from '../session-state.js';

interface MemoryNode {
  readonly creationId: bigint;
  /** The session that owns the (ephemeral) node; 0 for a persistent record (RecordTransactions). */
  readonly sessionId: number;
  readonly data: Uint8Array;
  readonly version: number;
}

interface MemoryParent {
  /** ZooKeeper's per-parent counter (cversion): restarts when the container is recreated. */
  nextSequence: number;
  readonly children: Map<string, MemoryNode>;
}

class MemorySession extends SessionState {
  constructor(readonly numericId: number) {
    super(`memory-${numericId}`);
  }
}

/**
 * Where the embedded store starts counting creation ids: the wall clock at its start, in
 * microseconds (about 1.8 × 10^15 in 2026, well inside 2^53 and uint64). Creation ids are the
 * fencing tokens of the locks granted on it, and it writes nothing to disk, so this is what
 * makes tokens grow across a restart of the process (after SIGTERM or kill -9 alike, with the
 * same command line): a restarted store starts above every id the previous one issued as long
 * as that one issued fewer than a million a second over its life (from its start to the
 * restart; the store makes a few tens of thousands a second at most), and the wall clock was
 * not stepped back across the restart by more than that margin.
 */
export function clockStartingId(nowMs: number = Date.now()): bigint {
  return BigInt(Math.floor(nowMs)) * 1000n;
}

/**
 * The embedded store: the same semantics as ZooKeeper for one process, kept in memory.
 * Not a second lock implementation: it only keeps sequential ephemeral nodes and deletion
 * watches; the engine runs the recipe on it exactly as on ZooKeeper.
 *
 * Every operation completes asynchronously (like a network round trip would), and watchers
 * fire in the order the deletions happened.
 */
export class MemoryStore implements StoreBackend {
  readonly kind = 'memory';
  readonly stats: StoreStats = emptyStats();

  readonly #parents = new Map<string, MemoryParent>();
  /** Directories made persistent (makeDirs): they stay when their last child goes. */
  readonly #dirs = new Set<string>();
  readonly #watchers = new Map<string, Set<() => void>>();
  readonly #nodeWatchers = new ListenerMap<NodeWatchHandlers>();
  readonly #childWatchers = new ListenerMap<() => void>();
  /** Counted from the wall clock at the store's start (see clockStartingId), one more per step. */
  #lastCreationId = clockStartingId();
  #session = new MemorySession(1);
  #closed = false;

  get session(): StoreSession {
    return this.#session;
  }

  async createNodes(entries: readonly SequentialEntry[]): Promise<CreatedNode[]> {
    await this.#roundTrip();
    // One step, one creation id for all, as one ZooKeeper transaction gives them one czxid.
    this.#lastCreationId += 1n;
    const creationId = this.#lastCreationId;
    return entries.map((entry) => this.#create(entry, creationId));
  }

  #create({ dir, prefix, data, follow }: SequentialEntry, creationId: bigint): CreatedNode {
    this.stats.creates += 1;
    let parent = this.#parents.get(dir);
    if (!parent) {
      parent = { nextSequence: 0, children: new Map() };
      this.#parents.set(dir, parent);
    }
    // Copied into one flat string, as names from ZooKeeper are: a concatenation stays a rope in
    // V8, and reading it char by char (the engine does, for every child of a queue) is 4x slower.
    const name = Buffer.from(prefix + String(parent.nextSequence).padStart(10, '0')).toString();
    parent.nextSequence += 1;
    const node = {
      creationId,
      sessionId: this.#session.numericId,
      data: Uint8Array.from(data),
      version: 0,
    };
    parent.children.set(name, node);
    const path = joinPath(dir, name);
    if (follow) this.#follow(path, follow);
    this.#childrenChanged(dir);
    this.stats.childrenListings += 1;
    return {
      path,
      session: this.#session,
      siblings: [...parent.children.keys()],
      creationId: node.creationId,
      ...(follow ? { followed: nodeData(node) } : {}),
    };
  }

  /** `asTold` is a listing here: the store has no watch that tells it more cheaply. */
  async children(dir: string, _options?: ListingOptions): Promise<string[]> {
    await this.#roundTrip();
    this.stats.childrenListings += 1;
    return this.#childrenOf(dir);
  }

  #childrenOf(dir: string): string[] {
    const parent = this.#parents.get(dir);
    if (parent) return [...parent.children.keys()];
    // Not a lock's parent: list the lock parents under it (their ancestors are implicit here).
    const prefix = `${dir}/`;
    return [...this.#parents.keys()]
      .filter((path) => path.startsWith(prefix) && !path.includes('/', prefix.length))
      .map(baseName);
  }

  async childrenOfEach(dirs: readonly string[]): Promise<string[][]> {
    await this.#roundTrip();
    this.stats.childrenListings += dirs.length;
    return dirs.map((dir) => this.#childrenOf(dir));
  }

  async creationId(path: string): Promise<bigint | null> {
    await this.#roundTrip();
    this.stats.creationIdReads += 1;
    return this.#node(path)?.creationId ?? null;
  }

  async nodeData(path: string): Promise<NodeData | null> {
    await this.#roundTrip();
    const node = this.#node(path);
    return node ? nodeData(node) : null;
  }

  async setData(path: string, data: Uint8Array, version?: number): Promise<SetDataOutcome> {
    await this.#roundTrip();
    const dir = parentPath(path);
    const node = this.#node(path);
    if (!node) return 'missing';
    if (version !== undefined && version !== node.version) return 'conflict';
    const copy = Uint8Array.from(data);
    this.#parents.get(dir)?.children.set(baseName(path), { ...node, data: copy, version: node.version + 1 });
    for (const handlers of this.#nodeWatchers.get(path)) handlers.onData(copy);
    return 'set';
  }

  async watchNode(path: string, follow: NodeFollow): Promise<NodeData | null> {
    await this.#roundTrip();
    const node = this.#node(path);
    if (!node) return null;
    this.#follow(path, follow);
    return nodeData(node);
  }

  #follow(path: string, follow: NodeFollow): void {
    if (follow.stopped) return;
    const { handlers } = follow;
    this.#nodeWatchers.add(path, handlers);
    follow.attachTo(this.#nodeWatchers, path);
  }

  watchChildren(dir: string, onChange: () => void): () => void {
    this.#childWatchers.add(dir, onChange);
    return () => this.#childWatchers.delete(dir, onChange);
  }

  #childrenChanged(dir: string): void {
    for (const onChange of this.#childWatchers.get(dir)) onChange();
  }

  onceDeleted(path: string, onDeleted: (error?: LockError) => void): () => void {
    let cancelled = false;
    let watchers: Set<() => void> | undefined;
    const wake = (): void => {
      this.stats.waitersWoken += 1;
      onDeleted();
    };
    this.#roundTrip().then(
      () => {
        if (cancelled) return;
        if (!this.#node(path)) {
          onDeleted();
          return;
        }
        watchers = this.#watchers.get(path);
        if (!watchers) {
          watchers = new Set();
          this.#watchers.set(path, watchers);
          this.stats.watchesArmed += 1;
        }
        watchers.add(wake);
      },
      (error: unknown) => {
        if (!cancelled) onDeleted(error as LockError);
      },
    );
    return () => {
      cancelled = true;
      watchers?.delete(wake);
    };
  }

  async delete(paths: string | readonly string[]): Promise<void> {
    await this.#roundTrip();
    if (typeof paths === 'string') {
      this.stats.deletes += 1;
      this.#remove(paths);
      return;
    }
    this.stats.deletes += paths.length;
    for (const path of paths) this.#remove(path);
  }

  readonly transactions = true;

  async transact(ops: readonly RecordOp[]): Promise<TransactOutcome> {
    await this.#roundTrip();
    // Every op is judged with the ones before it applied, then all are applied in one step.
    const staged = new Map<string, MemoryNode | null>();
    const current = (path: string): MemoryNode | undefined =>
      staged.has(path) ? (staged.get(path) ?? undefined) : this.#node(path);
    let creationId: bigint | undefined;
    for (const [index, op] of ops.entries()) {
      const node = current(op.path);
      const failed = (reason: 'missing' | 'conflict' | 'exists' | 'not-empty'): TransactOutcome => ({
        kind: 'failed',
        index,
        reason,
      });
      if (op.op === 'create') {
        if (node) return failed('exists');
        if (!this.#dirs.has(parentPath(op.path))) return failed('missing');
        creationId ??= this.#lastCreationId + 1n;
        staged.set(op.path, { creationId, sessionId: 0, data: Uint8Array.from(op.data), version: 0 });
        continue;
      }
      if (!node) return failed('missing');
      if (op.version !== undefined && op.version !== node.version) return failed('conflict');
      if (op.op === 'delete') {
        if ((this.#parents.get(op.path)?.children.size ?? 0) > 0) return failed('not-empty');
        staged.set(op.path, null);
        continue;
      }
      if (op.op === 'set') {
        staged.set(op.path, { ...node, data: Uint8Array.from(op.data), version: node.version + 1 });
      }
    }
    if (creationId !== undefined) this.#lastCreationId = creationId;
    for (const [path, node] of staged) {
      if (node === null) {
        this.#remove(path);
        continue;
      }
      const dir = parentPath(path);
      const parent = this.#parents.get(dir)!;
      const created = !parent.children.has(baseName(path));
      parent.children.set(baseName(path), node);
      if (created) this.#childrenChanged(dir);
      else for (const handlers of this.#nodeWatchers.get(path)) handlers.onData(node.data);
    }
    return { kind: 'done' };
  }

  /** One store, one copy: every read is the latest. */
  async readLatest(paths: readonly string[]): Promise<Array<NodeData | null>> {
    await this.#roundTrip();
    return paths.map((path) => {
      const node = this.#node(path);
      return node ? nodeData(node) : null;
    });
  }

  async makeDirs(dir: string): Promise<void> {
    await this.#roundTrip();
    for (const path of [...ancestors(dir), dir]) {
      this.#dirs.add(path);
      if (!this.#parents.has(path)) this.#parents.set(path, { nextSequence: 0, children: new Map() });
    }
  }

  async replaceNode(
    path: string,
    name: string,
    data: Uint8Array,
    version: number,
    session: StoreSession,
    follow: NodeFollow,
  ): Promise<ReplacedNode | 'missing' | 'conflict'> {
    await this.#roundTrip();
    const node = this.#node(path);
    if (!node || session !== this.#session || node.sessionId !== this.#session.numericId) return 'missing';
    if (node.version !== version) return 'conflict';
    const dir = parentPath(path);
    this.#lastCreationId += 1n;
    const replacement: MemoryNode = {
      creationId: this.#lastCreationId,
      sessionId: node.sessionId,
      data: Uint8Array.from(data),
      version: 0,
    };
    // Both in one step, with nothing in between: a listing sees one or the other.
    this.#parents.get(dir)!.children.set(name, replacement);
    const newPath = joinPath(dir, name);
    this.#follow(newPath, follow);
    this.#childrenChanged(dir);
    this.#remove(path);
    return { path: newPath, creationId: replacement.creationId };
  }

  /**
   * Test hook: ends the current session as ZooKeeper does when it expires one. Its ephemeral
   * nodes are deleted (waking their watchers), `lost` aborts, and a new session takes over.
   */
  expireSession(): void {
    const expired = this.#session;
    this.#session = new MemorySession(expired.numericId + 1);
    // The session ends first, as with ZooKeeper: its holders hear of the expiry, not of their
    // nodes' deletion. Nothing runs in between (listeners only settle promises).
    expired.end(new LockError('LOCK_LOST', 'the embedded store session ended'));
    for (const [dir, parent] of [...this.#parents]) {
      for (const [name, node] of [...parent.children]) {
        if (node.sessionId === expired.numericId) this.#remove(joinPath(dir, name));
      }
    }
  }

  /**
   * Test hook: puts the session in doubt, as a ZooKeeper disconnection does (`confirmed` turns
   * false), or confirms it again.
   */
  setSessionConfirmed(confirmed: boolean): void {
    this.#session.setConfirmed(confirmed);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.expireSession();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  #node(path: string): MemoryNode | undefined {
    return this.#parents.get(parentPath(path))?.children.get(baseName(path));
  }

  #remove(path: string): void {
    const dir = parentPath(path);
    const parent = this.#parents.get(dir);
    if (!parent?.children.delete(baseName(path))) return;
    // Containers vanish once empty (ZooKeeper does it a little later; nothing may rely on when).
    if (parent.children.size === 0 && !this.#dirs.has(dir)) this.#parents.delete(dir);
    this.#childrenChanged(dir);
    const followers = this.#nodeWatchers.get(path);
    this.#nodeWatchers.delete(path);
    for (const handlers of followers) handlers.onDeleted();
    const watchers = this.#watchers.get(path);
    if (!watchers) return;
    this.#watchers.delete(path);
    for (const wake of watchers) wake();
  }

  /** Every call yields once, so callers never observe a store that answers synchronously. */
  async #roundTrip(): Promise<void> {
    if (this.#closed) throw new LockError('UNAVAILABLE', 'the embedded store is closed');
    await Promise.resolve();
  }
}

function nodeData({ creationId, data, version }: MemoryNode): NodeData {
  return { creationId, data, version };
}
