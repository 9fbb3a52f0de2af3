import type { LockError } from '../../lock-error.js';
import type { Logger } from 'pino';
import {
  emptyStats,
  type CoordinationStore,
  type CreatedNode,
  type NodeData,
  type NodeFollow,
  type ReplacedNode,
  type SequentialEntry,
  type SetDataOutcome,
  type StoreSession,
  type StoreStats,
} from '../store.js';
import { ChildrenReader } from './children-reader.js';
import { CreatePipeline } from './create-pipeline.js';
import { linkFactory } from './link-factory.js';
import { LinkOperations } from './link-operations.js';
import { NodeWatches } from './node-watches.js';
import { ParentBarrier } from './parent-barrier.js';
import { SessionKeeper } from './session-keeper.js';
import { TreeProtection, checkChroot } from './tree-protection.js';
import type { LinkFactory, ZooKeeperClientKind } from './zookeeper-link.js';

export interface ZooKeeperStoreOptions {
  /** `host:port[,host:port...]`, optionally followed by a chroot path. */
  readonly connectString: string;
  /** Requested session timeout; the ensemble may negotiate another within its min/max. */
  readonly sessionTimeoutMs: number;
  /** How long start-up and each operation wait for a (re)connection before giving up. */
  readonly connectTimeoutMs: number;
  readonly logger: Logger;
  /**
   * Digest credentials (`user:password`) for every session, and the path whose subtree is
   * lockstream's (its root). The root, every node the store creates below it, and the lock
   * parents already there get an ACL that gives those credentials everything and everyone else
   * nothing: no one else can create or delete lock nodes, or even list them.
   */
  readonly protection?: { readonly digest: string; readonly root: string };
  /** The ZooKeeper client underneath: `protocol` (lockstream's own, the default) or `addon`. */
  readonly client?: ZooKeeperClientKind;
}

/**
 * The ZooKeeper store: one ZooKeeper session for the whole server, on a link (`ZooKeeperLink`)
 * to lockstream's own protocol client or to the `zookeeper` addon. It is made of parts with one
 * job each: the session and its health (SessionKeeper), single requests with retries
 * (LinkOperations), creates (CreatePipeline, ParentBarrier), watches (NodeWatches), listings of
 * many nodes (ChildrenReader), and the subtree's ACL (TreeProtection).
 */
export class ZooKeeperStore implements CoordinationStore {
  readonly kind = 'zookeeper';
  readonly stats: StoreStats = emptyStats();

  readonly #keeper: SessionKeeper;
  readonly #ops: LinkOperations;
  readonly #watches: NodeWatches;
  readonly #creates: CreatePipeline;
  readonly #reader: ChildrenReader;
  readonly #protection: TreeProtection;
  readonly #connectString: string;

  private constructor(options: ZooKeeperStoreOptions, newLink: LinkFactory) {
    this.#connectString = options.connectString;
    this.#protection = new TreeProtection(options.protection);
    const keeper = new SessionKeeper({ ...options, digest: options.protection?.digest }, newLink, {
      node: (kind, path) => this.#watches.onNodeEvent(kind, path),
      replaced: () => this.#watches.sessionReplaced(),
    });
    const ops = new LinkOperations(keeper, this.stats);
    const watches = new NodeWatches(ops, this.stats);
    this.#keeper = keeper;
    this.#ops = ops;
    this.#watches = watches;
    this.#reader = new ChildrenReader({ keeper, ops, stats: this.stats, logger: options.logger });
    this.#creates = new CreatePipeline({
      keeper,
      ops,
      watches,
      barrier: new ParentBarrier(ops, this.#protection),
      protection: this.#protection,
      stats: this.stats,
    });
  }

  /** Connects; rejects with `LockError('UNAVAILABLE')` if no connection is made in time. */
  static async connect(options: ZooKeeperStoreOptions): Promise<ZooKeeperStore> {
    const store = new ZooKeeperStore(options, await linkFactory(options.client ?? 'protocol'));
    try {
      await store.#keeper.whenConnected('connect');
      await store.#reader.probe();
      await checkChroot(store.#ops, store.#connectString);
      await store.#protection.protect(store.#ops);
    } catch (error) {
      await store.close();
      throw error;
    }
    return store;
  }

  get session(): StoreSession {
    return this.#keeper.session;
  }

  /** The session timeout the ensemble granted, in ms. */
  get negotiatedSessionTimeoutMs(): number {
    return this.#keeper.link.negotiatedTimeoutMs;
  }

  /**
   * The current session's id and password. Fault-injection tests use them to attach a second
   * handle to this session and close it, which expires the session as a real expiry would.
   */
  get sessionCredentials(): { readonly id: bigint; readonly password: Uint8Array } {
    return this.#keeper.link.credentials;
  }

  createSequential(dir: string, prefix: string, data: Uint8Array, follow?: NodeFollow): Promise<CreatedNode> {
    return this.#creates.one(dir, prefix, data, follow);
  }

  createSequentialAll(entries: readonly SequentialEntry[]): Promise<CreatedNode[]> {
    return this.#creates.all(entries);
  }

  replaceNode(
    path: string,
    name: string,
    data: Uint8Array,
    version: number,
    session: StoreSession,
    follow: NodeFollow,
  ): Promise<ReplacedNode | 'missing' | 'conflict'> {
    return this.#creates.replace(path, name, data, version, session, follow);
  }

  children(dir: string): Promise<string[]> {
    return this.#ops.children(dir);
  }

  childrenOfEach(dirs: readonly string[]): Promise<string[][]> {
    return this.#reader.childrenOfEach(dirs);
  }

  creationId(path: string): Promise<bigint | null> {
    return this.#ops.creationId(path);
  }

  nodeData(path: string): Promise<NodeData | null> {
    return this.#ops.getData(path, false);
  }

  setData(path: string, data: Uint8Array, version?: number): Promise<SetDataOutcome> {
    return this.#ops.setData(path, data, version);
  }

  delete(path: string): Promise<void> {
    return this.#ops.delete(path);
  }

  deleteAll(paths: readonly string[]): Promise<void> {
    return this.#ops.deleteAll(paths);
  }

  watchNode(path: string, follow: NodeFollow): Promise<NodeData | null> {
    return this.#watches.watchNode(path, follow);
  }

  watchChildren(dir: string, onChange: () => void): () => void {
    return this.#watches.watchChildren(dir, onChange);
  }

  onceDeleted(path: string, onDeleted: (error?: LockError) => void): () => void {
    return this.#watches.onceDeleted(path, onDeleted);
  }

  async close(): Promise<void> {
    await this.#keeper.close();
    this.#watches.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
