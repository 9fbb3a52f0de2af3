/*
 * Every lockstream session of this server (LockSessions): opened, resumed by token (on a store
 * session taken over from another instance if the token says so: see StoreTakeovers), ended
 * at shutdown or left in their store sessions for other instances to take.
 */
import type { Logger } from 'pino';
import { LockError } from '../lock-error.js';
import type { StoreBackend } from '../stores/store.js';
import type { LockEngine } from './lock-engine.js';
import { LockSession, type SessionEvents, type SessionKind } from './lock-session.js';
import type { RequestAccounting } from './request-news.js';
import { plainToken, ProvenTokens, resumeKey, tokenIssuer } from './resume-token.js';
import { StoreTakeovers, type EngineSessions, type TakeoverOptions } from './session-adoption.js';
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
  readonly takeover?: TakeoverOptions | undefined;
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
  /** The store sessions taken over from other instances (where sessions can move). */
  readonly #takeovers: StoreTakeovers | undefined;
  readonly #storeWork = new StoreWorkScheduler(STORE_WORK_IN_FLIGHT);
  readonly #provenTokens = new ProvenTokens();
  readonly #vouch = (claim: string): string => this.#takeover!.sessions.vouch(claim);
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
    this.#takeovers =
      options.takeover &&
      new StoreTakeovers(
        options.takeover,
        {
          newSession: (group, found) => this.#newSession(group, found),
          closed: () => this.#closed,
          handingOver: () => this.#handingOver,
        },
        { logger: this.#logger, events: this.#events, maxResumeGraceMs: this.#maxResumeGraceMs },
      );
    options.takeover?.sessions.onTakenOver((by) => {
      this.#logger.warn(
        { sessions: this.#own.sessions.size },
        `store session taken over by ${by}: its sessions move with it`,
      );
      for (const session of [...this.#own.sessions]) session.handOver();
    });
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
          ? this.#provenTokens.take(sessions.publishedAs, options.kind, options.callerName, this.#vouch)
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
        if (group.taken && !this.#handingOver) this.#takeovers?.releaseIfIdle(group);
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
      const takeovers = this.#takeovers;
      if (takeovers && (await takeovers.mayTakeOver(name, token, kind, callerName))) {
        await takeovers.takeOver(name);
      }
    }
    const session = this.#resumable.get(key);
    if (session && session.kind === kind && session.callerName === callerName) {
      session.resumeToken = token;
      this.#events?.('resumed', kind);
      return session;
    }
    throw this.#unknownToken(token);
  }

  *#groups(): Iterable<EngineSessions> {
    yield this.#own;
    if (this.#takeovers) yield* this.#takeovers.groups;
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
    await this.#takeovers?.letGoKept();
    this.#logger.debug('sessions ended');
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
      const keeps = this.#takeovers?.stopKeeping(group) ?? false;
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
 * that `keeps` requests without a grace (see StoreTakeovers#keepUnresumable) is never closed:
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

const UNKNOWN_RESUME_TOKEN =
  'resume token is unknown: its request was released or withdrawn (clean end, or its resume grace passed), or the server restarted';
