/* Watches how long ZooKeeper's leader has been silent about the store's session: heartbeats, doubt,
 * moving to another member, and giving the session up before ZooKeeper can expire it. */
import type { Logger } from 'pino';
import type { ZooKeeperLink } from './zookeeper-link.js';
import type { ZooKeeperSession } from './zookeeper-session.js';

/**
 * How the store keeps its holders safe when ZooKeeper goes quiet, as fractions of the negotiated
 * session timeout T, counted on a monotonic clock from the send time of the newest request
 * whose reply passed through the leader: a write, a `sync`, or the handshake that took the
 * session back. Only the leader expires sessions. A read is no proof: a follower answers reads
 * by itself, and one cut off from its leader goes on answering them for up to syncLimit ×
 * tickTime while the leader expires the session and another instance is granted its locks.
 *
 * A reply that passed through the leader, to a request sent at S, shows that the follower
 * serving the session still reached the leader after S. The leader learns of the session's
 * requests from that follower's answers to its pings, every tickTime / 2, so it had heard of
 * a request of ours no older than S − tickTime / 2 − HEARTBEAT, and cannot expire the session
 * before S + T − tickTime / 2 − HEARTBEAT. ZooKeeper grants no session timeout below 2 ×
 * tickTime unless configured to, so tickTime / 2 ≤ T / 4, and with HEARTBEAT = T / 8 the
 * earliest expiry is S + 5T / 8:
 * - a heartbeat (a `sync`, then a read where the session is published) goes out every
 *   HEARTBEAT; the C client's own pings are invisible here;
 * - with no such reply for DOUBT, the session is in doubt (`confirmed` false), as on a
 *   disconnection, and the client leaves its member for the next one (a member that cannot
 *   reach the leader, or cannot be reached, may be the only one at fault): the handshake there
 *   has the leader revalidate the session, which confirms it again, and each member gets at
 *   most T / 12 to answer one (protocol/connection-liveness.ts), so that three can be tried first;
 * - with none for LOSS = T / 2, the session is given up as lost *before* ZooKeeper can expire
 *   it and let another server grant the same locks (Curator's advice: treat a long SUSPENDED
 *   as LOST; CURATOR-206). The remaining T / 8 covers timer and event-loop delays.
 *
 * A process that was stopped (SIGSTOP, a VM paused) wakes past LOSS with its holders' safety
 * margin spent already, not knowing what happened meanwhile: ZooKeeper may have kept the
 * session, expired it, or let another instance take it over. Then the give-up is put off by a
 * HEARTBEAT, for the connection to show which: a handshake that takes the session back has
 * the leader revalidate it (confirmed again; where the session is published, its record is
 * read first, and a takeover hands its lockstream sessions over to the taker), an expired one
 * ends it; if neither comes in time, it is given up.
 */
const HEARTBEAT_FRACTION = 1 / 8;
const DOUBT_FRACTION = 1 / 4;
const LOSS_FRACTION = 1 / 2;

/** What the health watch sees of the keeper whose session it watches. */
export interface WatchedKeeper {
  /** The link of the current session. */
  link(): ZooKeeperLink;
  /** The session timeout ZooKeeper granted, or the one asked for before it has answered. */
  timeoutMs(): number;
  session(): ZooKeeperSession;
  /** Whether requests may go out: connected, and (with ownership) the record settled. */
  usable(): boolean;
  closed(): boolean;
  /** Sends a `sync` (and a read of the record while published: OwnershipGuard.heartbeat). */
  heartbeat(link: ZooKeeperLink): Promise<unknown>;
  /** Leaves the current member for the next one, keeping the session (where the client can). */
  moveOn(): void;
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
  readonly #logger: Logger;
  /** performance.now() at the send of the newest request whose reply passed the leader. */
  #lastConfirmedAt = 0;
  #heartbeat: NodeJS.Timeout | undefined;
  #watchdog: NodeJS.Timeout | undefined;
  /** The #lastConfirmedAt whose silence made the client leave its member (once per silence). */
  #movedOnAfter = -1;
  /** When the pending watchdog is due (performance.now()). */
  #watchdogDueAt = Infinity;
  /** Until when a give-up is put off after this process was stopped (see above); 0 if not. */
  #putOffUntil = 0;

  constructor(keeper: WatchedKeeper, logger: Logger) {
    this.#keeper = keeper;
    this.#logger = logger;
  }

