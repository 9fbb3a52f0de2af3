/*
 * One lockstream session (LockSession): the lock requests one stream carries, kept for their grace
 * when the stream breaks, and withdrawn or released when the session ends.
 */
import type { Logger } from 'pino';
import { LockError } from '../lock-error.js';
import type { LockEngine } from './lock-engine.js';
import type { AcquireRequest } from './lock-request.js';
import type { OwnedNode } from '../stores/store.js';
import type { RequestTag, SessionKind } from './lock-request.js';
import type { RequestAccounting, RequestListener } from './request-news.js';
import type { RequestSession } from './request-news.js';
import { LockRequest } from './request.js';
import { WorkQueue, type StoreWorkScheduler } from './store-work-scheduler.js';

/** Which RPC opened a session: an Acquire stream is a session of one request. */
export type { SessionKind } from './lock-request.js';

/**
 * What happens to sessions across their streams, for metrics: a stream that broke left its
 * session kept for its grace (`detached`), another stream resumed it (`resumed`), the grace
 * passed without one (`expired`), or this instance took it over from another (`taken-over`).
 */
export type SessionEvent = 'detached' | 'resumed' | 'expired' | 'taken-over';
export type SessionEvents = (event: SessionEvent, kind: SessionKind) => void;

export interface LockSessionOptions {
  readonly engine: LockEngine;
  readonly logger: Logger;
  readonly accounting: RequestAccounting;
  /** Where the session's store work takes its turns with every other session's. */
  readonly storeWork: StoreWorkScheduler;
  readonly kind: SessionKind;
  /**
   * Set when the session can be resumed (its grace is above zero); undefined also for a session
   * rebuilt from a taken-over store session, until its client resumes it (only its key is known).
   */
  readonly resumeToken: string | undefined;
  /** The resume token's hash (see resumeKey), written in the session's nodes; set when resumable. */
  readonly resumeKey: string | undefined;
  readonly graceMs: number;
  /** The heartbeat interval of its stream, if it has heartbeats (see RequestSession.heartbeatMs). */
  readonly heartbeatMs?: number | undefined;
  /** Who opened the session (the caller's name); only the same caller may resume it. */
  readonly callerName: string | undefined;
  /** Called once when the session has ended for good (its token is then forgotten). */
  readonly forget: () => void;
  /** Told when the session is detached, resumed, or expires (see SessionEvent). */
  readonly events?: SessionEvents | undefined;
}

/**
 * Lock requests that live and die together, apart from the stream that carries them: a
 * Session stream's many, or an Acquire stream's one. Each request queues and holds on its own
 * (see LockRequest); the session ties them to its stream. A stream that ends abnormally
 * leaves the session detached for its grace, with every request kept (nobody else is granted
 * their locks meanwhile: Chubby's lock-delay); a stream that resumes it is told where each one
 * stands. Once the grace is over, or when the session ends cleanly, every request is
 * withdrawn or released.
 */
export class LockSession implements RequestSession {
  readonly kind: SessionKind;
  /** See LockSessionOptions.resumeToken; set by a resume that proves it knows the token. */
  resumeToken: string | undefined;
  readonly resumeKey: string | undefined;
  readonly graceMs: number;
  readonly heartbeatMs: number | undefined;
  readonly callerName: string | undefined;
  // The options' parts, not the options object: it has a dozen fields, a session needs six.
  readonly #engine: LockEngine;
  readonly #logger: Logger;
  readonly #accounting: RequestAccounting;
  readonly #storeWork: StoreWorkScheduler;
  readonly #forget: () => void;
  readonly #events: SessionEvents | undefined;
  /**
   * The requests not ended, by id: one is kept as it is (an Acquire stream's session has one),
   * a Map made for a second.
   */
  #only: LockRequest | undefined;
  #requests: Map<number, LockRequest> | undefined;
  /** This session's store work waiting for its turn. */
  readonly #work: WorkQueue;
  #listener: RequestListener | undefined;
  #graceTimer: NodeJS.Timeout | undefined;
  #ended: Promise<void> | undefined;

