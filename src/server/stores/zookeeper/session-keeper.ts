import type { Logger } from 'pino';
import { LockError } from '../../lock-error.js';
import { SessionState } from '../session-state.js';
import { ErrorCode } from './protocol/records.js';
import { isConnectionLoss } from './zookeeper-failures.js';
import type { LinkFactory, LinkReply, NodeEventKind, ZooKeeperLink } from './zookeeper-link.js';

export class ZooKeeperSession extends SessionState {
  /** Set once ZooKeeper has granted the session: only then is there anything to lose. */
  established = false;
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
 */
export class SessionKeeper {
  readonly #options: SessionKeeperOptions;
  readonly #logger: Logger;
  readonly #newLink: LinkFactory;
  readonly #events: SessionKeeperEvents;
  #link!: ZooKeeperLink;
  #session = new ZooKeeperSession();
  #connected = false;
  readonly #connectionWaiters = new Set<() => void>();
  #closed = false;
  /** performance.now() at the send of the newest request that got a reply on this session. */
  #lastConfirmedAt = 0;
  #heartbeat: NodeJS.Timeout | undefined;
  #watchdog: NodeJS.Timeout | undefined;

  constructor(options: SessionKeeperOptions, newLink: LinkFactory, events: SessionKeeperEvents) {
    this.#options = options;
    this.#logger = options.logger;
    this.#newLink = newLink;
    this.#events = events;
    this.#open();
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

  /** Resolves when connected; rejects with UNAVAILABLE after `connectTimeoutMs` or on close. */
  async whenConnected(what: string): Promise<void> {
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

  /** Ends the session (its ephemeral nodes go at once) and every link. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#connected = false;
    clearInterval(this.#heartbeat);
    clearTimeout(this.#watchdog);
    // Closing the session deletes our ephemeral nodes at once: the locks are free immediately.
    this.#link.close();
    // The addon closes its libuv poll handle asynchronously; a new handle (here or in another
    // store) whose socket reuses the descriptor before that has happened misses its first events
    // and connects only on its next timer tick (seen here: 1.5 s). One turn of the event loop
    // lets the close finish (and the protocol client's closeSession go out).
    await new Promise((resolve) => setImmediate(resolve));
    this.#session.end(new LockError('LOCK_LOST', 'the server closed its ZooKeeper session'));
    for (const wake of this.#connectionWaiters) wake();
  }

  /** Opens a new link, and with it a new session, with the digest credentials if any. */
  #open(): void {
    const options = {
      connectString: this.#options.connectString,
      sessionTimeoutMs: this.#options.sessionTimeoutMs,
      ...(this.#options.digest === undefined ? {} : { digest: this.#options.digest }),
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
        this.#logger.warn({ session: this.#session.id }, `${why}; opening a new session`);
        this.#replaceSession(why, true);
      },
      node: (kind, path) => {
        if (this.#link === link && !this.#closed) this.#events.node(kind, path);
      },
    });
    this.#link = link;
  }

  #onConnected(link: ZooKeeperLink): void {
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
   * Ends the current session (its holders hear `lost`) and opens a new one.
   *
   * `expired`: ZooKeeper ended the session and the link is closed already. Otherwise the session
   * is given up while its link may still be connected, and its link is closed at once, whatever
   * it does: a link left open would keep the session alive with its pings, and with it the
   * nodes its holders were told they lost, for good. Connected, the link sends a closeSession
   * (its nodes go at once); otherwise it stops, and the session expires within its timeout.
   * Closing a connected addon handle blocks this thread until ZooKeeper answers (at most 1.5 s,
   * the C client's `wait_for_session_to_be_closed`); it is done in a turn of its own, outside
   * any callback of that handle.
   */
  #replaceSession(why: string, expired: boolean): void {
    const old = { session: this.#session, link: this.#link };
    this.#connected = false;
    clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
    this.#session = new ZooKeeperSession();
    this.#events.replaced();
    old.session.end(new LockError('LOCK_LOST', why));
    if (!expired) setImmediate(() => old.link.close());
    this.#open();
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
}
