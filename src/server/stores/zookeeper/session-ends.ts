/* What becomes of each session the keeper ends: its link closed, dropped or left as ZooKeeper
 * closed it, the session let go alive or not, and whether another session may follow it. */
import { LockError } from '../../lock-error.js';
import type { ZooKeeperLink } from './zookeeper-link.js';
import type { ZooKeeperSession } from './zookeeper-session.js';

/** How a session ends (see SessionEnds.end). */
export type SessionEnd = 'expired' | 'givenUp' | 'takenOver' | 'over' | 'failed';

/**
 * The bookkeeping of SessionKeeper's session ends: what is done with the link of a session that
 * ends, and what the keeper can still offer after it (another session, or none: see
 * SessionKeeperOptions.attach).
 */
export class SessionEnds {
  /** Whether the keeper attached to another store's session, to claim it. */
  readonly #attached: boolean;
  /** Whether sessions are published (see SessionKeeperOptions.ownership). */
  readonly #published: boolean;
  /** Why no session can be offered any more (an attached session is over, a publish failed). */
  #unusable: LockError | undefined;
  /** Whether the attached session ended before it could be claimed (see `attach`). */
  #overBeforeClaim = false;

  constructor(options: { attached: boolean; published: boolean }) {
    this.#attached = options.attached;
    this.#published = options.published;
  }

  /** Why no session can be offered any more; undefined while one can. */
  get unusable(): LockError | undefined {
    return this.#unusable;
  }

  /** Whether an attached session ended (expired, or its record gone) before it was claimed. */
  get overBeforeClaim(): boolean {
    return this.#overBeforeClaim;
  }

  /** The session could not be published or claimed: no session can be offered any more. */
  fail(error: LockError): void {
    this.#unusable = error;
  }

  /** Whether `session` is an attached one this store has not claimed (yet). */
  unclaimed(session: ZooKeeperSession): boolean {
    return this.#attached && !session.owned;
  }

  /**
   * Settles `session` and its `link`, which end for `why`; answers with the error its holders
   * hear, and with why no session can be offered any more when none may follow it: after an
   * attached session (or once one could not be published).
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
  end(
    session: ZooKeeperSession,
    link: ZooKeeperLink,
    why: string,
    how: SessionEnd,
  ): { error: LockError; over: LockError | undefined } {
    const error = new LockError('LOCK_LOST', why);
    const leftAlive = how === 'takenOver' || (how === 'givenUp' && this.#published);
    // An attached session this store has not claimed is not its to end either.
    const unclaimed = this.unclaimed(session);
    // Expired, or its record gone, before the claim: there was nothing left to take over.
    if (unclaimed && (how === 'expired' || how === 'over')) this.#overBeforeClaim = true;
    if (leftAlive) session.letGo = error;
    if (leftAlive || (unclaimed && how !== 'expired')) link.drop!();
    else if (how !== 'expired') setImmediate(() => link.close());
    if (!this.#attached && !this.#unusable) return { error, over: undefined };
    this.#unusable ??= new LockError('UNAVAILABLE', `the taken-over ZooKeeper session is over (${why})`);
    return { error, over: this.#unusable };
  }
}
