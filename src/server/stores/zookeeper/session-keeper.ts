/* The ZooKeeper store's one session at a time on its link: opening it, waiting for it to be usable,
 * sending on it, and ending, replacing, closing or handing it over. */
import type { Logger } from 'pino';
import { LockError } from '../../lock-error.js';
import { plantedBug } from '../../planted-bugs.js';
import { ConnectionWaiters } from './connection-waiters.js';
import { OwnershipGuard, type GuardedKeeper } from './ownership-guard.js';
import { ErrorCode } from './protocol/records.js';
import { SessionEnds, type SessionEnd } from './session-ends.js';
import { SessionHealth, type WatchedKeeper } from './session-health.js';
import type { SessionClaim, SessionOwnership } from './session-ownership.js';
import { SessionRequests, type LinkRequest, type RequestTimer } from './session-requests.js';
import type {
  LinkFactory,
  LinkOp,
  LinkOpResult,
  LinkReply,
  NodeEventKind,
  ZooKeeperLink,
} from './zookeeper-link.js';
import { ZooKeeperSession } from './zookeeper-session.js';

export interface SessionKeeperOptions {
  readonly connectString: string;
  readonly sessionTimeoutMs: number;
  readonly connectTimeoutMs: number;
  readonly logger: Logger;
  /** Digest credentials (`user:password`) for every session. */
  readonly digest?: string | undefined;
  /** Publish every session and fence every write with its record (see SessionOwnership). */
  readonly ownership?: SessionOwnership | undefined;
  /**
   * Attach to another store's published session and claim it, instead of creating sessions;
   * when that session is over, open no other one. Needs `ownership`.
   */
  readonly attach?:
    { readonly claim: SessionClaim; readonly id: bigint; readonly password: Uint8Array } | undefined;
  /** Told of every request sent, once answered (see RequestTimer). */
  readonly timeRequest?: RequestTimer | undefined;
}

/** What the keeper tells the store. */
export interface SessionKeeperEvents {
  /** A watch armed on the current session fired. */
  node(kind: NodeEventKind, path: string): void;
  /**
   * A new session (current from now on, not connected yet) replaces a lost one, whose holders
   * hear `lost` right after this returns.
   */
  replaced(): void;
  /** The session is over and no other follows (an attached session): everything waiting fails. */
  over(error: LockError): void;
}

/**
 * The store's one ZooKeeper session at a time, on a link (`ZooKeeperLink`). Its health (how long
 * ZooKeeper has been silent) is watched by SessionHealth, its ownership while published by
 * OwnershipGuard; both act on it through this keeper.
 *
 * A disconnection is "maybe lost" (the session may survive it; the client reconnects and
 * re-arms its watches by itself) and requests wait for the reconnection; an expired session,
 * or one silent for too long, is "lost": its ephemeral nodes are gone (or must be taken as
 * gone), `session.lost` aborts and a new session is opened on a new link.
 *
 * With `ownership` (sessions that can move to another instance), a session is usable only
 * once the store has published it, or claimed it when attached to another's, and again after
 * each reconnection only once it has checked that nobody took it over meanwhile: a paused owner
 * that wakes re-attaches to its session (ZooKeeper then drops the taker's connection), and must
 * let go at once instead of acting on it or keeping it. Every write goes behind a check of the
 * record (`write`). A session taken over, given up or handed over is dropped, never closed: a
 * closeSession would delete the nodes a taker adopted.
 */
