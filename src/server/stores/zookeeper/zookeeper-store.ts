import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { LockError } from '../../lock-error.js';
import {
  ancestors,
  emptyStats,
  joinPath,
  type CoordinationStore,
  type CreatedNode,
  type NodeData,
  type NodeWatchHandlers,
  type NodeFollow,
  type StoreSession,
  type StoreStats,
} from '../store.js';
import { ListenerMap } from '../listener-map.js';
import { SessionState } from '../session-state.js';
import {
  ZooKeeper,
  zk,
  type ZooKeeperHandle,
  type ZooKeeperNative,
  type ZooKeeperAcl,
  type ZooKeeperConfig,
  type ZooKeeperStat,
} from './zookeeper-client.js';

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

interface Reply<T> {
  readonly rc: number;
  readonly value: T | null;
}

/**
 * The ZooKeeper store: one ZooKeeper session for the whole server (the native C client).
 *
 * A disconnection is "maybe lost" (the session may survive it; the C client reconnects and
 * re-arms its watches by itself) and operations wait for the reconnection; an expired session
 * is "lost": its ephemeral nodes are gone, `session.lost` aborts and a new session is opened.
 */
export class ZooKeeperStore implements CoordinationStore {
  readonly kind = 'zookeeper';
  readonly stats: StoreStats = emptyStats();

  readonly #options: ZooKeeperStoreOptions;
  readonly #logger: Logger;
  #handle!: ZooKeeperHandle;
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
  readonly #acl: readonly ZooKeeperAcl[] | undefined;
  /**
   * The sequence number the next node under a lock's parent should get (see createSequential);
   * null where the last create found others queued: a guess there would mostly miss.
   */
  readonly #sequences = new Map<string, number | null>();
  #closed = false;
  /** performance.now() at the send of the newest request that got a reply on this session. */
  #lastConfirmedAt = 0;
  #heartbeat: NodeJS.Timeout | undefined;
  /** Handles of sessions given up as lost, not closed yet (see #replaceSession). */
  readonly #abandoned = new Set<ZooKeeperHandle>();
  #watchdog: NodeJS.Timeout | undefined;

  private constructor(options: ZooKeeperStoreOptions) {
    this.#options = options;
    this.#logger = options.logger;
    this.#acl = options.protection && digestAcl(options.protection.digest);
    this.#open();
  }

  /** Connects; rejects with `LockError('UNAVAILABLE')` if no connection is made in time. */
  static async connect(options: ZooKeeperStoreOptions): Promise<ZooKeeperStore> {
    const store = new ZooKeeperStore(options);
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
    return this.#handle.timeout;
  }

