import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { LockError } from '../../lock-error.js';
import {
  ancestors,
  emptyStats,
  joinPath,
  parentPath,
  type CoordinationStore,
  type CreatedNode,
  type NodeData,
  type ReplacedNode,
  type SequentialEntry,
  type SetDataOutcome,
  type NodeWatchHandlers,
  type NodeFollow,
  type StoreSession,
  type StoreStats,
} from '../store.js';
import { ListenerMap } from '../listener-map.js';
import { SessionState } from '../session-state.js';
import { errorName } from './protocol/zookeeper-error.js';
import { ErrorCode, Perms, type Acl } from './protocol/records.js';
import {
  linkFactory,
  type LinkFactory,
  type NodeEventKind,
  type LinkOp,
  type LinkReply,
  type NodeMode,
  type ZooKeeperClientKind,
  type ZooKeeperLink,
} from './zookeeper-link.js';

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

/** Lock parents whose next sequence number is remembered, at most. */
const MAX_REMEMBERED_SEQUENCES = 10_000;

/** Attempts per operation across connection losses (each one waits for the reconnection). */
const MAX_ATTEMPTS = 5;

class ZooKeeperSession extends SessionState {
  /** Set once ZooKeeper has granted the session: only then is there anything to lose. */
  established = false;
  constructor() {
    super('connecting', false);
  }
}

/**
 * How the store keeps its holders safe when ZooKeeper goes quiet, as fractions of the negotiated
 * session timeout, counted on a monotonic clock from the send time of the newest request that
 * got a reply (ZooKeeper heard from us no earlier than that, so it cannot expire the session
 * before that time plus the session timeout):
 * - a heartbeat request goes out every HEARTBEAT (the C client's own pings are invisible here);
 * - with no reply for DOUBT, the session is in doubt (`confirmed` false), as on a disconnection;
 * - with no reply for LOSS, the session is given up as lost *before* ZooKeeper can expire it and
 *   let another server grant the same locks (Curator's advice: treat a long SUSPENDED as LOST;
 *   CURATOR-206). The remaining third of the timeout covers timer and event-loop delays.
 */
const HEARTBEAT_FRACTION = 1 / 6;
const DOUBT_FRACTION = 1 / 3;
const LOSS_FRACTION = 2 / 3;

interface DeletionWaiter {
  settle(error?: LockError): void;
}

/**
 * The ZooKeeper store: one ZooKeeper session for the whole server, on a link (`ZooKeeperLink`)
 * to lockstream's own protocol client or to the `zookeeper` addon.
 *
 * A disconnection is "maybe lost" (the session may survive it; the client reconnects and
 * re-arms its watches by itself) and operations wait for the reconnection; an expired session
 * is "lost": its ephemeral nodes are gone, `session.lost` aborts and a new session is opened.
 */
export class ZooKeeperStore implements CoordinationStore {
  readonly kind = 'zookeeper';
  readonly stats: StoreStats = emptyStats();

  readonly #options: ZooKeeperStoreOptions;
  readonly #logger: Logger;
  readonly #newLink: LinkFactory;
  #link!: ZooKeeperLink;
  #session = new ZooKeeperSession();
  #connected = false;
  readonly #connectionWaiters = new Set<() => void>();
  /** One back-end watch per path, shared by every waiter on this server. */
  #watches = new Map<string, Set<DeletionWaiter>>();
  /** Held nodes followed for data changes and deletion (see watchNode). */
  readonly #followers = new ListenerMap<NodeWatchHandlers>();
  /** Parents watched for children changes (see watchChildren). */
  readonly #childWatchers = new ListenerMap<() => void>();
  readonly #ensuredParents = new Set<string>();
  /** Lock directories being created, with the creates waiting for them (see #afterParentsOf). */
  readonly #parentBarriers = new Map<string, ParentBarrier>();
  #lastCreateTicket = 0;
  /** The ACL of nodes in the protected subtree; undefined without protection. */
  readonly #acl: readonly Acl[] | undefined;
  /**
   * The sequence number the next node under a lock's parent should get (see createSequential);
   * null where the last create found others queued: a guess there would mostly miss.
   */
  readonly #sequences = new Map<string, number | null>();
  #closed = false;
  /** performance.now() at the send of the newest request that got a reply on this session. */
  #lastConfirmedAt = 0;
  #heartbeat: NodeJS.Timeout | undefined;
  /** Links of sessions given up as lost, not closed yet (see #replaceSession). */
  readonly #abandoned = new Set<ZooKeeperLink>();
  #watchdog: NodeJS.Timeout | undefined;

  private constructor(options: ZooKeeperStoreOptions, newLink: LinkFactory) {
    this.#options = options;
    this.#logger = options.logger;
    this.#newLink = newLink;
    this.#acl = options.protection && digestAcl(options.protection.digest);
    this.#open();
  }