export class SessionKeeper {
  readonly #options: SessionKeeperOptions;
  readonly #logger: Logger;
  readonly #newLink: LinkFactory;
  readonly #events: SessionKeeperEvents;
  readonly #health: SessionHealth;
  /** Set while sessions are published (`ownership`). */
  readonly #guard: OwnershipGuard | undefined;
  readonly #requests: SessionRequests;
  #link!: ZooKeeperLink;
  #session = new ZooKeeperSession();
  /** Connected, and (with ownership) the session's record published or checked. */
  #connected = false;
  /** The requests waiting in whenConnected for the session to be usable. */
  readonly #waiters: ConnectionWaiters;
  #closed = false;
  /** What becomes of each session ended, and whether another may follow. */
  readonly #ends: SessionEnds;
  /** Node events that arrived while the ownership of a reconnected session was being checked. */
  #heldEvents: Array<[NodeEventKind, string]> | undefined;

  constructor(options: SessionKeeperOptions, newLink: LinkFactory, events: SessionKeeperEvents) {
    this.#options = options;
    this.#logger = options.logger;
    this.#newLink = newLink;
    this.#events = events;
    if (options.attach && !options.ownership) throw new Error('INVARIANT: attaching needs ownership');
    const keeper: WatchedKeeper & GuardedKeeper = {
      link: () => this.#link,
      timeoutMs: () => this.timeoutMs,
      session: () => this.#session,
      usable: () => this.#connected,
      closed: () => this.#closed,
      send: (operation, request) => this.send(operation, request),
      sendThroughLeader: (operation, request) => this.sendThroughLeader(operation, request),
      heartbeat: (link) =>
        plantedBug === 'follower-reads'
          ? this.send('exists', (current) => current.exists('/', false))
          : this.#guard
            ? this.#guard.heartbeat(link)
            : this.sendThroughLeader('sync', (current) => current.sync('/')),
      giveUp: (why) => this.#endSession(why, 'givenUp'),
      moveOn: () => this.#link.moveOn?.(),
      ready: (link) => this.#ready(link),
      end: (why, how) => this.#endSession(why, how),
      fail: (error) => {
        this.#ends.fail(error);
        this.#endSession(error.message, 'failed');
      },
    };
    this.#health = new SessionHealth(keeper, this.#logger);
    this.#guard =
      options.ownership &&
      new OwnershipGuard({
        ownership: options.ownership,
        claim: options.attach?.claim,
        keeper,
        logger: this.#logger,
      });
    this.#ends = new SessionEnds({
      attached: options.attach !== undefined,
      published: this.#guard !== undefined,
    });
    this.#requests = new SessionRequests({
      link: () => this.#link,
      health: this.#health,
      guard: this.#guard,
      timer: options.timeRequest,
    });
    this.#waiters = new ConnectionWaiters(options);
    this.#open();
  }

  /** The name the current session is published under (empty before it is). */
  get publishedAs(): string {
    return this.#session.owned?.name ?? this.#options.attach?.claim.name ?? '';
  }

  /** Whether an attached session ended (expired, or its record gone) before it was claimed. */
  get overBeforeClaim(): boolean {
    return this.#ends.overBeforeClaim;
  }

  /** Only a published session can be taken over: without `ownership`, nobody is ever told. */
  onTakenOver(listener: (by: string) => void): () => void {
    return this.#guard?.onTakenOver(listener) ?? (() => {});
  }

  /** The session timeout ZooKeeper granted the current link, or the one asked for before it has. */
  get timeoutMs(): number {
    const negotiated = this.#link.negotiatedTimeoutMs;
    return negotiated > 0 ? negotiated : this.#options.sessionTimeoutMs;
  }

  /** The link of the current session. */
  get link(): ZooKeeperLink {
    return this.#link;
  }

  get session(): ZooKeeperSession {
    return this.#session;
  }

  /** Sends one request on the current link; `operation` names it for the request timer. */
  send<T>(operation: string, request: LinkRequest<T>): Promise<LinkReply<T>> {
    return this.#requests.send(operation, request);
  }

  /** Sends one request whose reply passes through ZooKeeper's leader (see SessionRequests). */
  sendThroughLeader<T>(operation: string, request: LinkRequest<T>): Promise<LinkReply<T>> {
    return this.#requests.sendThroughLeader(operation, request);
  }

  /** Sends a write made for `issuedIn`, fenced while sessions are published (see SessionRequests). */
  write(ops: readonly LinkOp[], issuedIn: ZooKeeperSession): Promise<LinkReply<LinkOpResult[]>> {
    return this.#requests.write(ops, issuedIn);
  }

  /**
   * Resolves when connected; rejects with UNAVAILABLE after `connectTimeoutMs` or on close, and
   * with its LOCK_LOST once `issuedIn` (the session a write was made for) is let go.
   */
  whenConnected(what: string, issuedIn?: ZooKeeperSession): Promise<void> {
    return this.#waiters.wait(
      what,
      () => this.#connected,
      () =>
        this.#closed
          ? new LockError('UNAVAILABLE', 'the ZooKeeper store is closed')
          : (this.#ends.unusable ?? issuedIn?.letGo),
    );
  }

  /**
   * Ends the session (its ephemeral nodes go at once) and every link. Idempotent.
   *
   * While published, only a session this store still owns as far as it knows is ended; one it
   * has not claimed yet, or knows taken over, is only let go. A takeover may race this close
   * unnoticed, and then the closeSession ends the taker's session with the nodes it adopted:
   * that is acceptable, because close() is the operator's "release everything now" stop, whose
   * promise is that every lock this instance served is freed at once; the taker's holders hear
   * that their session was lost, as after an expiry, and nothing is ever held twice.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    const session = this.#session;
    const unclaimed = this.#ends.unclaimed(session);
    // Asked once more, just before the closeSession: a taker that attached while this link was
    // reconnecting may have bumped the record after the reconnection's check found it ours
    // (ZooKeeper can leave both connections of one session open). Unanswered counts as taken.
    const owned = session.owned;
    const stillOurs =
      owned && this.#guard && !session.letGo && !unclaimed && this.#connected
        ? (await this.#askedWithin(this.#guard.stillOwns(this.#link, owned))) === true
        : !owned;
    if (this.#closed) return;
    this.#shutDown();
    if (session.letGo || unclaimed || !stillOurs) {
      this.#link.drop!();
    } else {
      // Closing the session deletes our ephemeral nodes at once: the locks are free immediately.
      this.#link.close();
    }
    // The addon closes its libuv poll handle asynchronously; a new handle (here or in another
    // store) whose socket reuses the descriptor before that has happened misses its first events
    // and connects only on its next timer tick (seen here: 1.5 s). One turn of the event loop
    // lets the close finish (and the protocol client's closeSession go out).
    await new Promise((resolve) => setImmediate(resolve));
    session.end(new LockError('LOCK_LOST', 'the server closed its ZooKeeper session'));
    this.#waiters.wake();
  }

  /** `asking`'s answer, or undefined if none came within a third of the session timeout. */
  async #askedWithin<T>(asking: Promise<T>): Promise<T | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const unanswered = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), this.#health.doubtAfterMs);
    });
    try {
      return await Promise.race([asking, unanswered]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Lets the session go without ending it (see SessionTakeover.handOver): no closeSession, no
   * more pings or reconnection, so it lives on for its timeout for another instance to take.
   */
  handOver(): void {
    if (this.#closed) return;
    const session = this.#session;
    this.#shutDown();
    this.#link.drop!();
    const error = new LockError('LOCK_LOST', `the server handed its ZooKeeper session ${session.id} over`);
    session.letGo ??= error;
    session.end(error);
    this.#waiters.wake();
  }

  #shutDown(): void {
    this.#closed = true;
    this.#connected = false;
    this.#heldEvents = undefined;
    this.#health.stop();
  }

  /**
   * Opens a new link, and with it a new session (or, attaching, the session to claim), with the
   * digest credentials if any.
   */
  #open(): void {
    const attach = this.#options.attach;
    const options = {
      connectString: this.#options.connectString,
      sessionTimeoutMs: this.#options.sessionTimeoutMs,
      ...(this.#options.digest === undefined ? {} : { digest: this.#options.digest }),
      ...(attach ? { session: { id: attach.id, password: attach.password } } : {}),
    };
    const link: ZooKeeperLink = this.#newLink(options, {
      connected: (handshakeSentAt) => this.#onConnected(link, handshakeSentAt),
      disconnected: () => {
        if (this.#link !== link || this.#closed) return;
        this.#connected = false;
        this.#logger.warn({ session: this.#session.id }, 'disconnected from ZooKeeper; reconnecting');
        this.#health.assess();
      },
      ended: (_expired, why) => {
        if (this.#link !== link || this.#closed) return;
        this.#logger.warn(
          { session: this.#session.id },
          attach ? `${why}; a taken-over session is not replaced` : `${why}; opening a new session`,
        );
        this.#endSession(why, 'expired');
      },
      node: (kind, path) => {
        if (this.#link !== link || this.#closed) return;
        if (this.#heldEvents) this.#heldEvents.push([kind, path]);
        else this.#events.node(kind, path);
      },
    });
    this.#link = link;
  }

  #onConnected(link: ZooKeeperLink, handshakeSentAt: number | undefined): void {
    if (this.#link !== link || this.#closed) return;
    const session = this.#session;
    const isNew = !session.established;
    session.established = true;
    session.id = link.sessionId;
    this.#logger.info(
      { session: link.sessionId, sessionTimeoutMs: link.negotiatedTimeoutMs },
      isNew ? 'ZooKeeper session established' : 'reconnected to ZooKeeper; session kept',
    );
    // The handshake's answer passed through the leader (a new session is a write; a member
    // that takes a session back has the leader revalidate it). The C client does not say when
    // it sent the handshake: then a sync answered is the first proof, and nothing acts on the
    // session before it, watch events included.
    if (handshakeSentAt !== undefined) {
      this.#health.leaderReached(link, handshakeSentAt);
      this.#settle(link);
      return;
    }
    this.#heldEvents ??= [];
    void this.sendThroughLeader('sync', (current) => current.sync('/')).then((reply) => {
      // Otherwise the connection was lost: the next connect tries again.
      if (reply.rc === ErrorCode.ok && this.#link === link && !this.#closed) this.#settle(link);
    });
  }

  /** The leader has heard the session since it connected: it becomes usable once settled. */
  #settle(link: ZooKeeperLink): void {
    if (!this.#guard) {
      this.#ready(link);
      return;
    }
    // Nothing may act on the session before its ownership is settled, watch events included.
    this.#heldEvents ??= [];
    void this.#guard.settle(link);
  }

  /** The session is usable: requests go out, heartbeats start. */
  #ready(link: ZooKeeperLink): void {
    this.#connected = true;
    this.#health.startHeartbeat(link);
    this.#health.assess();
    const held = this.#heldEvents;
    this.#heldEvents = undefined;
    for (const [kind, path] of held ?? []) this.#events.node(kind, path);
    this.#waiters.wake();
  }

  /**
   * Ends the current session (its holders hear `lost`) and opens a new one, unless the store
   * attached to a session (or could not publish one): then no other follows. What becomes of
   * its link: SessionEnds.end.
   */
  #endSession(why: string, how: SessionEnd): void {
    const old = { session: this.#session, link: this.#link };
    this.#connected = false;
    this.#heldEvents = undefined;
    this.#health.stopHeartbeat();
    const { error, over } = this.#ends.end(old.session, old.link, why, how);
    if (over) {
      this.#events.over(over);
      old.session.end(error);
      this.#waiters.wake();
      return;
    }
    this.#session = new ZooKeeperSession();
    this.#events.replaced();
    old.session.end(error);
    this.#open();
    // Writes made for a session let go stop waiting for the next one.
    if (old.session.letGo) this.#waiters.wake();
  }
}
