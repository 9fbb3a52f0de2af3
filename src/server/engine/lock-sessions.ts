/*
 * Every lockstream session of this server (LockSessions): opened, resumed by token, ended at
 * shutdown; and the store sessions taken over from other instances, or left for them to take.
 */
import type { Logger } from 'pino';
import { isLockError, LockError } from '../lock-error.js';
import type { OwnedNode, SessionTakeover, StoreBackend } from '../stores/store.js';
import type { LockEngine } from './lock-engine.js';
import { parseNodeRecord } from './lock-nodes.js';
import { LockSession, type SessionEvents, type SessionKind } from './lock-session.js';
import type { RequestAccounting } from './request-news.js';
import { checkedClaim, plainToken, provenToken, tokenIssuer } from './resume-token.js';
import { resumeKey, sessionsOfNodes } from './session-adoption.js';
import { StoreWorkScheduler } from './store-work-scheduler.js';

/**
 * How many requests of this server may have store work in flight at once (creating their node
 * and learning their place, or deleting it). Enough to keep ZooKeeper's pipeline full; beyond
 * it, sessions take turns (see StoreWorkScheduler), so a flood from one session does not put
 * its whole backlog in ZooKeeper's queue ahead of another client's request.
 */
export const STORE_WORK_IN_FLIGHT = 64;

export interface LockSessionsOptions {
  readonly engine: LockEngine;
  readonly logger: Logger;
  /** Identifies this server in resume tokens where its store's sessions cannot move. */
  readonly instanceId: string;
  /** The longest resume grace a client may ask for; 0 turns resuming off. */
  readonly maxResumeGraceMs: number;
  /** Told when a session is detached, resumed, or expires, or a store session taken over (for metrics). */
  readonly events?: SessionEvents | undefined;
  /**
   * Where the engine's store session can move (see SessionTakeover): then resume tokens name
   * it, a token another instance issued makes this one take that instance's session over, and
   * `engineFor` makes the engine that runs on a taken one.
   */
  readonly takeover?:
    | {
        readonly sessions: SessionTakeover;
        readonly engineFor: (store: StoreBackend) => LockEngine;
        /** Counts the requests of sessions taken over (their streams are not attached yet). */
        readonly accounting: RequestAccounting;
      }
    | undefined;
}

/** The sessions that run on one engine (this server's own store session, or one taken over). */
interface EngineSessions {
  readonly engine: LockEngine;
  readonly sessions: Set<LockSession>;
  /** The taken-over store session's own store, closed once its last session has ended. */
  readonly taken?: StoreBackend;
  /** The name it was published under (its key in #taken). */
  readonly name?: string;
  /**
   * Set while requests found in the taken session without a grace are kept (see
   * #keepUnresumable): the store session stays open until they are released.
   */
  keeping?: NodeJS.Timeout | undefined;
}

/**
 * The sessions of this server: every one not ended (shutdown ends them all), and those that
 * can be resumed, by their token's key; and the store sessions it took over from other
 * instances, with the lockstream sessions found in them.
 */
export class LockSessions {
  readonly #logger: Logger;
  readonly #instanceId: string;
  readonly #maxResumeGraceMs: number;
  readonly #events: SessionEvents | undefined;
  readonly #takeover: LockSessionsOptions['takeover'];
  readonly #resumable = new Map<string, LockSession>();
  readonly #own: EngineSessions;
  /** Store sessions taken over, by the name they were published under. */
  readonly #taken = new Map<string, Promise<EngineSessions | undefined>>();
  /** Those of #taken whose takeover is done, until they are released. */
  readonly #takenGroups = new Set<EngineSessions>();
  readonly #storeWork = new StoreWorkScheduler(STORE_WORK_IN_FLIGHT);
  #closed = false;
  /** Set while stopping by handing every session over: nothing is released then. */
  #handingOver = false;

