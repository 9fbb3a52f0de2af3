/* The ZooKeeper store: assembles its parts (session, requests, creates, watches, tree watch,
 * protection, takeover) and answers the store port with them. */
import type { LockError } from '../../lock-error.js';
import type { Logger } from 'pino';
import type { NodeFollow } from '../node-follow.js';
import {
  emptyStats,
  type CreatedNode,
  type ListingOptions,
  type NodeData,
  type ReplacedNode,
  type RecordOp,
  type SequentialEntry,
  type TransactOutcome,
  type SessionTakeover,
  type SetDataOutcome,
  type StoreBackend,
  type StoreSession,
  type StoreStats,
} from '../store.js';
import { ChildrenReader } from './children-reader.js';
import { CreatePipeline } from './create-pipeline.js';
import { replaceNode } from './node-replacement.js';
import { linkFactory } from './link-factory.js';
import { LinkOperations } from './link-operations.js';
import { NodeWatches } from './node-watches.js';
import { ParentBarrier } from './parent-barrier.js';
import { RecordWrites } from './record-transactions.js';
import { SessionKeeper } from './session-keeper.js';
import { SessionOwnership } from './session-ownership.js';
import type { RequestTimer } from './session-requests.js';
import { chrootOf } from './chroot.js';
import { TreeProtection, checkChroot } from './tree-protection.js';
import { TreeView } from './tree-view.js';
import { TreeWatch } from './tree-watch.js';
import type { LinkFactory, ZooKeeperClientKind } from './zookeeper-link.js';
import { ZooKeeperTakeover, type Attach } from './zookeeper-takeover.js';

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
  /**
   * Makes the store's sessions movable to another instance (`takeover`, see SessionTakeover):
   * each session is published as an ephemeral record in `<root>/sessions` (`root`: lockstream's
   * root path) holding its id and password, with `owner` (this instance's id) for logs, and
   * every write is fenced by that record. A record lets whoever reads it attach to the session:
   * protect the tree (`protection`), which makes it readable by lockstream's credentials only.
   * Needs the protocol client (multi, and letting a session go without ending it): the addon
   * store ignores it and offers no takeover.
   */
  readonly publish?: { readonly root: string; readonly owner: string };
  /**
   * The path under which the lock parents are (lockstream's root + `/locks`): on ZooKeeper 3.6+
   * and the protocol client, one persistent recursive watch there keeps a view of every queue
   * (TreeView), so that a create needs no listing behind it and a node no watch of its own.
   * Without it, or on ZooKeeper 3.5, each create lists its parent and each node is watched.
   */
  readonly locksPath?: string;
  /** Told every ZooKeeper request's round trip, the metrics' store operations (see RequestTimer). */
  readonly timeRequest?: RequestTimer;
}

/**
 * The ZooKeeper store: one ZooKeeper session for the whole server, on a link (`ZooKeeperLink`)
 * to lockstream's own protocol client or to the `zookeeper` addon. It is made of parts with one
 * job each: the session (SessionKeeper) and its health (SessionHealth), single requests with
 * retries (LinkOperations), creates (CreatePipeline, ParentBarrier), watches (NodeWatches),
 * listings of many nodes (ChildrenReader), the lock tree's watch (TreeWatch, TreeView), and the
 * subtree's ACL (TreeProtection). With `publish`, its sessions can move between instances
 * (SessionOwnership, OwnershipGuard, and ZooKeeperTakeover as `takeover`).
 */
export class ZooKeeperStore implements StoreBackend {
  readonly kind = 'zookeeper';
  readonly stats: StoreStats = emptyStats();

  readonly #keeper: SessionKeeper;
  readonly #ops: LinkOperations;
  readonly #watches: NodeWatches;
  readonly #creates: CreatePipeline;
  readonly #reader: ChildrenReader;
  readonly #records: RecordWrites;
  readonly #protection: TreeProtection;
  readonly #connectString: string;
  readonly #view: TreeView | undefined;
  /** The tree's watch, with `locksPath`. */
  readonly #treeWatch: TreeWatch | undefined;
  /** The store's `takeover`, typed as made (see ZooKeeperTakeover.takeOver). */
  readonly #takeover: ZooKeeperTakeover | undefined;
  readonly takeover: SessionTakeover | undefined;

