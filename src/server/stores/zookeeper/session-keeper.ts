import type { Logger } from 'pino';
import { LockError } from '../../lock-error.js';
import { SessionState } from '../session-state.js';
import { ErrorCode } from './protocol/records.js';
import {
  SOMEONE,
  type OwnedRecord,
  type Ownership,
  type SessionClaim,
  type SessionOwnership,
} from './session-ownership.js';
import { plainWrite } from './link-writes.js';
import { isConnectionLoss } from './zookeeper-failures.js';
import type {
  LinkFactory,
  LinkOp,
  LinkOpResult,
  LinkReply,
  NodeEventKind,
  ZooKeeperLink,
} from './zookeeper-link.js';

export class ZooKeeperSession extends SessionState {
  /** Set once ZooKeeper has granted the session: only then is there anything to lose. */
  established = false;
  /** While sessions are published: the session's record, once published or claimed. */
  owned: OwnedRecord | undefined;
  /**
   * Set when the store let the session go while it lives on (taken over by another instance,
   * or given up or handed over while published, for another to take): its nodes may be someone
   * else's, so a write made for it rejects with this instead of going out on a later session.
   */
  letGo: LockError | undefined;
  constructor() {
    super('connecting', false);
  }
}

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

/**
 * The store's one ZooKeeper session at a time, on a link (`ZooKeeperLink`), and its health.
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
  readonly #ownership: SessionOwnership | undefined;
  #link!: ZooKeeperLink;
  #session = new ZooKeeperSession();
  /** Connected, and (with ownership) the session's record published or checked. */
  #connected = false;
  readonly #connectionWaiters = new Set<() => void>();
  #closed = false;
  /** Why no session can be offered any more (an attached session is over, a publish failed). */
  #unusable: LockError | undefined;
  /** Whether the attached session ended before it could be claimed (see `attach`). */
  #overBeforeClaim = false;
  /** Node events that arrived while the ownership of a reconnected session was being checked. */
  #heldEvents: Array<[NodeEventKind, string]> | undefined;
  /** Set while a failed check in a write is being looked into (see #writeFenced). */
  #noticing: Promise<void> | undefined;
  readonly #takenOverListeners = new Set<(by: string) => void>();
  /** performance.now() at the send of the newest request that got a reply on this session. */
  #lastConfirmedAt = 0;
  #heartbeat: NodeJS.Timeout | undefined;
  #watchdog: NodeJS.Timeout | undefined;

  constructor(options: SessionKeeperOptions, newLink: LinkFactory, events: SessionKeeperEvents) {
    this.#options = options;
    this.#logger = options.logger;
    this.#newLink = newLink;
    this.#events = events;
    this.#ownership = options.ownership;
    if (options.attach && !options.ownership) throw new Error('INVARIANT: attaching needs ownership');
    this.#open();
  }

  /** The name the current session is published under (empty before it is). */
  get publishedAs(): string {
    return this.#session.owned?.name ?? this.#options.attach?.claim.name ?? '';
  }

  /** Whether an attached session ended (expired, or its record gone) before it was claimed. */
  get overBeforeClaim(): boolean {
    return this.#overBeforeClaim;
  }

  onTakenOver(listener: (by: string) => void): () => void {
    this.#takenOverListeners.add(listener);
    return () => this.#takenOverListeners.delete(listener);
  }

  /** The link of the current session. */
  get link(): ZooKeeperLink {
    return this.#link;
  }

  get session(): ZooKeeperSession {
    return this.#session;
  }

  /** Sends one request on the current link; every reply counts as word from ZooKeeper. */
  async send<T>(request: (link: ZooKeeperLink) => Promise<LinkReply<T>>): Promise<LinkReply<T>> {
    const link = this.#link;
    const sentAt = performance.now();
    const reply = await request(link);
    if (!isConnectionLoss(reply.rc) && reply.rc !== ErrorCode.sessionExpired) this.#heardFrom(link, sentAt);
    return reply;
  }

  /**
   * Sends a write: `ops`, one alone or several as a multi. While sessions are published, as one
   * multi behind a check of the record (one request all the same); a failed check means the
   * session was taken over: the session is let go and the write rejects with LOCK_LOST, as it
   * does when `issuedIn`, the session it was made for, was let go before it went out.
   */
  async write(ops: readonly LinkOp[], issuedIn: ZooKeeperSession): Promise<LinkReply<LinkOpResult[]>> {
    if (issuedIn.letGo) throw issuedIn.letGo;
    if (!this.#ownership) return this.send((link) => plainWrite(link, ops));
    const session = this.#session;
    const record = session.owned;
    // Not confirmed (yet): as a lost connection, the caller waits for one and tries again.
    if (!record || !this.#connected) return { rc: ErrorCode.connectionLoss, value: null };
    const link = this.#link;
    const reply = await this.send((current) => current.multi!(this.#ownership!.fenced(record, ops)));
    if (reply.failedOp === 0 && (reply.rc === ErrorCode.badVersion || reply.rc === ErrorCode.noNode)) {
      await (this.#noticing ??= this.#recheck(link, record));
      if (session.letGo) throw session.letGo;
      if (session.lost.aborted) throw session.lost.reason as LockError;
      throw new LockError('LOCK_LOST', `ZooKeeper session ${session.id} is not this store's any more`);
    }
    return {
      rc: reply.rc,
      value: reply.value && reply.value.slice(1),
      ...(reply.failedOp === undefined ? {} : { failedOp: reply.failedOp - 1 }),
    };
  }

  /**
   * Resolves when connected; rejects with UNAVAILABLE after `connectTimeoutMs` or on close, and
   * with its LOCK_LOST once `issuedIn` (the session a write was made for) is let go.
   */
  async whenConnected(what: string, issuedIn?: ZooKeeperSession): Promise<void> {
    const blocked = (): LockError | undefined =>
      this.#closed
        ? new LockError('UNAVAILABLE', 'the ZooKeeper store is closed')
        : (this.#unusable ?? issuedIn?.letGo);
    const problem = blocked();
    if (problem) throw problem;
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
        const stop = blocked();
        if (!stop && !this.#connected) return;
        clearTimeout(timer);
        this.#connectionWaiters.delete(wake);
        if (stop) reject(stop);
        else resolve();
      };
      this.#connectionWaiters.add(wake);
    });
  }

  /** Lets every waiter for a connection look again: connected, closed, or its session let go. */
  #wakeWaiters(): void {
    for (const wake of [...this.#connectionWaiters]) wake();
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
    const unclaimed = this.#options.attach !== undefined && !session.owned;
    // Asked once more, just before the closeSession: a taker that attached while this link was
    // reconnecting may have bumped the record after the reconnection's check found it ours
    // (ZooKeeper can leave both connections of one session open). Unanswered counts as taken.
    const owned = session.owned;
    const stillOurs =
      owned && this.#ownership && !session.letGo && !unclaimed && this.#connected
        ? (await this.#askedWithin(this.#ownership.check(this.#link, owned)))?.kind === 'owned'
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
    this.#wakeWaiters();
  }

  /** `asking`'s answer, or undefined if none came within a third of the session timeout. */
  async #askedWithin<T>(asking: Promise<T>): Promise<T | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const unanswered = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), this.#sessionTimeoutMs() * DOUBT_FRACTION);
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
    this.#wakeWaiters();
  }

  #shutDown(): void {
    this.#closed = true;
    this.#connected = false;
    this.#heldEvents = undefined;
    clearInterval(this.#heartbeat);
    clearTimeout(this.#watchdog);
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
      connected: () => this.#onConnected(link),
      disconnected: () => {
        if (this.#link !== link || this.#closed) return;
        this.#connected = false;
        this.#logger.warn({ session: this.#session.id }, 'disconnected from ZooKeeper; reconnecting');
        this.#assessSession();
      },
      ended: (_expired, why) => {
        if (this.#link !== link || this.#closed) return;
        if (attach && !this.#session.owned) this.#overBeforeClaim = true;
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

  #onConnected(link: ZooKeeperLink): void {
    if (this.#link !== link || this.#closed) return;
    const session = this.#session;
    const isNew = !session.established;
    session.established = true;
    session.id = link.sessionId;
    this.#logger.info(
      { session: link.sessionId, sessionTimeoutMs: link.negotiatedTimeoutMs },
      isNew ? 'ZooKeeper session established' : 'reconnected to ZooKeeper; session kept',
    );
    // The handshake is a reply: ZooKeeper has just heard from us.
    this.#heardFrom(link, performance.now());
    if (!this.#ownership) {
      this.#ready(link);
      return;
    }
    // Nothing may act on the session before its ownership is settled, watch events included.
    this.#heldEvents ??= [];
    void this.#settleOwnership(link);
  }

  /** The session is usable: requests go out, heartbeats start. */
  #ready(link: ZooKeeperLink): void {
    this.#connected = true;
    this.#startHeartbeat(link);
    this.#assessSession();
    const held = this.#heldEvents;
    this.#heldEvents = undefined;
    for (const [kind, path] of held ?? []) this.#events.node(kind, path);
    this.#wakeWaiters();
  }

  /**
   * After a connect: publishes a new session's record, claims an attached one, or checks after a
   * reconnection that the record is still at the owned version. The first request on the
   * session either way: nothing is sent for the store before it has answered.
   */
  async #settleOwnership(link: ZooKeeperLink): Promise<void> {
    const ownership = this.#ownership!;
    const session = this.#session;
    const claim = this.#options.attach?.claim;
    let settled: Ownership;
    if (session.owned) settled = await ownership.check(link, session.owned);
    else if (claim) settled = await claim.attempt(link);
    else settled = await ownership.publish(link);
    if (link !== this.#link || session !== this.#session || this.#closed) return;
    switch (settled.kind) {
      case 'owned': {
        const first = !session.owned;
        session.owned = settled.record;
        if (first && claim) {
          this.#logger.info(
            { session: session.id, publishedAs: claim.name, owner: ownership.owner },
            'took a ZooKeeper session over',
          );
        } else if (first) {
          this.#logger.info(
            { session: session.id, publishedAs: settled.record.name },
            'ZooKeeper session published',
          );
        }
        this.#ready(link);
        return;
      }
      case 'takenOver':
        this.#takenOver(link, settled.by);
        return;
      case 'unanswered':
        return; // asked again at the next connect
      case 'over':
        this.#over(link);
        return;
      case 'failed':
        this.#logger.error(
          { session: session.id, err: settled.error },
          'could not publish or claim the ZooKeeper session',
        );
        this.#unusable = settled.error;
        this.#endSession(settled.error.message, 'failed');
        return;
    }
  }

  /**
   * A write's check failed on `link`: reads the record to find out who took the session over,
   * or whether the session is over, and lets it go.
   */
  async #recheck(link: ZooKeeperLink, record: OwnedRecord): Promise<void> {
    try {
      const found = await this.#ownership!.check(link, record);
      // The check failed: not ours, whoever owns it now (unanswered: someone the record would name).
      if (found.kind === 'over') this.#over(link);
      else this.#takenOver(link, found.kind === 'takenOver' ? found.by : SOMEONE);
    } finally {
      this.#noticing = undefined;
    }
  }

  /**
   * The record of the session of `link` is gone, and so, but for a record deleted by hand, is
   * the session: nobody can take it over any more. Ended as an expired one.
   */
  #over(link: ZooKeeperLink): void {
    if (link !== this.#link || this.#closed) return;
    const session = this.#session;
    if (this.#options.attach && !session.owned) this.#overBeforeClaim = true;
    const why = `ZooKeeper session ${session.id} is over: its record is gone`;
    this.#logger.warn({ session: session.id }, why);
    this.#endSession(why, 'over');
  }

  /** Another instance owns the session of `link` now: tells the listeners, then lets it go. */
  #takenOver(link: ZooKeeperLink, by: string): void {
    if (link !== this.#link || this.#closed) return;
    const session = this.#session;
    this.#logger.warn(
      { session: session.id, publishedAs: session.owned?.name, by },
      'ZooKeeper session taken over by another instance: letting it go',
    );
    for (const listener of [...this.#takenOverListeners]) {
      try {
        listener(by);
      } catch (error) {
        this.#logger.error({ err: error }, 'a takeover listener failed');
      }
    }
    this.#endSession(`ZooKeeper session ${session.id} was taken over by ${by}`, 'takenOver');
  }

  /**
   * Ends the current session (its holders hear `lost`) and opens a new one, unless the store
   * attached to a session (or could not publish one): then no other follows.
   *
   * `expired`: ZooKeeper ended the session and the link is closed already. `givenUp` (or
   * `failed`): the session is given up while its link may still be connected, and its link is
   * closed at once, whatever it does: a link left open would keep the session alive with its
   * pings, and with it the nodes its holders were told they lost, for good. Connected, the link
   * sends a closeSession (its nodes go at once); otherwise it stops, and the session expires
   * within its timeout. Closing a connected addon handle blocks this thread until ZooKeeper
   * answers (at most 1.5 s, the C client's `wait_for_session_to_be_closed`); it is done in a
   * turn of its own, outside any callback of that handle.
   *
   * `takenOver`, and `givenUp` while published: the link is dropped instead, without a
   * closeSession: a taker's nodes must never be deleted from here, and a given-up session lives
   * on for its timeout for an instance its clients resume on to take over.
   */
  #endSession(why: string, how: 'expired' | 'givenUp' | 'takenOver' | 'over' | 'failed'): void {
    const old = { session: this.#session, link: this.#link };
    this.#connected = false;
    this.#heldEvents = undefined;
    clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
    const error = new LockError('LOCK_LOST', why);
    const leftAlive = how === 'takenOver' || (how === 'givenUp' && this.#ownership !== undefined);
    // An attached session this store has not claimed is not its to end either.
    const unclaimed = this.#options.attach !== undefined && !old.session.owned;
    if (leftAlive) old.session.letGo = error;
    if (leftAlive || (unclaimed && how !== 'expired')) old.link.drop!();
    else if (how !== 'expired') setImmediate(() => old.link.close());
    if (this.#options.attach || this.#unusable) {
      const over =
        this.#unusable ?? new LockError('UNAVAILABLE', `the taken-over ZooKeeper session is over (${why})`);
      this.#unusable = over;
      this.#events.over(over);
      old.session.end(error);
      this.#wakeWaiters();
      return;
    }
    this.#session = new ZooKeeperSession();
    this.#events.replaced();
    old.session.end(error);
    this.#open();
    // Writes made for a session let go stop waiting for the next one.
    if (old.session.letGo) this.#wakeWaiters();
  }

  /** Sends a cheap request every HEARTBEAT of the session timeout, so silence is noticed. */
  #startHeartbeat(link: ZooKeeperLink): void {
    if (this.#heartbeat !== undefined) return;
    this.#heartbeat = setInterval(() => {
      if (this.#link !== link || !this.#connected) return;
      void this.send((current) => current.exists('/', false));
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
      this.#endSession(why, 'givenUp');
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
}
