import type { Logger } from 'pino';
import type { LinkReply, ZooKeeperLink } from './zookeeper-link.js';
import type { ZooKeeperSession } from './zookeeper-session.js';

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

/** What the health watch sees of the keeper whose session it watches. */
export interface WatchedKeeper {
  /** The link of the current session. */
  link(): ZooKeeperLink;
  session(): ZooKeeperSession;
  /** Whether requests may go out: connected, and (with ownership) the record settled. */
  usable(): boolean;
  closed(): boolean;
  send<T>(request: (link: ZooKeeperLink) => Promise<LinkReply<T>>): Promise<LinkReply<T>>;
  /** Sends one cheap request on `link` (see OwnershipGuard.heartbeat while published). */
  heartbeat(link: ZooKeeperLink): Promise<unknown>;
  /** Ends the current session as lost, before ZooKeeper can expire it. */
  giveUp(why: string): void;
}

/**
 * The health of the keeper's session: how long ZooKeeper has been silent, and so whether the
 * session is confirmed, in doubt, or to be given up (see the fractions above).
 */
export class SessionHealth {
  readonly #keeper: WatchedKeeper;
  /** The session timeout asked for, until ZooKeeper has granted one. */
  readonly #requestedTimeoutMs: number;
  readonly #logger: Logger;
  /** performance.now() at the send of the newest request that got a reply on this session. */
  #lastConfirmedAt = 0;
  #heartbeat: NodeJS.Timeout | undefined;
  #watchdog: NodeJS.Timeout | undefined;

  constructor(keeper: WatchedKeeper, requestedTimeoutMs: number, logger: Logger) {
    this.#keeper = keeper;
    this.#requestedTimeoutMs = requestedTimeoutMs;
    this.#logger = logger;
  }

  /** Sends a cheap request every HEARTBEAT of the session timeout, so silence is noticed. */
  startHeartbeat(link: ZooKeeperLink): void {
    if (this.#heartbeat !== undefined) return;
    this.#heartbeat = setInterval(() => {
      if (this.#keeper.link() !== link || !this.#keeper.usable()) return;
      void this.#keeper.heartbeat(link);
    }, this.#sessionTimeoutMs() * HEARTBEAT_FRACTION);
    this.#heartbeat.unref();
  }

  /** The session ended: its heartbeat stops, the next session's starts once it is usable. */
  stopHeartbeat(): void {
    clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
  }

  /** The keeper is closed: no more heartbeats or assessments. */
  stop(): void {
    clearInterval(this.#heartbeat);
    clearTimeout(this.#watchdog);
  }

  /** A reply arrived to a request sent at `sentAt`: ZooKeeper heard from this session then. */
  heardFrom(link: ZooKeeperLink, sentAt: number): void {
    if (link !== this.#keeper.link() || sentAt <= this.#lastConfirmedAt) return;
    this.#lastConfirmedAt = sentAt;
    this.assess();
  }

  /**
   * Decides, from the time since the newest reply, whether the session is confirmed, in doubt,
   * or to be given up before ZooKeeper can expire it; and wakes itself for the next threshold.
   */
  assess(): void {
    const session = this.#keeper.session();
    if (this.#keeper.closed() || !session.established) return;
    const timeoutMs = this.#sessionTimeoutMs();
    const silentMs = performance.now() - this.#lastConfirmedAt;
    if (silentMs >= timeoutMs * LOSS_FRACTION) {
      const why =
        `no reply from ZooKeeper for ${Math.round(silentMs)} ms of a ${timeoutMs} ms session timeout: ` +
        'the session may expire at any moment, so its locks are given up first';
      this.#logger.warn({ session: session.id, silentMs: Math.round(silentMs) }, why);
      this.#keeper.giveUp(why);
      return;
    }
    session.setConfirmed(this.#keeper.usable() && silentMs < timeoutMs * DOUBT_FRACTION);
    if (this.#watchdog === undefined) {
      const next = silentMs < timeoutMs * DOUBT_FRACTION ? DOUBT_FRACTION : LOSS_FRACTION;
      this.#watchdog = setTimeout(
        () => {
          this.#watchdog = undefined;
          this.assess();
        },
        timeoutMs * next - silentMs,
      );
      this.#watchdog.unref();
    }
  }

  /** How long a request may go unanswered before the session is in doubt. */
  get doubtAfterMs(): number {
    return this.#sessionTimeoutMs() * DOUBT_FRACTION;
  }

  /** The session timeout ZooKeeper granted, or the one asked for before it has answered. */
  #sessionTimeoutMs(): number {
    const negotiated = this.#keeper.link().negotiatedTimeoutMs;
    return negotiated > 0 ? negotiated : this.#requestedTimeoutMs;
  }
}
