/* Sends the store's requests on the keeper's current link: each one's round trip told to the
 * request timer, a reply that passed through ZooKeeper's leader told to SessionHealth, and
 * every write fenced by the session's record while sessions are published. */
import { plantedBug } from '../../planted-bugs.js';
import { plainWrite } from './link-writes.js';
import type { OwnershipGuard } from './ownership-guard.js';
import { ErrorCode } from './protocol/records.js';
import type { SessionHealth } from './session-health.js';
import { isConnectionLoss } from './zookeeper-failures.js';
import type { LinkOp, LinkOpResult, LinkReply, ZooKeeperLink } from './zookeeper-link.js';
import type { ZooKeeperSession } from './zookeeper-session.js';

/**
 * Told each ZooKeeper request's round trip: its operation (`create`, `multi`, `getChildren`,
 * `sync`, ...), the seconds from sending it to its reply, and whether it had one (false on a
 * lost connection or session).
 */
export type RequestTimer = (operation: string, seconds: number, answered: boolean) => void;

/** One request, made on the link that is current when it goes out. */
export type LinkRequest<T> = (link: ZooKeeperLink) => Promise<LinkReply<T>>;

/**
 * The requests of SessionKeeper: each goes out on the link of the current session as it is
 * (the keeper waits for a usable session first, see SessionKeeper.whenConnected), timed when
 * there is a request timer. A reply that passed through the leader is what keeps the session
 * confirmed (see SessionHealth).
 */
export class SessionRequests {
  /** The link of the current session. */
  readonly #link: () => ZooKeeperLink;
  readonly #health: SessionHealth;
  /** Set while sessions are published (see SessionKeeperOptions.ownership). */
  readonly #guard: OwnershipGuard | undefined;
  readonly #timer: RequestTimer | undefined;

  constructor(options: {
    link: () => ZooKeeperLink;
    health: SessionHealth;
    guard: OwnershipGuard | undefined;
    timer: RequestTimer | undefined;
  }) {
    this.#link = options.link;
    this.#health = options.health;
    this.#guard = options.guard;
    this.#timer = options.timer;
  }

  /** Sends one request on the current link; `operation` names it for the request timer. */
  async send<T>(operation: string, request: LinkRequest<T>): Promise<LinkReply<T>> {
    if (plantedBug === 'follower-reads') return this.sendThroughLeader(operation, request);
    if (!this.#timer) return request(this.#link());
    return this.#timed(operation, performance.now(), request(this.#link()));
  }

  /**
   * Sends one request whose reply passes through ZooKeeper's leader (a write, a sync): its
   * reply shows the leader was reachable after it was sent (see SessionHealth). A reply to a
   * read shows nothing of the kind, and must go through `send`.
   */
  async sendThroughLeader<T>(operation: string, request: LinkRequest<T>): Promise<LinkReply<T>> {
    const link = this.#link();
    const sentAt = performance.now();
    const reply = await this.#timed(operation, sentAt, request(link));
    if (answered(reply.rc)) this.#health.leaderReached(link, sentAt);
    return reply;
  }

  /** `replying`'s reply, its round trip told to the request timer, if any. */
  async #timed<T>(operation: string, sentAt: number, replying: Promise<LinkReply<T>>): Promise<LinkReply<T>> {
    const timer = this.#timer;
    if (!timer) return replying;
    let reply: LinkReply<T> | undefined;
    try {
      reply = await replying;
      return reply;
    } finally {
      timer(operation, (performance.now() - sentAt) / 1000, reply !== undefined && answered(reply.rc));
    }
  }

  /**
   * Sends a write: `ops`, one alone or several as a multi. While sessions are published, as one
   * multi behind a check of the record (one request all the same); a failed check means the
   * session was taken over: the session is let go and the write rejects with LOCK_LOST, as it
   * does when `issuedIn`, the session it was made for, was let go before it went out.
   */
  async write(ops: readonly LinkOp[], issuedIn: ZooKeeperSession): Promise<LinkReply<LinkOpResult[]>> {
    if (issuedIn.letGo) throw issuedIn.letGo;
    const guard = this.#guard;
    if (!guard) {
      const operation = ops.length === 1 ? ops[0]!.op : 'multi';
      return this.sendThroughLeader(operation, (link) => plainWrite(link, ops));
    }
    const fenced = guard.fence(ops);
    if (!fenced) return { rc: ErrorCode.connectionLoss, value: null };
    const reply = await this.sendThroughLeader('multi', (link) => link.multi!(fenced.ops));
    return guard.unfenced(reply, fenced);
  }
}

/** Whether `rc` is ZooKeeper's answer, not a lost connection or session. */
function answered(rc: number): boolean {
  return !isConnectionLoss(rc) && rc !== ErrorCode.sessionExpired;
}