  /** Sends a cheap request every HEARTBEAT of the session timeout, so silence is noticed. */
  startHeartbeat(link: ZooKeeperLink): void {
    if (this.#heartbeat !== undefined) return;
    this.#heartbeat = setInterval(() => {
      if (this.#keeper.link() !== link || !this.#keeper.usable()) return;
      void this.#keeper.heartbeat(link);
    }, this.#keeper.timeoutMs() * HEARTBEAT_FRACTION);
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

  /**
   * A reply that passed through the leader (a write's, a sync's, a handshake's) arrived to a
   * request sent at `sentAt`: the leader was reachable after that time.
   */
  leaderReached(link: ZooKeeperLink, sentAt: number): void {
    if (link !== this.#keeper.link() || sentAt <= this.#lastConfirmedAt) return;
    this.#lastConfirmedAt = sentAt;
    this.#putOffUntil = 0;
    this.assess();
  }

  /**
   * Decides, from the time since the newest reply, whether the session is confirmed, in doubt,
   * or to be given up before ZooKeeper can expire it; and wakes itself for the next threshold.
   */
  assess(watchdogLateMs = 0): void {
    const session = this.#keeper.session();
    if (this.#keeper.closed() || !session.established) return;
    const timeoutMs = this.#keeper.timeoutMs();
    const now = performance.now();
    const silentMs = now - this.#lastConfirmedAt;
    if (silentMs >= timeoutMs * LOSS_FRACTION) {
      // How late the watchdog fires, or is overdue: how long this process was stopped, at least.
      const stoppedMs = Math.max(
        watchdogLateMs,
        this.#watchdog === undefined ? 0 : now - this.#watchdogDueAt,
      );
      if (this.#putOff(now, stoppedMs, timeoutMs)) return;
      const why =
        `no reply from ZooKeeper for ${Math.round(silentMs)} ms of a ${timeoutMs} ms session timeout: ` +
        'the session may expire at any moment, so its locks are given up first';
      this.#logger.warn({ session: session.id, silentMs: Math.round(silentMs) }, why);
      this.#keeper.giveUp(why);
      return;
    }
    const inDoubt = silentMs >= timeoutMs * DOUBT_FRACTION;
    session.setConfirmed(this.#keeper.usable() && !inDoubt);
    if (inDoubt && this.#keeper.usable() && this.#movedOnAfter !== this.#lastConfirmedAt) {
      this.#movedOnAfter = this.#lastConfirmedAt;
      this.#logger.warn(
        { session: session.id, silentMs: Math.round(silentMs) },
        'ZooKeeper has not confirmed the session for a quarter of its timeout: moving to another member',
      );
      this.#keeper.moveOn();
    }
    if (this.#watchdog === undefined) {
      const next = silentMs < timeoutMs * DOUBT_FRACTION ? DOUBT_FRACTION : LOSS_FRACTION;
      this.#wakeIn(timeoutMs * next - silentMs);
    }
  }

  /**
   * Whether the give-up is put off: this process was stopped past LOSS (its watchdog fired, or
   * is to fire, more than a HEARTBEAT late), and the connection is given a HEARTBEAT to show
   * what became of the session (see above). Once per silence.
   */
  #putOff(now: number, stoppedMs: number, timeoutMs: number): boolean {
    if (this.#putOffUntil > 0) return now < this.#putOffUntil;
    if (stoppedMs <= timeoutMs * HEARTBEAT_FRACTION) return false;
    const session = this.#keeper.session();
    this.#putOffUntil = now + timeoutMs * HEARTBEAT_FRACTION;
    session.setConfirmed(false);
    this.#logger.warn(
      { session: session.id, stoppedMs: Math.round(stoppedMs) },
      'this process was stopped past the point where the ZooKeeper session is given up: ' +
        'the connection gets a moment to show whether ZooKeeper kept the session, before it is given up',
    );
    clearTimeout(this.#watchdog);
    this.#wakeIn(timeoutMs * HEARTBEAT_FRACTION);
    return true;
  }

  #wakeIn(ms: number): void {
    const dueAt = performance.now() + ms;
    this.#watchdogDueAt = dueAt;
    this.#watchdog = setTimeout(() => {
      this.#watchdog = undefined;
      this.assess(performance.now() - dueAt);
    }, ms);
    this.#watchdog.unref();
  }

  /** How long a request may go unanswered before the session is in doubt. */
  get doubtAfterMs(): number {
    return this.#keeper.timeoutMs() * DOUBT_FRACTION;
  }
}