  constructor(options: LockSessionOptions) {
    this.#engine = options.engine;
    this.#logger = options.logger;
    this.#accounting = options.accounting;
    this.#storeWork = options.storeWork;
    this.#forget = options.forget;
    this.#events = options.events;
    this.kind = options.kind;
    this.resumeToken = options.resumeToken;
    this.resumeKey = options.resumeKey;
    this.graceMs = options.graceMs;
    this.heartbeatMs = options.heartbeatMs;
    this.callerName = options.callerName;
    this.#work = new WorkQueue();
  }

  /** The attached stream, if any: told about every request. */
  get listener(): RequestListener | undefined {
    return this.#listener;
  }

  get logger(): Logger {
    return this.#logger;
  }

  get accounting(): RequestAccounting {
    return this.#accounting;
  }

  /** How messages name the stream that carries the session. */
  get streamNoun(): string {
    return this.kind === 'session' ? 'session' : 'stream';
  }

  /** Requests that have not ended (or whose end a detached session has not told yet). */
  get size(): number {
    return this.#requests ? this.#requests.size : this.#only ? 1 : 0;
  }

  get ended(): boolean {
    return this.#ended !== undefined;
  }

  /** Requests the client has not asked to end (with `release` or `cancel`) that have not ended. */
  get unreleased(): number {
    let count = 0;
    for (const request of this.#all()) if (!request.letGo) count += 1;
    return count;
  }

  /** Whether `id` names a request that has not ended. */
  has(id: number): boolean {
    return this.#get(id) !== undefined;
  }

  /** What request `id` asked for, while the session knows it. */
  request(id: number): AcquireRequest | undefined {
    return this.#get(id)?.request;
  }

  /**
   * Makes `listener` the session's stream, ending a grace period in progress; a stream
   * attached before is told it was `replaced`. The new stream is told where every request
   * stands, and of each one that ended while no stream was attached; resolves once it has been
   * (a waiting request is counted again first: see LockRequest.report).
   */
  async attach(listener: RequestListener): Promise<void> {
    clearTimeout(this.#graceTimer);
    this.#graceTimer = undefined;
    const previous = this.#listener;
    this.#listener = listener;
    previous?.replaced();
    await Promise.all(this.#all().map((request) => request.report(listener)));
  }

  /** Whether `listener` is still the stream attached to the session. */
  isAttached(listener: RequestListener): boolean {
    return this.#listener === listener;
  }

  /** Queues a new request under `id` (which the caller has checked is free). */
  acquire(id: number, request: AcquireRequest): void {
    if (this.#ended) throw new Error('INVARIANT: acquire on an ended session');
    const queued = new LockRequest(this.#engine.requests, this, id, request);
    this.#add(queued);
    this.#storeWork.run(this.#work, (done) => queued.takeTurn(done));
  }

  /**
   * Takes over request `id`, whose nodes another instance made (see LockEngine.adopt): it is
   * counted and reported as any other, once its turn among the session's store work comes.
   */
  adopt(id: number, request: AcquireRequest, nodes: readonly OwnedNode[]): void {
    if (this.#ended) throw new Error('INVARIANT: adopt on an ended session');
    const adopted = new LockRequest(this.#engine.requests, this, id, request, nodes);
    this.#add(adopted);
    this.#storeWork.run(this.#work, (done) => adopted.takeTurn(done));
  }

  /** What request `id`'s nodes record of this session: only where another instance could take it over. */
  tag(id: number): RequestTag | undefined {
    const key = this.resumeKey;
    if (key === undefined) return undefined;
    return { key, id, kind: this.kind, grace: this.graceMs, caller: this.callerName };
  }

  /**
   * The session moves to another instance: this store session was taken over by one, or this
   * server stops and leaves its sessions for one. Every request ends here without a word and
   * without a change in the store (see LockRequest.handOver); the attached stream ends
   * telling its client to resume the session, which it can do on any instance.
   */
  handOver(): void {
    if (this.#ended) return;
    this.#ended = Promise.resolve();
    clearTimeout(this.#graceTimer);
    const listener = this.#listener;
    this.#listener = undefined;
    this.#forget();
    for (const request of this.#all()) request.handOver();
    this.#only = undefined;
    this.#requests = undefined;
    listener?.handedOver();
  }

  /** Runs `work` (a request's store work) in its turn among this session's. */
  storeWork<T>(work: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#storeWork.run(this.#work, (done) => {
        work().then(resolve, reject).finally(done);
      });
    });
  }

  /** Releases a held lock (`released`, then ended OK), or withdraws a waiting request. */
  release(id: number): void {
    this.#get(id)?.release('release');
  }

  /** Gives a request up: withdrawn if waiting, released if held; ends with CANCELLED. */
  cancel(id: number): void {
    this.#get(id)?.release('cancel');
  }

  /**
   * Publishes `value` for the request's held lock (see LockRequest.setValue); `early` says
   * why it is refused before the grant. Unknown ids are ignored.
   */
  setValue(id: number, value: Uint8Array, early: string): void {
    this.#get(id)?.setValue(value, early);
  }

  /** Downgrades the request's WRITE hold (see LockRequest.downgrade); unknown ids are ignored. */
  downgrade(id: number, early: string): void {
    this.#get(id)?.downgrade(early);
  }

  /**
   * The client half-closed: releases every held lock (each told `released`, then ended OK) and
   * withdraws every waiting request; then the session ends. Resolves once all have ended.
   */
  async closeCleanly(): Promise<void> {
    await Promise.all(this.#all().map((request) => request.closeWithSession()));
    await this.end(SESSION_ENDED);
  }

  /**
   * The attached stream ended abnormally: keep every request for the grace, then end the
   * session. A session without grace ends at once.
   */
  detach(): void {
    this.#listener = undefined;
    if (this.graceMs === 0) {
      void this.end(SESSION_ENDED);
      return;
    }
    this.logger.debug(
      { graceMs: this.graceMs },
      'stream ended abnormally; keeping its requests for the grace',
    );
    this.#events?.('detached', this.kind);
    this.#graceTimer = setTimeout(() => {
      this.logger.debug('resume grace over; ending its requests');
      this.#events?.('expired', this.kind);
      void this.end(
        new LockError('CANCELLED', `${this.streamNoun} not resumed within its ${this.graceMs} ms grace`),
      );
    }, this.graceMs);
  }

  /**
   * Ends the session for good: withdraws every waiting request and releases every held lock,
   * silently (whoever is attached hears the session's own end instead), and forgets the
   * resume token. Idempotent; never rejects.
   */
  end(reason: LockError): Promise<void> {
    this.#ended ??= (async () => {
      clearTimeout(this.#graceTimer);
      this.#listener = undefined;
      this.#forget();
      await Promise.all(this.#all().map((request) => request.abandon(reason)));
      this.#only = undefined;
      this.#requests = undefined;
    })();
    return this.#ended;
  }

  /** Called by a request once it is over and its end has been told (or nobody is left to tell). */
  forgetRequest(request: LockRequest): void {
    if (this.#get(request.id) !== request) return;
    if (this.#requests) this.#requests.delete(request.id);
    else this.#only = undefined;
  }

  #get(id: number): LockRequest | undefined {
    if (this.#requests) return this.#requests.get(id);
    return this.#only?.id === id ? this.#only : undefined;
  }

  #add(request: LockRequest): void {
    if (this.#requests) {
      this.#requests.set(request.id, request);
    } else if (this.#only) {
      this.#requests = new Map([
        [this.#only.id, this.#only],
        [request.id, request],
      ]);
      this.#only = undefined;
    } else {
      this.#only = request;
    }
  }

  /** The requests not ended, in the order they came (a copy: one may end while they are gone through). */
  #all(): LockRequest[] {
    if (this.#requests) return [...this.#requests.values()];
    return this.#only ? [this.#only] : [];
  }
}

/** Why requests end when their session ends without a grace: shared, as nobody sees it. */
export const SESSION_ENDED = new LockError('CANCELLED', 'the session ended');
