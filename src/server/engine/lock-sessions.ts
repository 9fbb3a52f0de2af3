import { randomFillSync } from 'node:crypto';
import type { Logger } from 'pino';
import { LockError } from '../lock-error.js';
import type { LockEngine } from './lock-engine.js';
import { LockSession, type SessionEvents, type SessionKind } from './lock-session.js';
import type { RequestAccounting } from './request-news.js';
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
  /** Identifies this server in resume tokens, so another instance can say where one came from. */
  readonly instanceId: string;
  /** The longest resume grace a client may ask for; 0 turns resuming off. */
  readonly maxResumeGraceMs: number;
  /** Told when a session is detached, resumed, or expires (for metrics). */
  readonly events?: SessionEvents | undefined;
}

/**
 * The sessions of this server: every one not ended (shutdown ends them all), and those that
 * can be resumed, by token.
 */
export class LockSessions {
  readonly #engine: LockEngine;
  readonly #logger: Logger;
  readonly #instanceId: string;
  readonly #maxResumeGraceMs: number;
  readonly #events: SessionEvents | undefined;
  readonly #resumable = new Map<string, LockSession>();
  readonly #sessions = new Set<LockSession>();
  readonly #storeWork = new StoreWorkScheduler(STORE_WORK_IN_FLIGHT);
  #closed = false;

  constructor(options: LockSessionsOptions) {
    this.#engine = options.engine;
    this.#logger = options.logger;
    this.#instanceId = options.instanceId;
    this.#maxResumeGraceMs = options.maxResumeGraceMs;
    this.#events = options.events;
  }

  /** Requests kept apart from a stream: those of every session not ended yet. */
  get size(): number {
    let size = 0;
    for (const session of this.#sessions) size += session.size;
    return size;
  }

  /**
   * Opens a session, resumable for `graceMs` (capped at the server's maximum) after an
   * abnormal end of its stream.
   */
  open(options: {
    kind: SessionKind;
    graceMs: number;
    callerName: string | undefined;
    accounting: RequestAccounting;
    logger: Logger;
  }): LockSession {
    if (this.#closed) throw new LockError('SHUTTING_DOWN', 'the lockstream server is shutting down');
    const graceMs = Math.min(options.graceMs, this.#maxResumeGraceMs);
    const token = graceMs === 0 ? undefined : `${this.#instanceId}.${randomToken()}`;
    const session: LockSession = new LockSession({
      engine: this.#engine,
      logger: options.logger,
      accounting: options.accounting,
      storeWork: this.#storeWork,
      kind: options.kind,
      resumeToken: token,
      graceMs,
      callerName: options.callerName,
      events: this.#events,
      forget: () => {
        this.#sessions.delete(session);
        if (token !== undefined) this.#resumable.delete(token);
      },
    });
    this.#sessions.add(session);
    if (token !== undefined) this.#resumable.set(token, session);
    return session;
  }

  /**
   * The session `token` was issued for, if `callerName` opened it with the same RPC;
   * NOT_FOUND otherwise (someone else's token gets the answer an unknown one does: it reveals
   * nothing).
   */
  resume(token: string, kind: SessionKind, callerName: string | undefined): LockSession {
    const session = this.#resumable.get(token);
    if (session && session.kind === kind && session.callerName === callerName) {
      this.#events?.('resumed', kind);
      return session;
    }
    throw this.#unknownToken(token);
  }

  #unknownToken(token: string): LockError {
    const issuer = token.slice(0, token.indexOf('.'));
    if (issuer !== '' && issuer !== this.#instanceId && !token.startsWith(`${this.#instanceId}.`)) {
      return new LockError(
        'NOT_FOUND',
        `resume token was issued by lockstream instance ${JSON.stringify(issuer.slice(0, 64))}, not this one (${this.#instanceId}); resume on the instance that issued it`,
      );
    }
    return new LockError('NOT_FOUND', UNKNOWN_RESUME_TOKEN);
  }

  /** Ends every session, attached or detached (server shutdown). */
  async close(): Promise<void> {
    this.#closed = true;
    const reason = new LockError('SHUTTING_DOWN', 'the lockstream server is shutting down');
    await Promise.all([...this.#sessions].map((session) => session.end(reason)));
    this.#logger.debug('sessions ended');
  }
}

const UNKNOWN_RESUME_TOKEN =
  'resume token is unknown: its request was released or withdrawn (clean end, or its resume grace passed), or the server restarted';

const TOKEN_BYTES = 24;
/** Random bytes for resume tokens, drawn from the system in batches rather than per token. */
const tokenPool = Buffer.alloc(TOKEN_BYTES * 256);
let tokenPoolOffset = tokenPool.length;

/** 24 random bytes, base64url: a resume token's secret part. */
function randomToken(): string {
  if (tokenPoolOffset === tokenPool.length) {
    randomFillSync(tokenPool);
    tokenPoolOffset = 0;
  }
  const token = tokenPool.toString('base64url', tokenPoolOffset, tokenPoolOffset + TOKEN_BYTES);
  tokenPoolOffset += TOKEN_BYTES;
  return token;
}
