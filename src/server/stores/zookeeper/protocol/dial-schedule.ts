/* Where a protocol connection dials next and after what pause: the members in turn, backing off
 * after dials that got no session and after connections closed soon after they were made. */

/** A connection closed sooner than this after its handshake makes the next dial wait (see redialPause). */
const SHORT_LIVED_MS = 1000;
const MAX_REDIAL_PAUSE_MS = 1000;

/**
 * The dials of one ZooKeeperConnection (see its open): which member of the ensemble comes next,
 * and how long to wait before dialing it. It counts; the connection dials and keeps the timer.
 */
export class DialSchedule {
  readonly #servers: readonly string[];
  #serverIndex = 0;
  /** Dial attempts in a row that got no session; reset by each connect. */
  #failedAttempts = 0;
  /** When the current connection's handshake was answered. */
  #connectedAt = 0;
  /** Connections in a row that were closed soon after they were made (see redialPause). */
  #shortLived = 0;

  constructor(servers: readonly string[]) {
    this.#servers = servers;
  }

  /** Dial attempts in a row that got no session. */
  get failedAttempts(): number {
    return this.#failedAttempts;
  }

  /** The member to dial now; the one after it next time. */
  next(): string {
    const server = this.#servers[this.#serverIndex % this.#servers.length]!;
    this.#serverIndex += 1;
    return server;
  }

  /** A dial got no session (refused, dropped before the handshake): the attempts in a row so far. */
  failed(): number {
    this.#failedAttempts += 1;
    return this.#failedAttempts;
  }

  /** The pause before the dial after a failed one. */
  failedPause(): number {
    const servers = this.#servers.length;
    // Every member once in quick succession, then a pause that grows to a second per round.
    return this.#failedAttempts % servers === 0 ? Math.min(1000, 50 * this.#failedAttempts) : 0;
  }

  /** A member granted the session. */
  connected(): void {
    this.#failedAttempts = 0;
    this.#connectedAt = performance.now();
  }

  /**
   * After a lost connection, the pause before dialing the members in turn with the same session
   * until one takes it or says it expired; undefined for none. At once after a connection that
   * lasted, so a failover costs no wait; after one closed soon after it was made, a random pause
   * that doubles with each such connection in a row. ZooKeeper closes a session's connection
   * when another client attaches to the session, so two clients that both reconnect at once (an
   * instance and the one taking its session over) would close each other's connection before
   * either can send a request, for as long as both keep it up; ZooKeeper's Java client waits up
   * to a second before every reconnect for the same reason.
   */
  redialPause(): number | undefined {
    const livedMs = performance.now() - this.#connectedAt;
    this.#shortLived = livedMs < SHORT_LIVED_MS ? this.#shortLived + 1 : 0;
    if (this.#shortLived === 0) return undefined;
    return Math.random() * Math.min(MAX_REDIAL_PAUSE_MS, 5 * 2 ** this.#shortLived);
  }
}
