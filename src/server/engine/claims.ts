import { randomFillSync } from 'node:crypto';
import type { Logger } from 'pino';
import type { LockEngine } from './lock-engine.js';
import { QueuePlace, Withdrawal, type AcquireRequest, type Lease } from './lock-request.js';
import { isLockError, LockError } from '../lock-error.js';
import { LockSession, type RequestAccounting } from './lock-session.js';

/**
 * Why a claim ends when its stream ended (cleanly, or abnormally without a grace): one shared
 * error, as nobody sees it but a request that was still waiting, and an error per stream costs a
 * stack trace per lock cycle.
 */
export const STREAM_ENDED = new LockError('CANCELLED', 'the stream ended');

/** What the stream attached to a claim is told, while it is attached. */
export interface ClaimObserver {
  /** The request is waiting with `ahead` requests ahead of it. */
  queued(ahead: number): void;
  /** The held lock became in doubt (`false`) or confirmed again (`true`). */
  confirmedChange(confirmed: boolean): void;
  /** Another stream resumed the claim: this one no longer speaks for it. */
  replaced(): void;
}

export interface ClaimRegistryOptions {
  readonly engine: LockEngine;
  readonly logger: Logger;
  /** Identifies this server in resume tokens, so another instance can say where one came from. */
  readonly instanceId: string;
  /** The longest resume grace a client may ask for; 0 turns resuming off. */
  readonly maxResumeGraceMs: number;
}

/**
 * One lock request, queued or holding, apart from the stream that made it: a stream that ends
 * abnormally leaves its claim detached for the grace the client asked for, and another stream
 * can resume it with its token (keeping its place in the queue, or the lock and its token).
 * Nobody else is granted the lock while the claim is detached; that doubles as Chubby's
 * lock-delay. Once the grace is over, the request is withdrawn or the lock released.
 */
export class Claim {
  readonly request: AcquireRequest;
  /** Set when the claim can be resumed (its grace is above zero). */
  readonly resumeToken: string | undefined;
  readonly graceMs: number;
  readonly #openedAt = performance.now();
  #grantedAt: number | undefined;
  /** Resolves with the held lock, or rejects as `LockEngine.acquire` does. */
  readonly granted: Promise<Lease>;
  readonly #logger: Logger;
  readonly #withdrawal = new Withdrawal();
  readonly #place = new QueuePlace();
  readonly #forget: () => void;
  #lease: Lease | undefined;
  #ahead: number | undefined;
  #observer: ClaimObserver | undefined;
  #graceTimer: NodeJS.Timeout | undefined;
  #ended: Promise<void> | undefined;
  #unsubscribe: () => void = () => {};

  constructor(
    engine: LockEngine,
    request: AcquireRequest,
    resume: { token: string; graceMs: number } | undefined,
    logger: Logger,
    forget: () => void,
  ) {
    this.request = request;
    this.resumeToken = resume?.token;
    this.graceMs = resume?.graceMs ?? 0;
    this.#logger = logger;
    this.#forget = forget;
    this.granted = engine
      .acquire(request, {
        withdrawal: this.#withdrawal,
        place: this.#place,
        onQueued: (ahead) => {
          this.#ahead = ahead;
          this.#observer?.queued(ahead);
        },
      })
      .then((lease) => {
        this.#lease = lease;
        this.#grantedAt = performance.now();
        // Dropped in end(): the session outlives the claim, and must not keep it alive.
        this.#unsubscribe = lease.onConfirmedChange((confirmed) =>
          this.#observer?.confirmedChange(confirmed),
        );
        if (this.#ended) this.#unsubscribe();
        return lease;
      });
    // Observed by whoever is attached; a claim detached when it fails is not a second failure.
    this.granted.catch(() => {});
  }

