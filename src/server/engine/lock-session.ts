import type { Logger } from 'pino';
import { lossReport } from './lease.js';
import type { LockEngine } from './lock-engine.js';
import {
  heldRequests,
  QueuePlace,
  Withdrawal,
  type AcquireRequest,
  type HeldRequest,
  type Lease,
  type RevokeRequest,
} from './lock-request.js';
import { isLockError, LockError } from '../lock-error.js';
import type { LockMode } from './lock-mode.js';

/** What the stream attached to a session is told about its requests, while it is attached. */
export interface SessionObserver {
  queued(id: number, ahead: number): void;
  acquired(id: number, lease: Lease, request: AcquireRequest): void;
  /** The held lock became in doubt (`false`) or confirmed again (`true`). */
  confirmedChange(id: number, confirmed: boolean): void;
  revokeRequested(id: number, request: RevokeRequest): void;
  /** The value the client sent for the request is published. */
  valueSet(id: number): void;
  /** The request holds its lock in READ mode now, as the client asked. */
  downgraded(id: number): void;
  /** The lock was released at the client's request; `ended` follows. */
  released(id: number, lease: Lease, request: AcquireRequest): void;
  /**
   * The request is over. `error` undefined: released at the client's request (OK); a
   * `LockError` for an expected outcome; anything else is a fault. With `confirm`, returns a
   * promise that resolves once the stream has taken the message (a lost lock is freed for
   * others only then).
   */
  ended(id: number, error: unknown, request: AcquireRequest, confirm?: boolean): Promise<void> | undefined;
  /** Another stream resumed the session: this one no longer speaks for it. */
  replaced(): void;
}

/** The request counts a session keeps up to date (the server's metrics). */
export interface RequestAccounting {
  /** Counts a waiting request until the returned function is called. */
  waiting(mode: LockMode): () => void;
  /** A grant after `waitMs` of `held` (one lock, or a multi-lock's); counts a holder until the returned function is called. */
  granted(
    mode: LockMode,
    waitMs: number,
    held: readonly HeldRequest[],
  ): (outcome: 'released' | 'lost') => void;
  notGranted(mode: LockMode, error: unknown): void;
}

export interface LockSessionOptions {
  readonly engine: LockEngine;
  readonly logger: Logger;
  readonly accounting: RequestAccounting;
  /** Set when the session can be resumed (its grace is above zero). */
  readonly resumeToken: string | undefined;
  readonly graceMs: number;
  /** Who opened the session (the caller's name); only the same caller may resume it. */
  readonly callerName: string | undefined;
  /** Called once when the session has ended for good (its token is then forgotten). */
  readonly forget: () => void;
}

/**
 * Many lock requests that live and die together, apart from the stream that carries them (the
 * Session RPC): each request queues and holds as an Acquire stream's would, and the session
 * ties them all to its stream. A stream that ends abnormally leaves the session detached for
 * its grace, with every request kept (nobody else is granted their locks meanwhile); a stream
 * that resumes it is told where each one stands. Once the grace is over, or when the session
 * ends cleanly, every request is withdrawn or released.
 */
export class LockSession {
  readonly resumeToken: string | undefined;
  readonly graceMs: number;
  readonly callerName: string | undefined;
  readonly #options: LockSessionOptions;
  readonly #requests = new Map<number, SessionLockRequest>();
  #observer: SessionObserver | undefined;
  #graceTimer: NodeJS.Timeout | undefined;
  #ended: Promise<void> | undefined;

  constructor(options: LockSessionOptions) {
    this.#options = options;
    this.resumeToken = options.resumeToken;
    this.graceMs = options.graceMs;
    this.callerName = options.callerName;
  }

  /** The attached stream, if any: told about every request. */
  get observer(): SessionObserver | undefined {
    return this.#observer;
  }

  get logger(): Logger {
    return this.#options.logger;
  }

  get accounting(): RequestAccounting {
    return this.#options.accounting;
  }

  /** Requests that have not ended (or whose end a detached session has not told yet). */
  get size(): number {
    return this.#requests.size;
  }

  get ended(): boolean {
    return this.#ended !== undefined;
  }

