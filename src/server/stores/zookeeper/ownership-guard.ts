/* Keeps a published session the keeper's own: settles its ownership after each connect, fences
 * every write with its record, and lets the session go once it is taken over. */
import type { Logger } from 'pino';
import { LockError } from '../../lock-error.js';
import { ErrorCode } from './protocol/records.js';
import {
  SOMEONE,
  type OwnedRecord,
  type Ownership,
  type SessionClaim,
  type SessionOwnership,
} from './session-ownership.js';
import type { LinkOp, LinkOpResult, LinkReply, ZooKeeperLink } from './zookeeper-link.js';
import type { ZooKeeperSession } from './zookeeper-session.js';

/** What the guard sees of the keeper whose session it guards, and how it ends that session. */
export interface GuardedKeeper {
  /** The link of the current session. */
  link(): ZooKeeperLink;
  session(): ZooKeeperSession;
  /** Whether requests may go out: connected, and the record settled. */
  usable(): boolean;
  closed(): boolean;
  send<T>(operation: string, request: (link: ZooKeeperLink) => Promise<LinkReply<T>>): Promise<LinkReply<T>>;
  /** Sends a write or a sync, whose reply shows that ZooKeeper's leader heard the session. */
  sendThroughLeader<T>(
    operation: string,
    request: (link: ZooKeeperLink) => Promise<LinkReply<T>>,
  ): Promise<LinkReply<T>>;
  /** The session's ownership is settled: it is usable. */
  ready(link: ZooKeeperLink): void;
  /** Ends the current session: another instance owns it, or its record is gone. */
  end(why: string, how: 'takenOver' | 'over'): void;
  /** The session could not be published or claimed: the store can offer none any more. */
  fail(error: LockError): void;
}

/** A write fenced by the session's record (see OwnershipGuard.fence). */
export interface FencedWrite {
  readonly ops: readonly LinkOp[];
  readonly record: OwnedRecord;
  /** The session and link it goes out on. */
  readonly session: ZooKeeperSession;
  readonly link: ZooKeeperLink;
}

/**
 * Keeps the keeper's session its own while sessions are published (see SessionOwnership):
 * settles its ownership after every connect, fences every write with its record, and lets the
 * session go once another instance has taken it over or its record is gone.
 */
export class OwnershipGuard {
  readonly #ownership: SessionOwnership;
  /** Set when the keeper attached to another store's session, to claim it. */
  readonly #claim: SessionClaim | undefined;
  readonly #keeper: GuardedKeeper;
  readonly #logger: Logger;
  /** Set while a failed check in a write is being looked into (see write). */
  #noticing: Promise<void> | undefined;
  readonly #takenOverListeners = new Set<(by: string) => void>();

  constructor(options: {
    ownership: SessionOwnership;
    claim: SessionClaim | undefined;
    keeper: GuardedKeeper;
    logger: Logger;
  }) {
    this.#ownership = options.ownership;
    this.#claim = options.claim;
    this.#keeper = options.keeper;
    this.#logger = options.logger;
  }

  onTakenOver(listener: (by: string) => void): () => void {
    this.#takenOverListeners.add(listener);
    return () => this.#takenOverListeners.delete(listener);
  }

  /**
   * After a connect: publishes a new session's record, claims an attached one, or checks after a
   * reconnection that the record is still at the owned version. The first request on the
   * session either way: nothing is sent for the store before it has answered.
   */
  async settle(link: ZooKeeperLink): Promise<void> {
    const keeper = this.#keeper;
    const ownership = this.#ownership;
    const session = keeper.session();
    const claim = this.#claim;
    let settled: Ownership;
    if (session.owned) settled = await ownership.check(link, session.owned);
    else if (claim) settled = await claim.attempt(link);
    else settled = await ownership.publish(link);
    if (link !== keeper.link() || session !== keeper.session() || keeper.closed()) return;
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
        keeper.ready(link);
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
        keeper.fail(settled.error);
        return;
    }
  }

  /** Whether the session of `link` still owns `record`, as ZooKeeper answers now. */
  async stillOwns(link: ZooKeeperLink, record: OwnedRecord): Promise<boolean> {
    return (await this.#ownership.check(link, record)).kind === 'owned';
  }

  /**
   * `ops` as the current session sends them: one multi behind a check of its record (see
   * SessionKeeper.write); undefined while the session is not usable (not confirmed yet: as a
   * lost connection, the caller waits for one and tries again).
   */
  fence(ops: readonly LinkOp[]): FencedWrite | undefined {
    const keeper = this.#keeper;
    const session = keeper.session();
    const record = session.owned;
    if (!record || !keeper.usable()) return undefined;
    return { ops: this.#ownership.fenced(record, ops), record, session, link: keeper.link() };
  }

  /**
   * The reply to a fenced write, as the reply to its ops alone; a failed check means the
   * session was taken over: it is let go, and the write rejects with LOCK_LOST.
   */
  async unfenced(
    reply: LinkReply<LinkOpResult[]>,
    { record, session, link }: FencedWrite,
  ): Promise<LinkReply<LinkOpResult[]>> {
    if (reply.failedOp === 0 && (reply.rc === ErrorCode.badVersion || reply.rc === ErrorCode.noNode)) {
      await (this.#noticing ??= this.#recheck(link, record, reply.rc === ErrorCode.noNode));
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
   * The heartbeat while published: a sync, which shows the leader still hears the session (see
   * SessionHealth), and in the same turn a read of the session's record, so that an owner
   * notices a takeover within a heartbeat even when it writes nothing and ZooKeeper left its
   * connection open beside the taker's (it can keep both connections of a session). The read
   * is answered after the sync, so from a member that has caught up with the leader.
   */
  async heartbeat(link: ZooKeeperLink): Promise<void> {
    const record = this.#keeper.session().owned;
    const synced = this.#keeper.sendThroughLeader('sync', (current) => current.sync('/'));
    if (!record) {
      await synced;
      return;
    }
    const read = this.#keeper.send('getData', (current) => current.getData(record.path, false));
    const [, reply] = await Promise.all([synced, read]);
    const gone = reply.rc === ErrorCode.noNode;
    const moved = gone || (reply.rc === ErrorCode.ok && reply.value?.version !== record.version);
    if (moved && link === this.#keeper.link()) await (this.#noticing ??= this.#recheck(link, record, gone));
  }

  /**
   * A check of the record failed on `link`: the session is not this store's any more. A record
   * found gone means the session is over (a taker bumps the record, it never deletes it; the
   * session's end does), even when the connection breaks before anything else can be read, as
   * it does while ZooKeeper closes the session. A record found changed means another instance
   * took the session over: read again to learn which, and let the session go.
   */
  async #recheck(link: ZooKeeperLink, record: OwnedRecord, gone: boolean): Promise<void> {
    try {
      if (gone) {
        this.#over(link);
        return;
      }
      const found = await this.#ownership.check(link, record);
      // Not ours, whoever owns it now (unanswered: someone the record would name).
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
    if (link !== this.#keeper.link() || this.#keeper.closed()) return;
    const session = this.#keeper.session();
    const why = `ZooKeeper session ${session.id} is over: its record is gone`;
    this.#logger.warn({ session: session.id }, why);
    this.#keeper.end(why, 'over');
  }

  /** Another instance owns the session of `link` now: tells the listeners, then lets it go. */
  #takenOver(link: ZooKeeperLink, by: string): void {
    if (link !== this.#keeper.link() || this.#keeper.closed()) return;
    const session = this.#keeper.session();
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
    this.#keeper.end(`ZooKeeper session ${session.id} was taken over by ${by}`, 'takenOver');
  }
}