  constructor(options: LockSessionsOptions) {
    this.#own = { engine: options.engine, sessions: new Set() };
    this.#logger = options.logger;
    this.#instanceId = options.instanceId;
    this.#maxResumeGraceMs = options.maxResumeGraceMs;
    this.#events = options.events;
    this.#takeover = options.takeover;
    options.takeover?.sessions.onTakenOver((by) => this.#handOver(this.#own, `taken over by ${by}`));
  }

  /** Requests kept apart from a stream: those of every session not ended yet. */
  get size(): number {
    let size = 0;
    for (const group of this.#groups()) for (const session of group.sessions) size += session.size;
    return size;
  }

  /**
   * Opens a session, resumable for `graceMs` (capped at the server's maximum) after an
   * abnormal end of its stream.
   */
  open(options: {
    kind: SessionKind;
    graceMs: number;
    heartbeatMs?: number | undefined;
    callerName: string | undefined;
    accounting: RequestAccounting;
    logger: Logger;
  }): LockSession {
    if (this.#closed) throw new LockError('SHUTTING_DOWN', 'the lockstream server is shutting down');
    const graceMs = Math.min(options.graceMs, this.#maxResumeGraceMs);
    const sessions = this.#takeover?.sessions;
    const token =
      graceMs === 0
        ? undefined
        : sessions
          ? provenToken(sessions.publishedAs, options.kind, options.callerName, (claim) =>
              sessions.vouch(claim),
            )
          : plainToken(this.#instanceId);
    return this.#newSession(this.#own, { ...options, graceMs, resumeToken: token });
  }

  #newSession(
    group: EngineSessions,
    options: {
      kind: SessionKind;
      graceMs: number;
      heartbeatMs?: number | undefined;
      callerName: string | undefined;
      accounting: RequestAccounting;
      logger: Logger;
      resumeToken: string | undefined;
      resumeKey?: string;
    },
  ): LockSession {
    const key =
      options.resumeKey ?? (options.resumeToken === undefined ? undefined : resumeKey(options.resumeToken));
    const session: LockSession = new LockSession({
      ...options,
      engine: group.engine,
      storeWork: this.#storeWork,
      // Only where another instance could take the requests over are they tagged with it.
      resumeKey: this.#takeover ? key : undefined,
      events: this.#events,
      forget: () => {
        group.sessions.delete(session);
        if (key !== undefined && this.#resumable.get(key) === session) this.#resumable.delete(key);
        if (group.taken && !this.#handingOver) this.#releaseIfIdle(group);
      },
    });
    group.sessions.add(session);
    if (key !== undefined) this.#resumable.set(key, session);
    return session;
  }

  /**
   * The session `token` was issued for, if `callerName` opened it with the same RPC;
   * NOT_FOUND otherwise (someone else's token gets the answer an unknown one does: it reveals
   * nothing). A token issued on a store session of another instance makes this one take that
   * session over first, with every lockstream session in it (see SessionTakeover), but only
   * once the token has proved that it was issued there for `callerName` and `kind`: a made-up
   * or someone else's token changes nothing, here or on the instance that has the session.
   */
  async resume(token: string, kind: SessionKind, callerName: string | undefined): Promise<LockSession> {
    // Not NOT_FOUND, which would tell the client its locks are gone: another instance may have them.
    if (this.#closed) throw new LockError('SHUTTING_DOWN', 'the lockstream server is shutting down');
    const key = resumeKey(token);
    if (!this.#resumable.has(key)) {
      const name = tokenIssuer(token);
      if (await this.#mayTakeOver(name, token, kind, callerName)) await this.#takeOver(name);
    }
    const session = this.#resumable.get(key);
    if (session && session.kind === kind && session.callerName === callerName) {
      session.resumeToken = token;
      this.#events?.('resumed', kind);
      return session;
    }
    throw this.#unknownToken(token);
  }

  /**
   * Whether a resume of `token` (as `kind`, by `callerName`) may take the store session
   * published as `name` over: its proof checks out against that session's record, as the
   * session itself would check the token. A takeover under way or done is joined unchecked:
   * joining it changes nothing.
   */
  async #mayTakeOver(
    name: string,
    token: string,
    kind: SessionKind,
    callerName: string | undefined,
  ): Promise<boolean> {
    const takeover = this.#takeover;
    if (!takeover || name === '' || name === takeover.sessions.publishedAs || this.#closed) return false;
    if (this.#taken.has(name)) return true;
    const checked = checkedClaim(token, kind, callerName);
    return checked !== undefined && (await takeover.sessions.vouched(name, checked.claim, checked.proof));
  }

  /**
   * Takes the store session published as `name` over, once (concurrent resumes share it). A
   * takeover that fails (another instance took the session first, or ZooKeeper is out of reach)
   * leaves the session alive where it is: UNAVAILABLE, to be resumed again, never NOT_FOUND.
   */
  async #takeOver(name: string): Promise<void> {
    await this.#taking(name).catch((error: unknown) => {
      if (!(error instanceof LockError) || error.code === 'SHUTTING_DOWN') throw error;
      throw new LockError(
        'UNAVAILABLE',
        `could not take over the store session "${name}" of another lockstream instance (${error.message}); it may live on there or on an instance that took it over first: resume it again, on any instance`,
        { cause: error },
      );
    });
  }

  async #taking(name: string): Promise<void> {
    const takeover = this.#takeover;
    if (!takeover || name === '' || name === takeover.sessions.publishedAs || this.#closed) return;
    let taking = this.#taken.get(name);
    if (!taking) {
      taking = this.#adopt(name, takeover);
      this.#taken.set(name, taking);
      // A name whose session was not there (or could not be taken) may be tried again later.
      void taking.then(
        (group) => {
          if (!group) this.#taken.delete(name);
        },
        () => this.#taken.delete(name),
      );
    }
    await taking;
  }

  async #adopt(
    name: string,
    takeover: NonNullable<LockSessionsOptions['takeover']>,
  ): Promise<EngineSessions | undefined> {
    const startedAt = performance.now();
    const taken = await takeover.sessions.takeOver(name).catch((error: unknown) => {
      // A token whose first part names no session (a made-up one) is one nobody has.
      if (isLockError(error, 'INVALID_ARGUMENT')) return undefined;
      throw error;
    });
    if (!taken) return undefined;
    const engine = takeover.engineFor(taken.store);
    const group: EngineSessions = { engine, sessions: new Set(), taken: taken.store, name };
    const { sessions, untagged } = sessionsOfNodes(taken.nodes, engine.locksPath);
    const keptMs = untagged.length > 0 ? keepUnresumableMs(untagged, taken.expiresAfterMs) : 0;
    if (untagged.length > 0) this.#keepUnresumable(group, untagged, keptMs);
    let requests = 0;
    for (const found of sessions) {
      const session = this.#newSession(group, {
        kind: found.kind,
        graceMs: Math.min(found.graceMs, this.#maxResumeGraceMs),
        callerName: found.callerName,
        accounting: takeover.accounting,
        logger: this.#logger.child({ takenFrom: name }),
        resumeToken: undefined,
        resumeKey: found.key,
      });
      for (const { id, request, nodes } of found.requests) session.adopt(id, request, nodes);
      requests += found.requests.length;
      this.#events?.('taken-over', found.kind);
      // Kept for its grace, as if its stream had just broken: its client resumes it, or it ends.
      session.detach();
    }
    this.#logger.info(
      {
        session: name,
        sessions: sessions.length,
        requests,
        unresumable: untagged.length,
        keptMs,
        tookMs: Math.round((performance.now() - startedAt) * 10) / 10,
      },
      'took over the store session of another lockstream instance',
    );
    taken.store.takeover?.onTakenOver((by) => this.#handOver(group, `taken over by ${by}`));
    this.#takenGroups.add(group);
    this.#releaseIfIdle(group);
    return group;
  }

  /**
   * Keeps the requests of a taken session that had no grace (nobody can resume them) for
   * `keepMs` after the takeover (see keepUnresumableMs), then releases them. Their streams need
   * not have ended: the instance the session was taken from may be paused (SIGSTOP, a long GC, a
   * stopped VM) rather than gone, their holders told nothing, and they stop holding only once
   * their clients must have noticed.
   */
  #keepUnresumable(group: EngineSessions, nodes: readonly { path: string }[], keepMs: number): void {
    const paths = nodes.map((node) => node.path);
    group.keeping = setTimeout(() => {
      void group.taken
        ?.delete(paths)
        .catch((error: unknown) => {
          this.#logger.warn(
            { err: error, session: group.name },
            'could not release the requests of unresumable streams',
          );
        })
        .finally(() => {
          group.keeping = undefined;
          if (!this.#handingOver && !this.#closed) this.#releaseIfIdle(group);
        });
    }, keepMs);
  }

  /** Releases a taken-over store session once none of its sessions is left, nor a request it keeps. */
  #releaseIfIdle(group: EngineSessions): void {
    if (group.sessions.size === 0 && group.keeping === undefined) this.#release(group);
  }

  /** A taken-over store session none of whose lockstream sessions is left: it ends, and its nodes with it. */
  #release(group: EngineSessions): void {
    this.#takenGroups.delete(group);
    // Its entry in #taken is its own: a name is taken over again only once its entry is gone.
    if (group.name !== undefined) this.#taken.delete(group.name);
    void group.taken?.close();
  }

  /** The store session under `group` moved to another instance: so does every session on it. */
  #handOver(group: EngineSessions, why: string): void {
    this.#logger.warn({ sessions: group.sessions.size }, `store session ${why}: its sessions move with it`);
    // The requests kept go with the session: whoever took it keeps them in turn.
    clearTimeout(group.keeping);
    group.keeping = undefined;
    for (const session of [...group.sessions]) session.handOver();
    if (group.taken) this.#releaseIfIdle(group);
  }