  /** Requests the client has not asked to end (with `release` or `cancel`) that have not ended. */
  get unreleased(): number {
    let count = 0;
    for (const request of this.#requests.values()) if (!request.letGo) count += 1;
    return count;
  }

  /** Whether `id` names a request that has not ended. */
  has(id: number): boolean {
    return this.#requests.has(id);
  }

  /**
   * Makes `observer` the session's stream, ending a grace period in progress; a stream
   * attached before is told it was `replaced`. The new stream is told where every request
   * stands, and of each one that ended while no stream was attached; resolves once it has been
   * (a waiting request is counted again first: see QueuePlace).
   */
  async attach(observer: SessionObserver): Promise<void> {
    clearTimeout(this.#graceTimer);
    this.#graceTimer = undefined;
    const previous = this.#observer;
    this.#observer = observer;
    previous?.replaced();
    await Promise.all([...this.#requests.values()].map((request) => request.report(observer)));
  }

  /** Whether `observer` is still the stream attached to the session. */
  isAttached(observer: SessionObserver): boolean {
    return this.#observer === observer;
  }

  /** Queues a new request under `id` (which the caller has checked is free). */
  acquire(id: number, request: AcquireRequest): void {
    if (this.#ended) throw new Error('INVARIANT: acquire on an ended session');
    this.#requests.set(id, new SessionLockRequest(this, id, request, this.#options.engine));
  }

  /** Releases a held lock (`released`, then ended OK), or withdraws a waiting request. */
  release(id: number): void {
    this.#requests.get(id)?.release('release');
  }

  /** Gives a request up: withdrawn if waiting, released if held; ends with CANCELLED. */
  cancel(id: number): void {
    this.#requests.get(id)?.release('cancel');
  }

  /** Publishes `value` for the request's held lock (see SessionLockRequest.setValue); unknown ids are ignored. */
  setValue(id: number, value: Uint8Array): void {
    this.#requests.get(id)?.setValue(value);
  }

  /** Downgrades the request's WRITE hold (see SessionLockRequest.downgrade); unknown ids are ignored. */
  downgrade(id: number): void {
    this.#requests.get(id)?.downgrade();
  }

  /**
   * The client half-closed: releases every held lock (each told `released`, then ended OK) and
   * withdraws every waiting request. Resolves once all have ended.
   */
  async closeCleanly(): Promise<void> {
    const pending = [...this.#requests.values()].map((request) => request.closeWithSession());
    await Promise.all(pending);
  }

  /**
   * The attached stream ended abnormally: keep every request for the grace, then end the
   * session. A session without grace ends at once.
   */
  detach(): void {
    this.#observer = undefined;
    if (this.graceMs === 0) {
      void this.end(SESSION_ENDED);
      return;
    }
    this.logger.debug({ graceMs: this.graceMs }, 'session stream ended abnormally; keeping it for its grace');
    this.#graceTimer = setTimeout(() => {
      this.logger.debug('session resume grace over; ending its requests');
      void this.end(new LockError('CANCELLED', `session not resumed within its ${this.graceMs} ms grace`));
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
      this.#observer = undefined;
      this.#options.forget();
      await Promise.all([...this.#requests.values()].map((request) => request.abandon(reason)));
      this.#requests.clear();
    })();
    return this.#ended;
  }

  /** Called by a request once it is over and its end has been told (or nobody is left to tell). */
  forgetRequest(id: number, request: SessionLockRequest): void {
    if (this.#requests.get(id) === request) this.#requests.delete(id);
  }
}

type Phase = 'waiting' | 'held' | 'releasing' | 'ended';

/**
 * One request of a session, as its own state machine: waiting → held → releasing → ended
 * (or waiting → ended). Its end is told to the attached stream; without one, the end is kept
 * until a stream resumes the session.
 */
class SessionLockRequest {
  readonly #session: LockSession;
  readonly #id: number;
  readonly #request: AcquireRequest;
  readonly #withdrawal = new Withdrawal();
  readonly #place = new QueuePlace();
  readonly #openedAt = performance.now();
  #phase: Phase = 'waiting';
  #ahead: number | undefined;
  #lease: Lease | undefined;
  /** How the client wants it to end, once it asked (`release`, `cancel`, or its session closing). */
  #endRequested: 'release' | 'cancel' | 'close' | undefined;
  /** Granted after the client had withdrawn it: released without a word of the grant. */
  #grantUntold = false;
  /** Set once ended while no stream was attached: told to the next stream that attaches. */
  #untoldEnd: { error: unknown } | undefined;
  #stopWaiting: (() => void) | undefined;
  #endHold: ((outcome: 'released' | 'lost') => void) | undefined;
  #unsubscribe: Array<() => void> = [];
  #done: Promise<void> | undefined;
  #settleDone: (() => void) | undefined;
  /** Set when the request ended with a confirmed message: resolves once the client has it. */
  #told: Promise<void> | undefined;
  /** Why the request was ended by the server for something the client sent (a bad `set_value`). */
  #refusal: LockError | undefined;
  /** The holder's requests (values, a downgrade), applied one after the other; a release waits for them. */
  #holderRequests: Promise<void> = Promise.resolve();

  constructor(session: LockSession, id: number, request: AcquireRequest, engine: LockEngine) {
    this.#session = session;
    this.#id = id;
    this.#request = request;
    this.#stopWaiting = session.accounting.waiting(request.mode);
    engine
      .acquire(request, {
        withdrawal: this.#withdrawal,
        place: this.#place,
        onQueued: (ahead) => {
          this.#ahead = ahead;
          this.#session.observer?.queued(this.#id, ahead);
        },
      })
      .then(
        (lease) => this.#granted(lease),
        (error: unknown) => {
          this.#stopWaiting?.();
          this.#session.accounting.notGranted(request.mode, error);
          this.#end(error);
        },
      );
  }

  /** Whether the request has ended, or the client asked it to. */
  get letGo(): boolean {
    return this.#phase === 'ended' || this.#endRequested !== undefined;
  }

  /** Tells a newly attached stream where this request stands; a waiting one after a new count. */
  async report(observer: SessionObserver): Promise<void> {
    if (this.#untoldEnd) {
      const { error } = this.#untoldEnd;
      this.#session.forgetRequest(this.#id, this);
      void observer.ended(this.#id, error, this.#request);
      return;
    }
    const lease = this.#lease;
    if (this.#phase === 'waiting') {
      const counted = await this.#place.recount();
      // Not counted: granted or ended meanwhile (told as it happened), or the store is out of reach.
      if (
        !counted &&
        this.#phase === 'waiting' &&
        this.#ahead !== undefined &&
        this.#session.observer === observer
      )
        observer.queued(this.#id, this.#ahead);
    } else if (lease && this.#phase !== 'ended') {
      this.#tellHeld(observer, lease);
    }
  }

  /** Tells `observer` the request holds `lease`, and whether it is in doubt or asked back. */
  #tellHeld(observer: SessionObserver, lease: Lease): void {
    observer.acquired(this.#id, lease, this.#request);
    if (!lease.confirmed) observer.confirmedChange(this.#id, false);
    if (lease.revokeRequest) observer.revokeRequested(this.#id, lease.revokeRequest);
  }

  release(how: 'release' | 'cancel' | 'close'): void {
    if (this.#endRequested) return;
    this.#endRequested = how;
    if (this.#phase === 'waiting') {
      this.#withdrawal.withdraw(this.#withdrawalReason(how));
      return;
    }
    if (this.#phase === 'held') this.#releaseLease();
  }

  /**
   * Publishes `value` for the held lock, then tells the stream `value_set`. Sent while the
   * request waits, or malformed, it ends the request with that error (releasing what it holds).
   * After the client let the request go it is ignored.
   */
  setValue(value: Uint8Array): void {
    this.#fromHolder(
      'set_value was sent before `acquired`: only a holder publishes a value (send it in `acquire` to publish it from the start)',
      (lease) => lease.setValue(value),
      (observer) => observer.valueSet(this.#id),
    );
  }

  /** Turns the WRITE hold into a READ hold, then tells the stream `downgraded`; otherwise as setValue. */
  downgrade(): void {
    this.#fromHolder(
      'downgrade was sent before `acquired`: only a WRITE holder can downgrade',
      (lease) => lease.downgrade(),
      (observer) => observer.downgraded(this.#id),
    );
  }

  /**
   * A holder's request, applied once the ones sent before it are done, then acknowledged on
   * the stream that sent it only (after a resume the client sends again what was not
   * acknowledged, and counts one acknowledgement per message it sent). Sent while waiting
   * (`early` says why that is refused) or refused by the lease, it ends the request.
   */
  #fromHolder(
    early: string,
    apply: (lease: Lease) => Promise<void>,
    acknowledge: (observer: SessionObserver) => void,
  ): void {
    if (this.#endRequested || this.#phase === 'ended') return;
    if (this.#phase === 'waiting') {
      this.#refuse(new LockError('NOT_HELD', `lock "${this.#request.name}": ${early}`));
      return;
    }
    const lease = this.#lease;
    if (!lease || this.#phase !== 'held') return;
    const sender = this.#session.observer;
    this.#holderRequests = this.#holderRequests
      .then(() => apply(lease))
      .then(
        () => {
          if (sender && this.#session.observer === sender) acknowledge(sender);
        },
        (error: unknown) => {
          // A lost lock ends the request through its loss; anything else ends it here.
          if (!isLockError(error, 'LOCK_LOST')) this.#refuse(error);
        },
      );
  }

  #refuse(error: unknown): void {
    this.#refusal ??= error instanceof LockError ? error : new LockError('UNAVAILABLE', String(error));
    this.release('cancel');
  }

  /** Part of a clean end of the session: resolves once this request has ended. */
  closeWithSession(): Promise<void> {
    this.#done ??= new Promise((resolve) => (this.#settleDone = resolve));
    if (this.#phase === 'ended') this.#settleDone?.();
    else this.release('close');
    return this.#done;
  }

  /** The session ends: withdraw or release without telling anyone. Never rejects. */
  async abandon(reason: LockError): Promise<void> {
    this.#untoldEnd = undefined;
    if (this.#phase === 'ended') return;
    this.#endRequested ??= 'cancel';
    if (this.#phase === 'waiting') this.#withdrawal.withdraw(reason);
    else this.#releaseLease();
    await this.closeWithSession();
  }

  #withdrawalReason(how: 'release' | 'cancel' | 'close'): LockError {
    if (this.#refusal) return this.#refusal;
    const { name } = this.#request;
    const what =
      how === 'close'
        ? 'the client half-closed the session'
        : how === 'release'
          ? 'the client sent `release`'
          : 'the client cancelled the request';
    return new LockError('CANCELLED', `lock "${name}" was not acquired: ${what} while waiting`);
  }

  #granted(lease: Lease): void {
    this.#stopWaiting?.();
    this.#stopWaiting = undefined;
    this.#lease = lease;
    this.#endHold = this.#session.accounting.granted(
      this.#request.mode,
      performance.now() - this.#openedAt,
      heldRequests(this.#request, lease),
    );
    if (this.#endRequested) {
      // Withdrawn in the same moment as it was granted: the client never hears of the grant,
      // and the request ends as a withdrawal does.
      this.#phase = 'held';
      this.#grantUntold = true;
      this.#releaseLease();
      return;
    }
    if (lease.lossReason) {
      this.#phase = 'held';
      void this.#lost();
      return;
    }
    this.#phase = 'held';
    const id = this.#id;
    this.#unsubscribe.push(
      lease.onLost(() => this.#lost()),
      lease.onConfirmedChange((confirmed) => this.#session.observer?.confirmedChange(id, confirmed)),
      lease.onRevokeRequested((request) => this.#session.observer?.revokeRequested(id, request)),
    );
    const observer = this.#session.observer;
    if (observer) this.#tellHeld(observer, lease);
  }

  #releaseLease(): void {
    const lease = this.#lease;
    if (!lease || this.#phase !== 'held') return;
    this.#phase = 'releasing';
    this.#stopFollowing();
    // What the client published before it let go is published (and acknowledged) first.
    const published = this.#holderRequests;
    published
      .then(() => lease.release())
      .then(
        () => {
          this.#endHold?.('released');
          if (this.#grantUntold && this.#endRequested) {
            this.#end(this.#withdrawalReason(this.#endRequested));
            return;
          }
          if (this.#endRequested === 'cancel') {
            this.#end(
              this.#refusal ??
                new LockError(
                  'CANCELLED',
                  `lock "${this.#request.name}" was released: the client cancelled the request`,
                ),
            );
            return;
          }
          this.#session.observer?.released(this.#id, lease, this.#request);
          this.#end(undefined);
        },
        (error: unknown) => {
          this.#endHold?.('lost');
          this.#end(isLockError(error, 'LOCK_LOST') ? lossReport(this.#request.name, error) : error);
        },
      );
  }

  /** The lock was lost: tells the client; resolves once the stream has taken it, if one is attached. */
  #lost(): Promise<void> | undefined {
    if (this.#phase !== 'held') return undefined;
    this.#stopFollowing();
    this.#endHold?.('lost');
    this.#end(lossReport(this.#request.name, this.#lease?.lossReason), true);
    return this.#told;
  }

  #stopFollowing(): void {
    for (const unsubscribe of this.#unsubscribe.splice(0)) unsubscribe();
  }

  /** Ends the request; with `confirm`, `#told` then says when the attached stream (if any) has taken the news. */
  #end(error: unknown, confirm = false): void {
    if (this.#phase === 'ended') return;
    this.#phase = 'ended';
    this.#stopFollowing();
    const observer = this.#session.observer;
    if (observer) {
      this.#session.forgetRequest(this.#id, this);
      this.#told = observer.ended(this.#id, error, this.#request, confirm);
    } else if (this.#session.ended) {
      this.#session.forgetRequest(this.#id, this);
    } else {
      this.#untoldEnd = { error };
    }
    this.#settleDone?.();
    this.#done ??= Promise.resolve();
  }
}

/** Why requests end when their session ends without a grace: shared, as nobody sees it. */
export const SESSION_ENDED = new LockError('CANCELLED', 'the session ended');