  /** Connects; rejects with `LockError('UNAVAILABLE')` if no connection is made in time. */
  static async connect(options: ZooKeeperStoreOptions): Promise<ZooKeeperStore> {
    const store = new ZooKeeperStore(options, await linkFactory(options.client ?? 'protocol'));
    try {
      await store.#whenConnected('connect');
      await store.#checkChroot();
      await store.#protectTree();
    } catch (error) {
      await store.close();
      throw error;
    }
    return store;
  }

  get session(): StoreSession {
    return this.#session;
  }

  /** The session timeout the ensemble granted, in ms. */
  get negotiatedSessionTimeoutMs(): number {
    return this.#link.negotiatedTimeoutMs;
  }

  /**
   * The current session's id and password. Fault-injection tests use them to attach a second
   * handle to this session and close it, which expires the session as a real expiry would.
   */
  get sessionCredentials(): { readonly id: bigint; readonly password: Uint8Array } {
    return this.#link.credentials;
  }

  async createSequential(
    dir: string,
    prefix: string,
    data: Uint8Array,
    follow?: NodeFollow,
  ): Promise<CreatedNode> {
    const acl = this.#aclFor(dir);
    const ticket = (this.#lastCreateTicket += 1);
    // Set when our create found the parent missing: we wait for it like any later create, and
    // through the same steps, so the creates are sent again in ticket order.
    let parentMade: Promise<void> | undefined;
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt += 1) {
      await (parentMade ?? this.#afterParentsOf(dir, ticket, false));
      parentMade = undefined;
      await this.#whenConnected('create');
      const session = this.#session;
      // Pipelined, answered in this order: the create, the listing, and (with `follow`) a
      // getData with a watch on the path the node should get, the sequence number after the
      // last one seen under `dir`. Our prefix is unique, so a wrong guess finds no node.
      const creating = this.#send((link) =>
        link.create(joinPath(dir, prefix), data, 'ephemeralSequential', acl),
      );
      const listing = this.#send((link) => link.getChildren(dir, false));
      const guess = follow && this.#nextSequence(dir, prefix);
      // A wrong guess (or a failed read) only costs the read after the create, below.
      const guessed =
        guess === undefined || !follow ? undefined : this.watchNode(guess, follow).catch(() => null);
      const [reply, listed, read] = await Promise.all([creating, listing, guessed]);
      if (reply.rc === ErrorCode.ok && reply.value !== null) {
        const { path, creationId } = reply.value;
        this.stats.creates += 1;
        this.stats.childrenListings += 1;
        const siblings =
          listed.rc === ErrorCode.ok && listed.value !== null ? listed.value : await this.children(dir);
        this.#sawSequence(dir, path, siblings.length === 1);
        const created =
          creationId === undefined ? { path, session, siblings } : { path, session, siblings, creationId };
        if (!follow) return created;
        if (guess === path && read) return { ...created, followed: read };
        return { ...created, followed: await this.watchNode(path, follow) };
      }
      if (reply.rc === ErrorCode.noNode) {
        // The lock's parent does not exist (first use, or its empty container was removed).
        parentMade = this.#afterParentsOf(dir, ticket, true);
        continue;
      }
      if (!isConnectionLoss(reply.rc)) throw this.#createFailure(dir, reply.rc);
      // The create may have been applied although its reply was lost. Our prefix is unique,
      // so look for it before creating again: a second node would block the queue as a ghost.
      await this.#whenConnected('create');
      if (this.#session !== session) continue; // the session died, and any node with it
      const siblings = await this.children(dir);
      const existing = siblings.find((child) => child.startsWith(prefix));
      if (existing !== undefined) {
        this.stats.creates += 1;
        const path = joinPath(dir, existing);
        if (!follow) return { path, session, siblings };
        return {
          path,
          session,
          siblings,
          followed: await this.watchNode(path, follow),
        };
      }
    }
    throw new LockError('UNAVAILABLE', `ZooKeeper create under ${dir} kept losing its connection`);
  }

  async createSequentialAll(entries: readonly SequentialEntry[]): Promise<CreatedNode[]> {
    if (!this.#link.multi) {
      throw new LockError(
        'UNSUPPORTED',
        'this needs ZooKeeper multi (several nodes created in one step), which the zookeeper addon client does not offer: run lockstream with --zookeeper-client protocol, the default',
      );
    }
    const ticket = (this.#lastCreateTicket += 1);
    const ops: LinkOp[] = entries.map(({ dir, prefix, data }) => ({
      op: 'create',
      path: joinPath(dir, prefix),
      data,
      mode: 'ephemeralSequential',
      acl: this.#aclFor(dir),
    }));
    let parentsMade: Promise<unknown> | undefined;
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt += 1) {
      await (parentsMade ??
        Promise.all(entries.map(({ dir }) => this.#afterParentsOf(dir, ticket, false) ?? Promise.resolve())));
      parentsMade = undefined;
      await this.#whenConnected('multi');
      const session = this.#session;
      // Pipelined as in createSequential: the transaction, then each parent's listing.
      const creating = this.#send((link) => link.multi!(ops));
      const listings = entries.map(({ dir }) => this.#send((link) => link.getChildren(dir, false)));
      const [reply, ...listed] = await Promise.all([creating, ...listings]);
      if (reply.rc === ErrorCode.ok && reply.value !== null) {
        const results = reply.value;
        this.stats.creates += entries.length;
        this.stats.childrenListings += entries.length;
        return Promise.all(
          entries.map(async ({ dir, follow }, i) => {
            const result = results[i];
            if (result?.op !== 'create') throw unavailable('multi', reply.rc);
            const listing = listed[i]!;
            const siblings =
              listing.rc === ErrorCode.ok && listing.value !== null
                ? listing.value
                : await this.children(dir);
            const created = { path: result.path, session, siblings, creationId: result.creationId };
            return follow ? { ...created, followed: await this.watchNode(result.path, follow) } : created;
          }),
        );
      }
      if (reply.rc === ErrorCode.noNode) {
        // A lock's parent does not exist: make each (those that exist cost a NODEEXISTS).
        parentsMade = Promise.all(
          entries.map(({ dir }) => this.#afterParentsOf(dir, ticket, true) ?? Promise.resolve()),
        );
        continue;
      }
      if (!isConnectionLoss(reply.rc)) throw this.#createFailure(entries[0]!.dir, reply.rc);
      // Applied or not, all or nothing: look for the first prefix before trying again.
      await this.#whenConnected('multi');
      if (this.#session !== session) continue; // the session died, and any node with it
      const found = await Promise.all(
        entries.map(async ({ dir, prefix }) => {
          const siblings = await this.children(dir);
          const name = siblings.find((child) => child.startsWith(prefix));
          return name === undefined ? undefined : { path: joinPath(dir, name), siblings };
        }),
      );
      if (found.every((node) => node === undefined)) continue;
      this.stats.creates += entries.length;
      return Promise.all(
        entries.map(async ({ follow }, i) => {
          const node = found[i];
          if (!node) throw unavailable('multi', reply.rc); // all or none: cannot be
          const followed = follow ? await this.watchNode(node.path, follow) : null;
          const created = { path: node.path, session, siblings: node.siblings };
          return follow ? { ...created, followed } : created;
        }),
      );
    }
    throw new LockError('UNAVAILABLE', `ZooKeeper multi under ${entries[0]?.dir} kept losing its connection`);
  }

  /**
   * The path `prefix` would get under `dir` if nobody else creates there first; undefined when
   * unknown, or when others were queued there last time (contended: a guess would mostly miss).
   */
  #nextSequence(dir: string, prefix: string): string | undefined {
    const next = this.#sequences.get(dir);
    return next == null ? undefined : joinPath(dir, prefix + String(next).padStart(10, '0'));
  }

  /** `alone`: the node just created at `path` was its parent's only child. */
  #sawSequence(dir: string, path: string, alone: boolean): void {
    // Bounded: one entry per lock name in use; forgetting one only costs a round trip.
    if (this.#sequences.size >= MAX_REMEMBERED_SEQUENCES && !this.#sequences.has(dir))
      this.#sequences.clear();
    this.#sequences.set(dir, alone ? Number(path.slice(-10)) + 1 : null);
  }

  async children(dir: string): Promise<string[]> {
    const reply = await this.#call('getChildren', (link) => link.getChildren(dir, false));
    this.stats.childrenListings += 1;
    if (reply.rc === ErrorCode.noNode) return [];
    if (reply.rc !== ErrorCode.ok || reply.value === null) throw unavailable('getChildren', reply.rc);
    return reply.value;
  }

  async creationId(path: string): Promise<bigint | null> {
    const reply = await this.#call('exists', (link) => link.exists(path, false));
    this.stats.creationIdReads += 1;
    if (reply.rc === ErrorCode.noNode) return null;
    if (reply.rc !== ErrorCode.ok || reply.value === null) throw unavailable('exists', reply.rc);
    return reply.value;
  }

  nodeData(path: string): Promise<NodeData | null> {
    return this.#getData(path, false);
  }

  /** getData, with a watch on the node if `watch` (dispatched by #onNodeEvent); null when it is missing. */
  async #getData(path: string, watch: boolean): Promise<NodeData | null> {
    const reply = await this.#call('getData', (link) => link.getData(path, watch));
    if (reply.rc === ErrorCode.noNode) return null;
    if (reply.rc !== ErrorCode.ok || reply.value === null) throw unavailable('getData', reply.rc);
    return reply.value;
  }

  async setData(path: string, data: Uint8Array, version?: number): Promise<SetDataOutcome> {
    const reply = await this.#call('setData', (link) => link.setData(path, data, version ?? -1));
    if (reply.rc === ErrorCode.noNode) return 'missing';
    if (reply.rc === ErrorCode.badVersion) return 'conflict';
    if (reply.rc !== ErrorCode.ok) throw unavailable('setData', reply.rc);
    return 'set';
  }

  async watchNode(path: string, follow: NodeFollow): Promise<NodeData | null> {
    if (follow.stopped) return null;
    const { handlers } = follow;
    this.#followers.add(path, handlers);
    follow.attach(() => this.#followers.delete(path, handlers));
    let node: NodeData | null = null;
    try {
      node = await this.#getData(path, true);
      return node;
    } finally {
      if (node === null) this.#followers.delete(path, handlers);
    }
  }

  watchChildren(dir: string, onChange: () => void, signal: AbortSignal): void {
    if (signal.aborted) return;
    if (this.#childWatchers.add(dir, onChange, signal)) void this.#armChildWatch(dir);
  }

  /**
   * Arms a children watch on `dir`, or, while it does not exist, an exists watch that fires
   * when it is created (a lock's parent comes and goes with its queue).
   */
  async #armChildWatch(dir: string): Promise<void> {
    try {
      const listing = await this.#call('getChildren', (link) => link.getChildren(dir, true));
      if (listing.rc !== ErrorCode.noNode) return;
      const exists = await this.#call('exists', (link) => link.exists(dir, true));
      // Created in between: watch its children after all (an exists watch then fires on deletion only).
      if (exists.rc === ErrorCode.ok) await this.#armChildWatch(dir);
    } catch {
      // Store closed or unreachable: the session's fate reaches watchers through the caller.
    }
  }

  async delete(path: string): Promise<void> {
    const reply = await this.#call('delete', (link) => link.delete(path));
    this.stats.deletes += 1;
    if (reply.rc !== ErrorCode.ok && reply.rc !== ErrorCode.noNode) throw unavailable('delete', reply.rc);
  }

  async deleteAll(paths: readonly string[]): Promise<void> {
    if (this.#link.multi && paths.length > 1) {
      const ops: LinkOp[] = paths.map((path) => ({ op: 'delete', path, version: -1 }));
      const reply = await this.#call('multi', (link) => link.multi!(ops));
      if (reply.rc === ErrorCode.ok) {
        this.stats.deletes += paths.length;
        return;
      }
      // A node already gone (NONODE fails the whole transaction), or a lost reply: one by one,
      // which is idempotent.
      if (reply.rc !== ErrorCode.noNode && !isConnectionLoss(reply.rc)) throw unavailable('multi', reply.rc);
    }
    await Promise.all(paths.map((path) => this.delete(path)));
  }

  async replaceNode(
    path: string,
    name: string,
    data: Uint8Array,
    version: number,
    session: StoreSession,
    follow: NodeFollow,
  ): Promise<ReplacedNode | 'missing' | 'conflict'> {
    if (!this.#link.multi) {
      throw new LockError(
        'UNSUPPORTED',
        'this needs ZooKeeper multi (one node replaced by another in one step), which the zookeeper addon client does not offer: run lockstream with --zookeeper-client protocol, the default',
      );
    }
    const dir = parentPath(path);
    const newPath = joinPath(dir, name);
    const ops: LinkOp[] = [
      { op: 'create', path: newPath, data, mode: 'ephemeral', acl: this.#aclFor(dir) },
      // The delete's version is the compare in the compare-and-set.
      { op: 'delete', path, version },
    ];
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt += 1) {
      await this.#whenConnected('multi');
      // An ephemeral node belongs to the session that creates it: never one other than the old node's.
      if (session !== this.#session) return 'missing';
      const reply = await this.#send((link) => link.multi!(ops));
      const created = reply.value?.[0];
      if (reply.rc === ErrorCode.ok && created?.op === 'create') {
        const followed = await this.watchNode(newPath, follow);
        return followed ? { path: newPath, creationId: created.creationId } : 'missing';
      }
      if (reply.rc === ErrorCode.badVersion) return 'conflict';
      if (reply.rc === ErrorCode.noNode) return 'missing';
      if (reply.rc !== ErrorCode.nodeExists && !isConnectionLoss(reply.rc))
        throw unavailable('multi', reply.rc);
      // The reply was lost (or an earlier try was applied and its reply lost): look before trying again.
      await this.#whenConnected('multi');
      if (session !== this.#session) return 'missing';
      const existing = await this.watchNode(newPath, follow);
      if (existing) return { path: newPath, creationId: existing.creationId };
    }
    throw new LockError('UNAVAILABLE', `ZooKeeper multi under ${dir} kept losing its connection`);
  }

  waitUntilDeleted(path: string, options: { signal: AbortSignal }): Promise<void> {
    const { signal } = options;
    if (signal.aborted) return Promise.reject(signal.reason);
    let waiters = this.#watches.get(path);
    const arm = waiters === undefined;
    waiters ??= new Set();
    this.#watches.set(path, waiters);
    const shared = waiters;
    const done = new Promise<void>((resolve, reject) => {
      const waiter: DeletionWaiter = {
        settle: (error) => {
          signal.removeEventListener('abort', onAbort);
          if (error) reject(error);
          else resolve();
        },
      };
      const onAbort = (): void => {
        // The ZooKeeper watch stays armed (3.5 has no way to remove one); it fires into an
        // empty set later, and no other waiter is disturbed.
        shared.delete(waiter);
        reject(signal.reason);
      };
      shared.add(waiter);
      signal.addEventListener('abort', onAbort, { once: true });
    });
    if (arm) void this.#armDeletionWatch(path, shared);
    return done;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#connected = false;
    clearInterval(this.#heartbeat);
    clearTimeout(this.#watchdog);
    // Closing the session deletes our ephemeral nodes at once: the locks are free immediately.
    this.#link.close();
    for (const link of this.#abandoned) link.close();
    this.#abandoned.clear();
    // The addon closes its libuv poll handle asynchronously; a new handle (here or in another
    // store) whose socket reuses the descriptor before that has happened misses its first events
    // and connects only on its next timer tick (seen here: 1.5 s). One turn of the event loop
    // lets the close finish (and the protocol client's closeSession go out).
    await new Promise((resolve) => setImmediate(resolve));
    this.#session.end(new LockError('LOCK_LOST', 'the server closed its ZooKeeper session'));
    for (const wake of this.#connectionWaiters) wake();
    const closed = new LockError('UNAVAILABLE', 'the ZooKeeper store is closed');
    for (const waiters of this.#watches.values()) {
      for (const waiter of waiters) waiter.settle(closed);
      waiters.clear();
    }
    this.#watches.clear();
    this.#followers.clear();
    this.#childWatchers.clear();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /**
   * Arms a getData watch (Curator's choice over exists(): on a missing node exists() would
   * leave a watch behind that never fires) and settles `waiters` when the node is deleted, at
   * once if it is already gone, or with the error if the watch cannot be armed.
   */
  async #armDeletionWatch(path: string, waiters: Set<DeletionWaiter>): Promise<void> {
    this.stats.watchesArmed += 1;
    try {
      const reply = await this.#call('getData', (link) => link.getData(path, true));
      if (reply.rc === ErrorCode.noNode) this.#settleWaiters(path, waiters);
      else if (reply.rc !== ErrorCode.ok)
        this.#settleWaiters(path, waiters, unavailable('getData', reply.rc));
    } catch (error) {
      this.#settleWaiters(path, waiters, error instanceof LockError ? error : unavailable('getData', -1));
    }
  }

  #settleWaiters(path: string, waiters: Set<DeletionWaiter>, error?: LockError): void {
    if (this.#watches.get(path) === waiters) this.#watches.delete(path);
    for (const waiter of waiters) waiter.settle(error);
    waiters.clear();
  }

  /** Reads a followed node again with a watch (it changed), and tells its followers. */
  async #readFollowed(path: string): Promise<void> {
    let reply: LinkReply<NodeData>;
    try {
      reply = await this.#call('getData', (link) => link.getData(path, true));
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
   * A node event from the link's one watcher. Watches are armed per path with plain reads, not
   * with a watcher function each: one watch per path serves every waiter and follower of it.
   */
  #onNodeEvent(link: ZooKeeperLink, kind: NodeEventKind, path: string): void {
    if (this.#link !== link || this.#closed) return;
    if (kind === 'children' || kind === 'created') {
      this.#onParentEvent(path);
      return;
    }
    const deleted = kind === 'deleted';
    // A watched parent that is deleted (its queue emptied) changed too.
    if (deleted) this.#onParentEvent(path);
    const waiters = this.#watches.get(path);
    if (waiters) {
      if (deleted) {
        this.stats.waitersWoken += waiters.size;
        this.#settleWaiters(path, waiters);
      } else {
        void this.#armDeletionWatch(path, waiters); // data changed: the watch is used up
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

  /** A children or creation event on a watched parent: re-arm, and tell its watchers. */
  #onParentEvent(dir: string): void {
    if (!this.#childWatchers.has(dir)) return;
    void this.#armChildWatch(dir);
    for (const onChange of this.#childWatchers.get(dir)) onChange();
  }

  /** Opens a new link, and with it a new session, with the digest credentials if any. */
  #open(): void {
    const options = {
      connectString: this.#options.connectString,
      sessionTimeoutMs: this.#options.sessionTimeoutMs,
      ...(this.#options.protection ? { digest: this.#options.protection.digest } : {}),
    };
    const link: ZooKeeperLink = this.#newLink(options, {
      connected: () => this.#onConnected(link),
      disconnected: () => {
        if (this.#link !== link || this.#closed) return;
        this.#connected = false;
        this.#logger.warn({ session: this.#session.id }, 'disconnected from ZooKeeper; reconnecting');
        this.#assessSession();
      },
      ended: (_expired, why) => {
        this.#abandoned.delete(link);
        if (this.#link !== link || this.#closed) return;
        this.#logger.warn({ session: this.#session.id }, `${why}; opening a new session`);
        this.#replaceSession(why, true);
      },
      node: (kind, path) => this.#onNodeEvent(link, kind, path),
    });
    this.#link = link;
  }

  #onConnected(link: ZooKeeperLink): void {
    if (this.#abandoned.delete(link)) {
      // A session given up as lost came back: close it now (it answers quickly) so the nodes
      // its holders were told they lost are deleted rather than left until it expires.
      setImmediate(() => link.close());
      return;
    }
    if (this.#link !== link || this.#closed) return;
    this.#connected = true;
    const session = this.#session;
    const isNew = !session.established;
    session.established = true;
    session.id = link.sessionId;
    this.#logger.info(
      { session: link.sessionId, sessionTimeoutMs: link.negotiatedTimeoutMs },
      isNew ? 'ZooKeeper session established' : 'reconnected to ZooKeeper; session kept',
    );
    this.#startHeartbeat(link);
    // The handshake is a reply: ZooKeeper has just heard from us.
    this.#heardFrom(link, performance.now());
    for (const wake of this.#connectionWaiters) wake();
  }

  /**
   * Ends the current session (its holders hear `lost`), opens a new one, and arms the deletion
   * watches of waiters on the new one: a node that went with the old session wakes its waiters
   * at once, another session's node keeps them waiting.
   *
   * `expired`: ZooKeeper ended the session and the link is closed already. Otherwise the session
   * is given up while its link may be dead, and the old link is not closed now: closing a
   * connected addon handle blocks this thread until ZooKeeper answers or 1.5 s pass (the C
   * client's `wait_for_session_to_be_closed`), which would stall every stream of the server, and
   * a closeSession sent on a dead connection is lost anyway. It is closed once it reconnects (so
   * its nodes go at once), or ends on expiry.
   */
  #replaceSession(why: string, expired: boolean): void {
    const old = { session: this.#session, link: this.#link, watches: this.#watches };
    this.#connected = false;
    clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
    this.#session = new ZooKeeperSession();
    this.#watches = new Map();
    // Followers hold on the old session: their leases are lost with it.
    this.#followers.clear();
    // Dashboards keep watching: their watches move to the new session.
    for (const dir of this.#childWatchers.keys()) void this.#armChildWatch(dir);
    old.session.end(new LockError('LOCK_LOST', why));
    if (!expired) this.#abandoned.add(old.link);
    this.#open();
    for (const [path, waiters] of old.watches) {
      if (waiters.size === 0) continue;
      this.#watches.set(path, waiters);
      void this.#armDeletionWatch(path, waiters);
    }
  }

  /** Sends a cheap request every HEARTBEAT of the session timeout, so silence is noticed. */
  #startHeartbeat(link: ZooKeeperLink): void {
    if (this.#heartbeat !== undefined) return;
    this.#heartbeat = setInterval(() => {
      if (this.#link !== link || !this.#connected) return;
      void this.#send((current) => current.exists('/', false));
    }, this.#sessionTimeoutMs() * HEARTBEAT_FRACTION);
    this.#heartbeat.unref();
  }

  /** A reply arrived to a request sent at `sentAt`: ZooKeeper heard from this session then. */
  #heardFrom(link: ZooKeeperLink, sentAt: number): void {
    if (link !== this.#link || sentAt <= this.#lastConfirmedAt) return;
    this.#lastConfirmedAt = sentAt;
    this.#assessSession();
  }

  /**
   * Decides, from the time since the newest reply, whether the session is confirmed, in doubt,
   * or to be given up before ZooKeeper can expire it; and wakes itself for the next threshold.
   */
  #assessSession(): void {
    const session = this.#session;
    if (this.#closed || !session.established) return;
    const timeoutMs = this.#sessionTimeoutMs();
    const silentMs = performance.now() - this.#lastConfirmedAt;
    if (silentMs >= timeoutMs * LOSS_FRACTION) {
      const why =
        `no reply from ZooKeeper for ${Math.round(silentMs)} ms of a ${timeoutMs} ms session timeout: ` +
        'the session may expire at any moment, so its locks are given up first';
      this.#logger.warn({ session: session.id, silentMs: Math.round(silentMs) }, why);
      this.#replaceSession(why, false);
      return;
    }
    session.setConfirmed(this.#connected && silentMs < timeoutMs * DOUBT_FRACTION);
    if (this.#watchdog === undefined) {
      const next = silentMs < timeoutMs * DOUBT_FRACTION ? DOUBT_FRACTION : LOSS_FRACTION;
      this.#watchdog = setTimeout(
        () => {
          this.#watchdog = undefined;
          this.#assessSession();
        },
        timeoutMs * next - silentMs,
      );
      this.#watchdog.unref();
    }
  }

  /** The session timeout ZooKeeper granted, or the one asked for before it has answered. */
  #sessionTimeoutMs(): number {
    const negotiated = this.#link.negotiatedTimeoutMs;
    return negotiated > 0 ? negotiated : this.#options.sessionTimeoutMs;
  }

  /**
   * Waits, if `dir` is being created, until it is; creates that wait are then sent again in the
   * order they were first made (`ticket`). A create that found `dir` missing starts its
   * creation. Without this, a request arriving while earlier ones create the parent would be
   * sent before their second try and take an earlier place in the queue.
   */
  #afterParentsOf(dir: string, ticket: number, start: boolean): Promise<void> | undefined {
    let barrier = this.#parentBarriers.get(dir);
    if (!barrier) {
      if (!start) return undefined;
      const created: ParentBarrier = { waiting: [] };
      barrier = created;
      this.#parentBarriers.set(dir, created);
      // Every create sent before this one is answered before the parent's create (a session's
      // requests are answered in order): each has joined by the time this settles.
      void this.#ensureParents(dir).then(
        () => this.#releaseBarrier(dir, created, undefined),
        (error: unknown) => this.#releaseBarrier(dir, created, error),
      );
    }
    const joined = barrier;
    return new Promise((resolve, reject) => joined.waiting.push({ ticket, resolve, reject }));
  }

  #releaseBarrier(dir: string, barrier: ParentBarrier, error: unknown): void {
    this.#parentBarriers.delete(dir);
    barrier.waiting.sort((a, b) => a.ticket - b.ticket);
    for (const waiter of barrier.waiting) {
      if (error === undefined) waiter.resolve();
      else waiter.reject(error);
    }
  }

  async #ensureParents(dir: string): Promise<void> {
    for (const path of ancestors(dir)) {
      if (this.#ensuredParents.has(path)) continue;
      await this.#createParent(path, 'persistent');
      this.#ensuredParents.add(path);
    }
    // The lock's own parent is a container: ZooKeeper removes it once it is empty.
    await this.#createParent(dir, 'container');
  }

  /**
   * Creates a parent node unless it exists. In the protected subtree it carries its ACL from
   * its create on (the addon sets it by a setACL right behind the create instead). A parent that
   * exists already keeps its ACL: start-up protects the tree (see #protectTree).
   */
  async #createParent(path: string, mode: NodeMode): Promise<void> {
    const acl = this.#aclFor(path);
    for (let attempt = 1; ; attempt += 1) {
      await this.#whenConnected('create');
      const created = await this.#send((link) => link.create(path, EMPTY, mode, acl));
      if (isConnectionLoss(created.rc) && attempt < MAX_ATTEMPTS) continue;
      if (created.rc === ErrorCode.ok || created.rc === ErrorCode.nodeExists) return;
      throw this.#createFailure(path, created.rc);
    }
  }

  /** The ACL a node at `path` gets: the protected one at or below the root, none elsewhere. */
  #aclFor(path: string): readonly Acl[] | undefined {
    const root = this.#options.protection?.root;
    return root !== undefined && (path === root || path.startsWith(`${root}/`)) ? this.#acl : undefined;
  }

  #createFailure(path: string, rc: number): LockError {
    return rc === ErrorCode.noAuth || rc === ErrorCode.invalidAcl
      ? this.#protectionFailure(path, rc)
      : unavailable(`create under ${path}`, rc);
  }

  #protectionFailure(path: string, rc: number): LockError {
    return new LockError(
      'UNAVAILABLE',
      rc === ErrorCode.noAuth
        ? `ZooKeeper node ${path} belongs to other credentials (NOAUTH): check the digest credentials, or pick another --root`
        : `ZooKeeper setACL on ${path} failed (code ${rc})`,
    );
  }

  /**
   * At start-up with protection: the root and the nodes of the lock layout below it
   * (`<root>/<dir>/<lock parent>`; request nodes under those have unguessable names and cannot
   * be listed by others) get the protected ACL, including those an unprotected server created.
   */
  async #protectTree(): Promise<void> {
    const root = this.#options.protection?.root;
    if (root === undefined) return;
    for (const ancestor of ancestors(root)) await this.#createParent(ancestor, 'persistent');
    await this.#createParent(root, 'persistent');
    // A root made before, by an unprotected server, is taken over; one that other credentials
    // protect stops start-up here (NOAUTH).
    await this.#setAcl(root);
    for (const dir of await this.children(root)) {
      const path = joinPath(root, dir);
      await this.#setAcl(path);
      await Promise.all((await this.children(path)).map((parent) => this.#setAcl(joinPath(path, parent))));
    }
  }

  async #setAcl(path: string): Promise<void> {
    const acl = this.#aclFor(path);
    if (!acl) return;
    const reply = await this.#call('setACL', (link) => link.setAcl(path, acl));
    if (reply.rc !== ErrorCode.ok && reply.rc !== ErrorCode.noNode)
      throw this.#protectionFailure(path, reply.rc);
  }

  /** A connect string's chroot must exist: ZooKeeper would answer every request with NONODE. */
  async #checkChroot(): Promise<void> {
    const chroot = /^[^/]*(\/.*)$/.exec(this.#options.connectString)?.[1];
    if (chroot === undefined || chroot === '/') return;
    const reply = await this.#call('exists', (link) => link.exists('/', false));
    if (reply.rc === ErrorCode.noNode) {
      throw new LockError(
        'UNAVAILABLE',
        `the chroot ${chroot} of the ZooKeeper connect string does not exist: create it first (zkCli.sh create ${chroot})`,
      );
    }
  }

  /** Sends an idempotent request, waiting out connection losses and sending it again. */
  async #call<T>(
    what: string,
    request: (link: ZooKeeperLink) => Promise<LinkReply<T>>,
  ): Promise<LinkReply<T>> {
    for (let attempt = 1; ; attempt += 1) {
      await this.#whenConnected(what);
      const reply = await this.#send(request);
      if (!isConnectionLoss(reply.rc) || attempt === MAX_ATTEMPTS) return reply;
    }
  }

  /** Sends one request on the current link; every reply counts as word from ZooKeeper. */
  async #send<T>(request: (link: ZooKeeperLink) => Promise<LinkReply<T>>): Promise<LinkReply<T>> {
    const link = this.#link;
    const sentAt = performance.now();
    const reply = await request(link);
    if (!isConnectionLoss(reply.rc) && reply.rc !== ErrorCode.sessionExpired) this.#heardFrom(link, sentAt);
    return reply;
  }

  /** Resolves when connected; rejects with UNAVAILABLE after `connectTimeoutMs` or on close. */
  async #whenConnected(what: string): Promise<void> {
    if (this.#closed) throw new LockError('UNAVAILABLE', 'the ZooKeeper store is closed');
    if (this.#connected) return;
    const waitMs = this.#options.connectTimeoutMs;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#connectionWaiters.delete(wake);
        reject(
          new LockError(
            'UNAVAILABLE',
            `ZooKeeper at ${this.#options.connectString} unreachable for ${waitMs} ms (${what})`,
          ),
        );
      }, waitMs);
      const wake = (): void => {
        clearTimeout(timer);
        this.#connectionWaiters.delete(wake);
        if (this.#closed) reject(new LockError('UNAVAILABLE', 'the ZooKeeper store is closed'));
        else resolve();
      };
      this.#connectionWaiters.add(wake);
    });
  }
}

function isConnectionLoss(rc: number): boolean {
  return rc === ErrorCode.connectionLoss || rc === ErrorCode.operationTimeout;
}

function unavailable(operation: string, rc: number): LockError {
  return new LockError('UNAVAILABLE', `ZooKeeper ${operation} failed (${errorName(rc)})`);
}

const EMPTY = new Uint8Array(0);

/**
 * Everything for the holder of `user:password`, nothing for anyone else. ZooKeeper's digest
 * scheme names an identity by `user:base64(sha1("user:password"))`.
 */
function digestAcl(credentials: string): readonly Acl[] {
  const user = credentials.slice(0, credentials.indexOf(':'));
  const hash = createHash('sha1').update(credentials, 'utf8').digest('base64');
  return [{ perms: Perms.all, scheme: 'digest', id: `${user}:${hash}` }];
}

/** Creates waiting for their lock's directory to be created, each with its place in line. */
interface ParentBarrier {
  readonly waiting: Array<{ ticket: number; resolve: () => void; reject: (error: unknown) => void }>;
}