  *#groups(): Iterable<EngineSessions> {
    yield this.#own;
    yield* this.#takenGroups;
  }

  *#allSessions(): Iterable<LockSession> {
    for (const group of [...this.#groups()]) yield* [...group.sessions];
  }

  #unknownToken(token: string): LockError {
    const issuer = tokenIssuer(token);
    const quoted = JSON.stringify(issuer.slice(0, 64));
    if (this.#takeover && issuer !== '' && issuer !== this.#takeover.sessions.publishedAs) {
      return new LockError(
        'NOT_FOUND',
        `resume token was issued on the store session ${quoted} of another lockstream instance, and no instance has it any more: its grace passed, or that session ended before an instance took it over`,
      );
    }
    if (!this.#takeover && issuer !== '' && issuer !== this.#instanceId) {
      return new LockError(
        'NOT_FOUND',
        `resume token was issued by lockstream instance ${quoted}, not this one (${this.#instanceId}); resume on the instance that issued it`,
      );
    }
    return new LockError('NOT_FOUND', UNKNOWN_RESUME_TOKEN);
  }

  /** Ends every session, attached or detached (server shutdown). */
  async close(): Promise<void> {
    this.#closed = true;
    const reason = new LockError('SHUTTING_DOWN', 'the lockstream server is shutting down');
    await Promise.all([...this.#allSessions()].map((session) => session.end(reason)));
    // A store session that keeps requests without a grace is let go, not closed: ZooKeeper
    // expires it, and they go then, no sooner than if this instance had stayed.
    await Promise.all(
      [...this.#takenGroups]
        .filter((group) => group.keeping !== undefined)
        .map((group) => this.#letGo(group)),
    );
    this.#logger.debug('sessions ended');
  }

  async #letGo(group: EngineSessions): Promise<void> {
    clearTimeout(group.keeping);
    group.keeping = undefined;
    this.#takenGroups.delete(group);
    if (group.name !== undefined) this.#taken.delete(group.name);
    await group.taken?.takeover?.handOver();
  }

  /**
   * Stops without releasing: every resumable session is left in its store session for another
   * instance to take over, its stream ended telling its client to resume it elsewhere; the
   * others end as at close(). Resolves once each store session here (`own`, this server's, and
   * those it took over) has been taken over by another instance or, if the longest grace of the
   * sessions left in it passes first, closed: what nobody resumed is freed then, as when a
   * grace passes on its own instance (and never sooner, whatever ZooKeeper's session timeout).
   */
  async handOverAll(own: StoreBackend): Promise<void> {
    this.#closed = true;
    this.#handingOver = true;
    const reason = new LockError('SHUTTING_DOWN', 'the lockstream server is shutting down');
    const ending: Array<Promise<void>> = [];
    const leaving: Array<{ store: StoreBackend; graceMs: number; keeps: boolean }> = [];
    for (const group of [...this.#groups()]) {
      const keeps = group.keeping !== undefined;
      clearTimeout(group.keeping);
      group.keeping = undefined;
      let graceMs = 0;
      for (const session of [...group.sessions]) {
        if (session.resumeKey === undefined) {
          ending.push(session.end(reason));
        } else {
          graceMs = Math.max(graceMs, session.graceMs);
          session.handOver();
        }
      }
      leaving.push({ store: group.taken ?? own, graceMs, keeps });
    }
    await Promise.all(ending);
    this.#logger.info(
      { stores: leaving.length },
      'sessions handed over; waiting for other instances to take them',
    );
    const outcomes = await Promise.all(
      leaving.map(({ store, graceMs, keeps }) => leaveForTakers(store, graceMs, keeps)),
    );
    this.#logger.info({ outcomes }, 'store sessions taken over or, past their grace, closed');
  }
}

/**
 * Keeps `store`'s session (and every lock in it) for another instance to take over, for at
 * most `graceMs`; then hands it over (taken) or closes it (not taken: its nodes go). A session
 * that `keeps` requests without a grace (see LockSessions#keepUnresumable) is never closed:
 * not taken, it is let go, and expires.
 */
async function leaveForTakers(
  store: StoreBackend,
  graceMs: number,
  keeps: boolean,
): Promise<'taken' | 'closed' | 'left to expire'> {
  const takeover = store.takeover;
  if (!takeover || (graceMs === 0 && !keeps)) {
    await store.close();
    return 'closed';
  }
  const taken = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => {
      unsubscribe();
      resolve(false);
    }, graceMs);
    const unsubscribe = takeover.onTakenOver(() => {
      clearTimeout(timer);
      resolve(true);
    });
  });
  if (!taken && !keeps) {
    await store.close();
    return 'closed';
  }
  await takeover.handOver();
  return taken ? 'taken' : 'left to expire';
}