  /** How long the request waited for its grant (so far, while it waits). */
  get waitedMs(): number {
    return (this.#grantedAt ?? performance.now()) - this.#openedAt;
  }

  /** The held lock, once granted. */
  get lease(): Lease | undefined {
    return this.#lease;
  }

  /** Requests ahead at the last count while waiting; undefined before the first count. */
  get ahead(): number | undefined {
    return this.#ahead;
  }

  /**
   * While the request waits: counts it again and tells the attached stream (see QueuePlace);
   * false if it does not wait or the count failed.
   */
  recount(): Promise<boolean> {
    return this.#place.recount();
  }

  /**
   * Makes `observer` the claim's stream, ending a grace period in progress; a stream attached
   * before is told it was `replaced`. Returns whether `observer` is still the one attached.
   */
  attach(observer: ClaimObserver): () => boolean {
    clearTimeout(this.#graceTimer);
    this.#graceTimer = undefined;
    const previous = this.#observer;
    this.#observer = observer;
    previous?.replaced();
    return () => this.#observer === observer;
  }

  /**
   * The attached stream ended abnormally: keep the claim for its grace, then end it. A claim
   * without grace ends at once.
   */
  detach(): void {
    this.#observer = undefined;
    if (this.graceMs === 0) {
      void this.end(STREAM_ENDED);
      return;
    }
    this.#logger.debug(
      { graceMs: this.graceMs },
      'stream ended abnormally; keeping the request for its grace',
    );
    this.#graceTimer = setTimeout(() => {
      this.#logger.debug('resume grace over; ending the request');
      void this.end(new LockError('CANCELLED', `not resumed within its ${this.graceMs} ms grace`));
    }, this.graceMs);
  }

  /**
   * Withdraws the request if it is still waiting (the acquire rejects with `reason`, unless the
   * grant came first). A held lock is left alone.
   */
  withdraw(reason: LockError): void {
    this.#withdrawal.withdraw(reason);
  }

  /**
   * Ends the claim for good: withdraws it if waiting, releases the lock if held, and forgets
   * the resume token. Idempotent; never rejects (failures are logged).
   */
  end(reason: LockError): Promise<void> {
    this.#ended ??= (async () => {
      clearTimeout(this.#graceTimer);
      this.#observer = undefined;
      this.#forget();
      this.withdraw(reason);
      const lease = await this.granted.catch(() => undefined);
      this.#unsubscribe();
      await lease?.release().catch((error: unknown) => {
        if (!isLockError(error, 'LOCK_LOST')) {
          this.#logger.warn({ err: error }, 'could not release a lock after its claim ended');
        }
      });
    })();
    return this.#ended;
  }
}

/**
 * The claims that can be resumed, by token. Claims without a grace are not registered: they
 * live and die with their stream.
 */
export class ClaimRegistry {
  readonly #engine: LockEngine;
  readonly #logger: Logger;
  readonly #instanceId: string;
  readonly #maxResumeGraceMs: number;
  /** Resumable claims (Acquire streams) and sessions (Session streams), by resume token. */
  readonly #resumable = new Map<string, Claim | LockSession>();
  /** Every session not ended yet, resumable or not: shutdown ends them all. */
  readonly #sessions = new Set<LockSession>();
  #closed = false;

  constructor(options: ClaimRegistryOptions) {
    this.#engine = options.engine;
    this.#logger = options.logger;
    this.#instanceId = options.instanceId;
    this.#maxResumeGraceMs = options.maxResumeGraceMs;
  }

  /**
   * Requests kept apart from a stream: resumable claims (attached or detached), and the
   * requests of the sessions not ended yet (an idle session holds none).
   */
  get size(): number {
    let size = 0;
    for (const session of this.#sessions) size += session.size;
    for (const entry of this.#resumable.values()) if (entry instanceof Claim) size += 1;
    return size;
  }

  /** Starts queuing for `request`; resumable for `graceMs` (capped at the server's maximum) after an abnormal end. */
  open(request: AcquireRequest, graceMs: number, logger: Logger): Claim {
    if (this.#closed) throw new LockError('SHUTTING_DOWN', 'the lockstream server is shutting down');
    const effectiveGraceMs = Math.min(graceMs, this.#maxResumeGraceMs);
    if (effectiveGraceMs === 0) return new Claim(this.#engine, request, undefined, logger, () => {});
    const token = `${this.#instanceId}.${randomToken()}`;
    const claim = new Claim(this.#engine, request, { token, graceMs: effectiveGraceMs }, logger, () =>
      this.#resumable.delete(token),
    );
    this.#resumable.set(token, claim);
    return claim;
  }

  /**
   * Opens a session of lock requests (the Session RPC), resumable for `graceMs` (capped at the
   * server's maximum) after an abnormal end of its stream.
   */
  openSession(options: {
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
      resumeToken: token,
      graceMs,
      callerName: options.callerName,
      forget: () => {
        this.#sessions.delete(session);
        if (token !== undefined) this.#resumable.delete(token);
      },
    });
    this.#sessions.add(session);
    if (token !== undefined) this.#resumable.set(token, session);
    return session;
  }

  /** The claim `token` was issued for; NOT_FOUND if it ended or was never issued here. */
  resume(token: string): Claim {
    const claim = this.#resumable.get(token);
    if (claim instanceof Claim) return claim;
    throw this.#unknownToken(token);
  }

  /** The session `token` was issued for; NOT_FOUND if it ended or was never issued here. */
  resumeSession(token: string): LockSession {
    const session = this.#resumable.get(token);
    if (session instanceof LockSession) return session;
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

  /** Ends every claim, attached or detached (server shutdown). */
  async close(): Promise<void> {
    this.#closed = true;
    const reason = new LockError('SHUTTING_DOWN', 'the lockstream server is shutting down');
    await Promise.all([
      ...[...this.#resumable.values()].map((entry) => entry.end(reason)),
      ...[...this.#sessions].map((session) => session.end(reason)),
    ]);
    this.#logger.debug('resumable claims ended');
  }
}

const TOKEN_BYTES = 24;

export const UNKNOWN_RESUME_TOKEN =
  'resume token is unknown: its request was released or withdrawn (clean end, or its resume grace passed), or the server restarted';
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