  private constructor(options: ZooKeeperStoreOptions, newLink: LinkFactory, attach?: Attach) {
    this.#connectString = options.connectString;
    this.#protection = new TreeProtection(options.protection);
    const ownership =
      options.publish && (options.client ?? 'protocol') === 'protocol'
        ? new SessionOwnership({
            ...options.publish,
            protection: this.#protection,
            chroot: chrootOf(options.connectString),
          })
        : undefined;
    const view = options.locksPath === undefined ? undefined : new TreeView(options.locksPath);
    this.#view = view;
    const keeper = new SessionKeeper(
      { ...options, digest: options.protection?.digest, ownership, attach },
      newLink,
      {
        node: (kind, path) => this.#watches.onNodeEvent(kind, path),
        replaced: () => {
          view?.stopped();
          this.#watches.sessionReplaced();
          void this.#treeWatch?.watch();
        },
        over: (error) => {
          view?.stopped();
          this.#watches.close(error);
        },
      },
    );
    const ops = new LinkOperations(keeper, this.stats);
    const watches = new NodeWatches(ops, this.stats, view);
    this.#keeper = keeper;
    this.#ops = ops;
    this.#watches = watches;
    this.#treeWatch = view && new TreeWatch({ keeper, ops, watches, view, logger: options.logger });
    this.#records = new RecordWrites(keeper, ops, this.#protection);
    this.#reader = new ChildrenReader({ keeper, ops, stats: this.stats, logger: options.logger });
    this.#creates = new CreatePipeline({
      keeper,
      ops,
      watches,
      barrier: new ParentBarrier(ops, this.#protection),
      protection: this.#protection,
      stats: this.stats,
      view,
    });
    this.#takeover =
      ownership &&
      new ZooKeeperTakeover({
        keeper,
        ops,
        ownership,
        stopWatching: () => {
          view?.stopped();
          watches.close();
        },
        attachTo: (attach) => {
          const taken = new ZooKeeperStore(options, newLink, attach);
          return { store: taken, takeover: taken.#takeover! };
        },
      });
    this.takeover = this.#takeover;
  }

  /** Connects; rejects with `LockError('UNAVAILABLE')` if no connection is made in time. */
  static async connect(options: ZooKeeperStoreOptions): Promise<ZooKeeperStore> {
    const store = new ZooKeeperStore(options, await linkFactory(options.client ?? 'protocol'));
    try {
      await store.#keeper.whenConnected('connect');
      await store.#reader.probe();
      await checkChroot(store.#ops, store.#connectString);
      await store.#protection.protect(store.#ops);
      await store.#treeWatch?.watch();
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

  createNodes(entries: readonly SequentialEntry[]): Promise<CreatedNode[]> {
    return this.#creates.createAll(entries);
  }

  replaceNode(
    path: string,
    name: string,
    data: Uint8Array,
    version: number,
    session: StoreSession,
    follow: NodeFollow,
  ): Promise<ReplacedNode | 'missing' | 'conflict'> {
    return replaceNode(
      { keeper: this.#keeper, watches: this.#watches, protection: this.#protection },
      path,
      name,
      data,
      version,
      session,
      follow,
    );
  }

  children(dir: string, options?: ListingOptions): Promise<string[]> {
    if (!options?.asTold) return this.#ops.children(dir);
    const list = (asked: string): Promise<string[]> => this.#ops.children(asked);
    const view = this.#view;
    if (!view?.inStep(dir)) return list(dir);
    // Read when the turn comes, the newest the view can tell; out of step by then (a gap): asked.
    return new Promise((resolve, reject) =>
      setImmediate(() => {
        const told = view.children(dir);
        if (told) resolve(told);
        else list(dir).then(resolve, reject);
      }),
    );
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

  delete(paths: string | readonly string[]): Promise<void> {
    return typeof paths === 'string' ? this.#ops.delete(paths) : this.#ops.deleteAll(paths);
  }

  get transactions(): boolean {
    return this.#records.transactions;
  }

  transact(ops: readonly RecordOp[]): Promise<TransactOutcome> {
    return this.#records.transact(ops);
  }

  readLatest(paths: readonly string[]): Promise<Array<NodeData | null>> {
    return this.#records.readLatest(paths);
  }

  makeDirs(dir: string): Promise<void> {
    return this.#records.makeDirs(dir);
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
    this.#view?.stopped();
    await this.#keeper.close();
    this.#watches.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