/**
 * How long after a takeover the requests found without a grace are kept: until each one's
 * client must have noticed its instance silent, or, had it no heartbeats, as long as the back
 * end would have kept them had nobody taken the session (its timeout). Counted from the
 * takeover, which is no earlier than when their instance was last heard (a little longer than
 * needed, never shorter). A client with heartbeats takes a server silent for three intervals as
 * gone (see NodeRecord.heartbeat); a fourth is the margin for its timers and the last message's
 * way. Never longer than the back end's timeout: ZooKeeper would have freed them by then.
 */
export function keepUnresumableMs(nodes: readonly OwnedNode[], expiresAfterMs: number): number {
  let keepMs = 0;
  for (const node of nodes) {
    const heartbeat = parseNodeRecord(node.data).heartbeat;
    const noticedAfterMs =
      typeof heartbeat === 'number' && heartbeat > 0 ? HEARTBEATS_TO_NOTICE * heartbeat : expiresAfterMs;
    keepMs = Math.max(keepMs, Math.min(noticedAfterMs, expiresAfterMs));
  }
  return keepMs;
}

/** Three silent heartbeat intervals, and one more for margin (see keepUnresumableMs). */
const HEARTBEATS_TO_NOTICE = 4;

const UNKNOWN_RESUME_TOKEN =
  'resume token is unknown: its request was released or withdrawn (clean end, or its resume grace passed), or the server restarted';