  /**
   * The current session's id and password. Fault-injection tests use them to attach a second
   * handle to this session and close it, which expires the session as a real expiry would.
   */
  get sessionCredentials(): { readonly id: string; readonly password: string } {
    return { id: this.#handle.client_id, password: this.#handle.client_password };
  }

  async createSequential(
    dir: string,
    prefix: string,
    data: Uint8Array,
    follow?: NodeFollow,
  ): Promise<CreatedNode> {
    const buffer = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
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
      const creating = this.#send<string>((native, done) =>
        native.a_create(joinPath(dir, prefix), buffer, zk.ZOO_EPHEMERAL_SEQUENTIAL, done),
      );
      const listing = this.#send<string[]>((native, done) => native.a_get_children(dir, false, done));
      const guess = follow && this.#nextSequence(dir, prefix);
      // A wrong guess (or a failed read) only costs the read after the create, below.
      const guessed =
        guess === undefined || !follow ? undefined : this.watchNode(guess, follow).catch(() => null);
      const [reply, listed, read] = await Promise.all([creating, listing, guessed]);
      if (reply.rc === zk.ZOK && reply.value !== null) {
        const path = reply.value;
        this.stats.creates += 1;
        this.stats.childrenListings += 1;
        const siblings =
          listed.rc === zk.ZOK && listed.value !== null ? listed.value : await this.children(dir);
        this.#sawSequence(dir, path, siblings.length === 1);
        if (!follow) return { path, session, siblings };
        if (guess === path && read) return { path, session, siblings, followed: read };
        return {
          path,
          session,
          siblings,
          followed: await this.watchNode(path, follow),
        };
      }
      if (reply.rc === zk.ZNONODE) {
        // The lock's parent does not exist (first use, or its empty container was removed).
        parentMade = this.#afterParentsOf(dir, ticket, true);
        continue;
      }
      if (!isConnectionLoss(reply.rc)) throw unavailable('create', reply.rc);
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
    const reply = await this.#call<string[]>('getChildren', (native, done) =>
      native.a_get_children(dir, false, done),
    );
    this.stats.childrenListings += 1;
    if (reply.rc === zk.ZNONODE) return [];
    if (reply.rc !== zk.ZOK || reply.value === null) throw unavailable('getChildren', reply.rc);
    return reply.value;
  }

  async creationId(path: string): Promise<bigint | null> {
    const reply = await this.#call<{ czxid: number }>('exists', (native, done) =>
      native.a_exists(path, false, done),
    );
    this.stats.creationIdReads += 1;
    if (reply.rc === zk.ZNONODE) return null;
    if (reply.rc !== zk.ZOK || reply.value === null) throw unavailable('exists', reply.rc);
    return BigInt(reply.value.czxid);
  }

  nodeData(path: string): Promise<NodeData | null> {
    return this.#getData(path, false);
  }

  /** getData, with a watch on the node if `watch` (dispatched by #onNodeEvent); null when it is missing. */
  async #getData(path: string, watch: boolean): Promise<NodeData | null> {
    const reply = await this.#call<{ stat: ZooKeeperStat; data: Buffer | string | null }>(
      'getData',
      (native, done) =>
        native.a_get(path, watch, (rc, error, stat, data) => done(rc, error, stat ? { stat, data } : null)),
    );
    if (reply.rc === zk.ZNONODE) return null;
    if (reply.rc !== zk.ZOK || reply.value === null) throw unavailable('getData', reply.rc);
    const { stat, data } = reply.value;
    return { creationId: BigInt(stat.czxid), data: toBytes(data) };
  }

  async setData(path: string, data: Uint8Array): Promise<boolean> {
    const reply = await this.#call<ZooKeeperStat>('setData', (native, done) =>
      native.a_set(path, Buffer.from(data), -1, done),
    );
    if (reply.rc === zk.ZNONODE) return false;
    if (reply.rc !== zk.ZOK) throw unavailable('setData', reply.rc);
    return true;
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
      const listing = await this.#call<string[]>('getChildren', (native, done) =>
        native.a_get_children(dir, true, done),
      );
      if (listing.rc !== zk.ZNONODE) return;
      const exists = await this.#call('exists', (native, done) => native.a_exists(dir, true, done));
      // Created in between: watch its children after all (an exists watch then fires on deletion only).
      if (exists.rc === zk.ZOK) await this.#armChildWatch(dir);
    } catch {
      // Store closed or unreachable: the session's fate reaches watchers through the caller.
    }
  }

  async delete(path: string): Promise<void> {
    const reply = await this.#call('delete', (native, done) => native.a_delete_(path, -1, done));
    this.stats.deletes += 1;
    if (reply.rc !== zk.ZOK && reply.rc !== zk.ZNONODE) throw unavailable('delete', reply.rc);
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
    this.#handle.close();
    for (const handle of this.#abandoned) handle.close();
    this.#abandoned.clear();
    // The addon closes its libuv poll handle asynchronously; a new handle (here or in another
    // store) whose socket reuses the descriptor before that has happened misses its first events
    // and connects only on its next timer tick (seen here: 1.5 s). One turn of the event loop
    // lets the close finish.
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
      const reply = await this.#call('getData', (native, done) =>
        native.a_get(path, true, (rc, error) => done(rc, error, null)),
      );
      if (reply.rc === zk.ZNONODE) this.#settleWaiters(path, waiters);
      else if (reply.rc !== zk.ZOK) this.#settleWaiters(path, waiters, unavailable('getData', reply.rc));
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
    let reply: Reply<Buffer | string>;
    try {
      reply = await this.#call<Buffer | string>('getData', (native, done) =>
        native.a_get(path, true, (rc, error, _stat, data) => done(rc, error, data)),
      );
    } catch {
      return; // the store is closed or unreachable: what holds on the session hears it there
    }
    const targets = this.#followers.get(path);
    if (reply.rc === zk.ZNONODE) {
      this.#followers.delete(path);
      for (const target of targets) target.onDeleted();
    } else if (reply.rc === zk.ZOK) {
      const data = toBytes(reply.value);
      for (const target of targets) target.onData(data);
    }
  }

  /**
   * A node event from ZooKeeper's default watcher. Watches are armed with plain getData calls,
   * not with a watcher function each: the addon never frees a per-call watcher function, so
   * every lock cycle would leak one (and whatever it closes over). One watch per path serves
   * every waiter and follower of that path.
   */
  /** A children or creation event on a watched parent: re-arm, and tell its watchers. */
  #onParentEvent(handle: ZooKeeperHandle, dir: string): void {
    if (this.#handle !== handle || this.#closed) return;
    if (!this.#childWatchers.has(dir)) return;
    void this.#armChildWatch(dir);
    for (const onChange of this.#childWatchers.get(dir)) onChange();
  }

  #onNodeEvent(handle: ZooKeeperHandle, path: string, deleted: boolean): void {
    if (this.#handle !== handle || this.#closed) return;
    // A watched parent that is deleted (its queue emptied) changed too.
    if (deleted) this.#onParentEvent(handle, path);
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

  /** Opens a new handle (and session); `replacing`: another handle was in use until now. */
  #open(replacing = false): void {
    const config = {
      connect: this.#options.connectString,
      timeout: this.#options.sessionTimeoutMs,
      // 0 turns the C client's and the addon's own logging off: they printf to stdout, in the
      // middle of the server's JSON log lines. What matters is logged here, through pino.
      debug_level: 0,
      host_order_deterministic: false,
    };
    const handle = new ZooKeeper(config);
    this.#handle = handle;
    handle.on('connect', () => {
      if (this.#abandoned.delete(handle)) {
        // A session given up as lost came back: close it now (it answers quickly) so the nodes
        // its holders were told they lost are deleted rather than left until it expires.
        setImmediate(() => handle.close());
        return;
      }
      if (this.#handle !== handle || this.#closed) return;
      this.#connected = true;
      const session = this.#session;
      const isNew = !session.established;
      session.established = true;
      session.id = handle.client_id;
      this.#logger.info(
        { session: handle.client_id, sessionTimeoutMs: handle.timeout },
        isNew ? 'ZooKeeper session established' : 'reconnected to ZooKeeper; session kept',
      );
      this.#startHeartbeat(handle);
      // The handshake is a reply: ZooKeeper has just heard from us.
      this.#heardFrom(handle, performance.now());
      for (const wake of this.#connectionWaiters) wake();
    });
    handle.on('deleted', (_self: unknown, path: string) => this.#onNodeEvent(handle, path, true));
    handle.on('child', (_self: unknown, path: string) => this.#onParentEvent(handle, path));
    handle.on('created', (_self: unknown, path: string) => this.#onParentEvent(handle, path));
    handle.on('changed', (_self: unknown, path: string) => this.#onNodeEvent(handle, path, false));
    handle.on('connecting', () => {
      if (this.#handle !== handle || this.#closed) return;
      this.#connected = false;
      this.#logger.warn({ session: this.#session.id }, 'disconnected from ZooKeeper; reconnecting');
      this.#assessSession();
    });
    handle.on('close', (_self: unknown, code: number) => {
      this.#abandoned.delete(handle);
      if (this.#handle !== handle || this.#closed) return;
      const why =
        code === zk.ZOO_EXPIRED_SESSION_STATE
          ? 'ZooKeeper session expired'
          : `ZooKeeper session closed (${code})`;
      this.#logger.warn({ session: this.#session.id }, `${why}; opening a new session`);
      this.#replaceSession(why, true);
    });
    if (!replacing) {
      this.#init(handle, config);
      return;
    }
    // The old handle may have closed its socket just now, inside the native callback that got
    // us here (a disconnect or an expiry is reported from within its I/O callback): a socket
    // opened now could reuse that descriptor while the old handle's libuv poll handle still
    // watches it, and two poll handles on one descriptor crash the process (uv_poll_start /
    // uv__io_stop assertions, or a segfault). One turn of the event loop lets the old handle
    // let go of it first; see close() too.
    setImmediate(() => {
      if (this.#handle === handle && !this.#closed) this.#init(handle, config);
    });
  }

  /**
   * Starts connecting, with the digest credentials if any: the C client sends them ahead of
   * every other request once the session is established, and again after each reconnection.
   */
  #init(handle: ZooKeeperHandle, config: ZooKeeperConfig): void {
    handle.init(config);
    const digest = this.#options.protection?.digest;
    if (digest === undefined) return;
    handle.native.add_auth('digest', digest, (rc) => {
      if (rc !== zk.ZOK) this.#logger.error({ rc }, 'ZooKeeper refused the digest credentials');
    });
  }

  /**
   * Ends the current session (its holders hear `lost`), opens a new one, and arms the deletion
   * watches of waiters on the new one: a node that went with the old session wakes its waiters
   * at once, another session's node keeps them waiting.
   *
   * `expired`: ZooKeeper ended the session and the addon has closed the handle already. Otherwise
   * the session is given up while its link may be dead, and the old handle is not closed now:
   * closing a connected handle blocks this thread until ZooKeeper answers or 1.5 s pass (the C
   * client's `wait_for_session_to_be_closed`), which would stall every stream of the server. It
   * is closed once it reconnects (so its nodes go at once) or the addon closes it on expiry.
   */
  #replaceSession(why: string, expired: boolean): void {
    const old = { session: this.#session, handle: this.#handle, watches: this.#watches };
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
    if (!expired) this.#abandoned.add(old.handle);
    this.#open(true);
    for (const [path, waiters] of old.watches) {
      if (waiters.size === 0) continue;
      this.#watches.set(path, waiters);
      void this.#armDeletionWatch(path, waiters);
    }
  }

  /** Sends a cheap request every HEARTBEAT of the session timeout, so silence is noticed. */
  #startHeartbeat(handle: ZooKeeperHandle): void {
    if (this.#heartbeat !== undefined) return;
    this.#heartbeat = setInterval(() => {
      if (this.#handle !== handle || !this.#connected) return;
      void this.#send((native, done) => native.a_exists('/', false, done));
    }, this.#sessionTimeoutMs() * HEARTBEAT_FRACTION);
    this.#heartbeat.unref();
  }

  /** A reply arrived to a request sent at `sentAt`: ZooKeeper heard from this session then. */
  #heardFrom(handle: ZooKeeperHandle, sentAt: number): void {
    if (handle !== this.#handle || sentAt <= this.#lastConfirmedAt) return;
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
    const negotiated = this.#handle.timeout;
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
      await this.#createParent(path, zk.ZOO_PERSISTENT);
      this.#ensuredParents.add(path);
    }
    // The lock's own parent is a container: ZooKeeper removes it once it is empty.
    await this.#createParent(dir, zk.ZOO_CONTAINER);
  }

  /**
   * Creates a parent node unless it exists. In the protected subtree its ACL is set by a request
   * pipelined right behind the create (the addon can only create world-open nodes), so no
   * request of another client's can fall between the two but one sent in that same instant.
   */
  async #createParent(path: string, flags: number): Promise<void> {
    const acl = this.#aclFor(path);
    for (let attempt = 1; ; attempt += 1) {
      await this.#whenConnected('create');
      const creating = this.#send((native, done) => native.a_create(path, '', flags, done));
      const protecting = acl && this.#send((native, done) => native.a_set_acl(path, -1, acl, done));
      const [created, secured] = await Promise.all([creating, protecting]);
      const lost = isConnectionLoss(created.rc) || (secured !== undefined && isConnectionLoss(secured.rc));
      if (lost && attempt < MAX_ATTEMPTS) continue;
      if (created.rc !== zk.ZOK && created.rc !== zk.ZNODEEXISTS) throw unavailable('create', created.rc);
      if (secured && secured.rc !== zk.ZOK) throw this.#protectionFailure(path, secured.rc);
      return;
    }
  }

  /** The ACL a node at `path` gets: the protected one at or below the root, none elsewhere. */
  #aclFor(path: string): readonly ZooKeeperAcl[] | undefined {
    const root = this.#options.protection?.root;
    return root !== undefined && (path === root || path.startsWith(`${root}/`)) ? this.#acl : undefined;
  }

  #protectionFailure(path: string, rc: number): LockError {
    return new LockError(
      'UNAVAILABLE',
      rc === zk.ZNOAUTH
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
    for (const ancestor of ancestors(root)) await this.#createParent(ancestor, zk.ZOO_PERSISTENT);
    await this.#createParent(root, zk.ZOO_PERSISTENT);
    for (const dir of await this.children(root)) {
      const path = joinPath(root, dir);
      await this.#setAcl(path);
      await Promise.all((await this.children(path)).map((parent) => this.#setAcl(joinPath(path, parent))));
    }
  }

  async #setAcl(path: string): Promise<void> {
    const acl = this.#aclFor(path);
    if (!acl) return;
    const reply = await this.#call('setACL', (native, done) => native.a_set_acl(path, -1, acl, done));
    if (reply.rc !== zk.ZOK && reply.rc !== zk.ZNONODE) throw this.#protectionFailure(path, reply.rc);
  }

  /** A connect string's chroot must exist: ZooKeeper would answer every request with NONODE. */
  async #checkChroot(): Promise<void> {
    const chroot = /^[^/]*(\/.*)$/.exec(this.#options.connectString)?.[1];
    if (chroot === undefined || chroot === '/') return;
    const reply = await this.#call('exists', (native, done) => native.a_exists('/', false, done));
    if (reply.rc === zk.ZNONODE) {
      throw new LockError(
        'UNAVAILABLE',
        `the chroot ${chroot} of the ZooKeeper connect string does not exist: create it first (zkCli.sh create ${chroot})`,
      );
    }
  }

  /** Sends an idempotent request, waiting out connection losses and sending it again. */
  async #call<T>(
    what: string,
    request: (native: ZooKeeperNative, done: (rc: number, error: string, value?: T | null) => void) => number,
  ): Promise<Reply<T>> {
    for (let attempt = 1; ; attempt += 1) {
      await this.#whenConnected(what);
      const reply = await this.#send(request);
      if (!isConnectionLoss(reply.rc) || attempt === MAX_ATTEMPTS) return reply;
    }
  }

  /** Sends one request on the current handle; every reply counts as word from ZooKeeper. */
  #send<T>(
    request: (native: ZooKeeperNative, done: (rc: number, error: string, value?: T | null) => void) => number,
  ): Promise<Reply<T>> {
    const handle = this.#handle;
    const sentAt = performance.now();
    return new Promise((resolve) => {
      const rc = request(handle.native, (replyRc, _error, value) => {
        if (!isConnectionLoss(replyRc) && replyRc !== zk.ZSESSIONEXPIRED) this.#heardFrom(handle, sentAt);
        resolve({ rc: replyRc, value: value ?? null });
      });
      if (rc !== zk.ZOK) resolve({ rc, value: null });
    });
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
  return rc === zk.ZCONNECTIONLOSS || rc === zk.ZOPERATIONTIMEOUT;
}

function unavailable(operation: string, rc: number): LockError {
  return new LockError('UNAVAILABLE', `ZooKeeper ${operation} failed (code ${rc})`);
}

/** Node data as the addon hands it over (a Buffer, or a string with an encoding set). */
function toBytes(data: Buffer | string | null): Uint8Array {
  return typeof data === 'string' ? Buffer.from(data) : (data ?? Buffer.alloc(0));
}

/**
 * Everything for the holder of `user:password`, nothing for anyone else. ZooKeeper's digest
 * scheme names an identity by `user:base64(sha1("user:password"))`.
 */
function digestAcl(credentials: string): readonly ZooKeeperAcl[] {
  const user = credentials.slice(0, credentials.indexOf(':'));
  const hash = createHash('sha1').update(credentials, 'utf8').digest('base64');
  return [{ perm: zk.ZOO_PERM_ALL, scheme: 'digest', auth: `${user}:${hash}` }];
}

/** Creates waiting for their lock's directory to be created, each with its place in line. */
interface ParentBarrier {
  readonly waiting: Array<{ ticket: number; resolve: () => void; reject: (error: unknown) => void }>;
}
