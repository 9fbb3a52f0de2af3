/*
 * One lock request of a session, whichever RPC made it (SessionRequest): from waiting through held
 * and releasing to its end, its news told to the stream attached to the session.
 */
import { isLockError, LockError } from '../lock-error.js';
import { withResolvers } from '../../common/deferred.js';
import { cancelledHold, HANDED_OVER, lossReport, notAcquired } from './loss-reasons.js';
import type { LockEngine } from './lock-engine.js';
import {
  heldRequests,
  QueuePlace,
  Withdrawal,
  type AcquireRequest,
  type Lease,
  type LeaseHolder,
  type RevokeRequest,
} from './lock-request.js';
import type { AcquireListener } from './acquisition.js';
import type { RequestListener, RequestNews } from './request-news.js';
import type { LetGo, RequestSession } from './request-news.js';
import type { OwnedNode } from '../stores/store.js';

type Phase = 'waiting' | 'held' | 'releasing' | 'ended';

/**
 * One lock request of a session, whichever RPC made it (an Acquire stream is a session of one
 * request): waiting → held → releasing → ended, or waiting → ended. Its news goes to the stream
 * attached to the session; an end that happens while none is attached is kept until a stream
 * resumes the session.
 */
export class SessionRequest implements LeaseHolder, AcquireListener {
  readonly id: number;
  readonly request: AcquireRequest;
  readonly #session: RequestSession;
  /** How the request is withdrawn and counted again while it waits; dropped once granted (a holder needs neither). */
  #withdrawal: Withdrawal | undefined = new Withdrawal();
  #place: QueuePlace | undefined = new QueuePlace();
  /** When the request was made, until it is granted; then when it was granted. */
  #since = performance.now();
  /** Which count of the session's accounting the request is in. */
  #counted: 'waiting' | 'holding' | undefined = 'waiting';
  #phase: Phase = 'waiting';
  /** Whether it has been handed to the engine (it waits for its turn among the session's work until then). */
  #started = false;
  /** Frees the request's slot among the session's store work; dropped once called (a waiter need not keep it). */
  #workDone: (() => void) | undefined;
  #ahead: number | undefined;
  #lease: Lease | undefined;
  /** How the client wants it to end, once it asked. */
  #letGo: LetGo | undefined;
  /** Granted after the client had withdrawn it: released without a word of the grant. */
  #grantUntold = false;
  /** Set once ended while no stream was attached: told to the next stream that attaches. */
  #untoldEnd: RequestNews | undefined;
  /** Resolves once a request not started yet has its first news; made only for a resume that waits for it. */
  #firstNews: { promise: Promise<void>; resolve: () => void } | undefined;
  /** Resolves once the request has ended; made only for a session that waits for it. */
  #done: { promise: Promise<void>; resolve: () => void } | undefined;
  /** Set when the request ended with a loss: resolves once the client has it. */
  #told: void | Promise<void> = undefined;
  /** The revocation request last told, and to which stream (see #tellRevoke). */
  #revokeTold: { readonly listener: RequestListener; readonly revoke: RevokeRequest } | undefined;
  /** Why the server ended the request for something the client sent (a bad `set_value`). */
  #refusal: LockError | undefined;
  /** The holder's requests (values, a downgrade), applied one after the other; a release waits for them. */
  #holderRequests: Promise<void> | undefined;

  /** The nodes of a request another instance made, until it is started (see LockEngine.adopt). */
  #adopted: readonly OwnedNode[] | undefined;

  constructor(session: RequestSession, id: number, request: AcquireRequest, adopted?: readonly OwnedNode[]) {
    this.#session = session;
    this.id = id;
    this.request = request;
    this.#adopted = adopted;
    session.accounting.waiting(request.mode);
  }

  /**
   * Queues the request (its turn among the session's store work has come); `done` is called
   * once its first store work is over: it waits in the queue, holds, or has ended.
   */
  start(engine: LockEngine, workDone: () => void): void {
    if (this.#started) {
      workDone();
      return;
    }
    this.#started = true;
    this.#workDone = workDone;
    const adopted = this.#adopted;
    this.#adopted = undefined;
    const withdrawal = this.#withdrawal ?? new Withdrawal();
    const place = this.#place;
    if (adopted) {
      engine.adoptRequest(this.request, adopted, { withdrawal, place }, this);
    } else {
      engine.request(this.request, { withdrawal, place, tag: this.#session.tag(this.id) }, this);
    }
  }

  // AcquireListener: what the engine tells of the request.

  /** It waits with `ahead` requests ahead of it. */
  queued(ahead: number): void {
    this.#firstWorkDone();
    this.#ahead = ahead;
    this.#tell({ kind: 'waiting', ahead });
  }

  granted(lease: Lease): void {
    this.#firstWorkDone();
    this.#granted(lease);
  }

  failed(error: unknown): void {
    this.#firstWorkDone();
    this.#notGranted(error);
  }

  /** The request's first store work is over (it waits, holds, or has ended): its turn's slot is free. */
  #firstWorkDone(): void {
    const workDone = this.#workDone;
    this.#workDone = undefined;
    workDone?.();
    this.#firstNews?.resolve();
    this.#firstNews = undefined;
  }

  #endWait(): void {
    if (this.#counted !== 'waiting') return;
    this.#counted = undefined;
    this.#session.accounting.waitEnded(this.request.mode);
  }

  #endHold(outcome: 'released' | 'lost'): void {
    const lease = this.#lease;
    if (this.#counted !== 'holding' || !lease) return;
    this.#counted = undefined;
    const heldMs = performance.now() - this.#since;
    this.#session.accounting.holdEnded(this.request.mode, outcome, heldMs, heldRequests(this.request, lease));
  }

  #notGranted(error: unknown): void {
    this.#endWait();
    this.#session.accounting.notGranted(this.request.mode, error);
    this.#end({ kind: 'ended', error });
  }

  /** Whether the request has ended, or the client asked it to. */
  get letGo(): boolean {
    return this.#phase === 'ended' || this.#letGo !== undefined;
  }

  get ended(): boolean {
    return this.#phase === 'ended';
  }

  /** Tells a newly attached stream where this request stands; a waiting one after a new count. */
  async report(listener: RequestListener): Promise<void> {
    if (this.#untoldEnd) {
      const news = this.#untoldEnd;
      this.#untoldEnd = undefined;
      this.#session.forgetRequest(this);
      void listener.tell(this.id, this.request, news);
      return;
    }
    if (this.#phase === 'waiting' && this.#ahead === undefined) {
      // Not counted yet (it may wait for its turn among the session's work): wait for its first news.
      await (this.#firstNews ??= withResolvers()).promise;
    }
    if (this.#phase === 'waiting') {
      const counted = (await this.#place?.recount()) ?? false;
      // Not counted: granted or ended meanwhile (told as it happened), or the store is out of reach.
      if (
        !counted &&
        this.#phase === 'waiting' &&
        this.#ahead !== undefined &&
        this.#session.isAttached(listener)
      )
        void listener.tell(this.id, this.request, { kind: 'waiting', ahead: this.#ahead });
    } else if (this.#lease && this.#phase !== 'ended') {
      this.#tellHeld(listener, this.#lease);
    }
  }

  /** Tells `listener` the request holds `lease`, and whether it is in doubt or asked back. */
  #tellHeld(listener: RequestListener, lease: Lease): void {
    void listener.tell(this.id, this.request, { kind: 'granted', lease });
    if (!lease.confirmed)
      void listener.tell(this.id, this.request, { kind: 'confirmation', confirmed: false });
    if (lease.revokeRequest) this.#tellRevoke(listener, lease.revokeRequest);
  }

  /**
   * Tells `listener` the holder is asked to release, once per stream and request: a resumed
   * stream hears it in the report of where the request stands, and the lease may tell the same
   * request again as it reads its node (a session taken over from another instance).
   */
  #tellRevoke(listener: RequestListener, revoke: RevokeRequest): void {
    if (this.#revokeTold?.listener === listener && this.#revokeTold.revoke === revoke) return;
    this.#revokeTold = { listener, revoke };
    void listener.tell(this.id, this.request, { kind: 'revoke-requested', revoke });
  }

  #tell(news: RequestNews): void {
    void this.#session.listener?.tell(this.id, this.request, news);
  }

  /** The client lets the request go: withdrawn if it waits, released if it holds. */
  release(how: LetGo): void {
    if (this.#letGo) return;
    this.#letGo = how;
    if (this.#phase === 'waiting') {
      this.#withdraw(this.#withdrawalReason(how));
      return;
    }
    if (this.#phase === 'held') this.#releaseLease();
  }

  /** Withdraws a waiting request; one that has not reached the engine yet ends here and now. */
  #withdraw(reason: LockError): void {
    this.#withdrawal?.withdraw(reason);
    if (this.#started) return;
    this.#started = true;
    this.#notGranted(reason);
  }

  /**
   * Publishes `value` for the held lock, then tells the stream `value-published`. Sent while the
   * request waits, or malformed, it ends the request with that error (releasing what it holds).
   * After the client let the request go it is ignored.
   */
  setValue(value: Uint8Array, early: string): void {
    this.#fromHolder(early, (lease) => lease.setValue(value), { kind: 'value-published' });
  }

  /** Turns the WRITE hold into a READ hold, then tells the stream `downgraded`; otherwise as setValue. */
  downgrade(early: string): void {
    this.#fromHolder(early, (lease) => lease.downgrade(), { kind: 'downgraded' });
  }

  /**
   * A holder's request, applied once the ones sent before it are done, then acknowledged on
   * the stream that sent it only (after a resume the client sends again what was not
   * acknowledged, and counts one acknowledgement per message it sent). Sent while waiting
   * (`early` says why that is refused) or refused by the lease, it ends the request.
   */
  #fromHolder(early: string, apply: (lease: Lease) => Promise<void>, done: RequestNews): void {
    if (this.#letGo || this.#phase === 'ended') return;
    if (this.#phase === 'waiting') {
      this.#refuse(new LockError('NOT_HELD', `lock "${this.request.name}": ${early}`));
      return;
    }
    const lease = this.#lease;
    if (!lease || this.#phase !== 'held') return;
    const sender = this.#session.listener;
    this.#holderRequests = (this.#holderRequests ?? Promise.resolve())
      .then(() => apply(lease))
      .then(
        () => {
          if (sender && this.#session.isAttached(sender)) void sender.tell(this.id, this.request, done);
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
    if (this.#phase === 'ended') return Promise.resolve();
    this.#done ??= withResolvers();
    this.release('close');
    return this.#done.promise;
  }

  /**
   * The session moved to another instance (see LockSession.handOver): the request is that
   * instance's now. It ends here without a word and without a change in the store: its nodes
   * stay for the taker, and a wait stops without deleting its node.
   */
  handOver(): void {
    if (this.#phase === 'ended') return;
    this.#untoldEnd = undefined;
    this.#letGo ??= 'cancel';
    if (this.#phase === 'waiting') {
      this.#started = true;
      this.#withdrawal?.withdraw(HANDED_OVER);
    }
    this.#endWait();
    this.#endHold('released');
    this.#phase = 'ended';
    this.#unfollow();
    this.#session.forgetRequest(this);
    this.#done?.resolve();
  }

  /** The session ends: withdraw or release without telling anyone. Never rejects. */
  async abandon(reason: LockError): Promise<void> {
    this.#untoldEnd = undefined;
    if (this.#phase === 'ended') return;
    this.#letGo ??= 'cancel';
    if (this.#phase === 'waiting') this.#withdraw(reason);
    else this.#releaseLease();
    await this.closeWithSession();
  }

  #withdrawalReason(how: LetGo): LockError {
    return this.#refusal ?? notAcquired(this.request.name, how, this.#session.streamNoun);
  }

  #granted(lease: Lease): void {
    // Granted as the session was handed over: the lock is the taker's to tell of.
    if (this.#phase === 'ended') return;
    this.#endWait();
    this.#withdrawal = undefined;
    this.#place = undefined;
    this.#lease = lease;
    const now = performance.now();
    this.#session.accounting.granted(this.request.mode, now - this.#since, heldRequests(this.request, lease));
    this.#counted = 'holding';
    this.#since = now;
    this.#phase = 'held';
    if (this.#letGo) {
      // Withdrawn in the same moment as it was granted: the client never hears of the grant,
      // and the request ends as a withdrawal does.
      this.#grantUntold = true;
      this.#releaseLease();
      return;
    }
    if (lease.lossReason) {
      void this.#lost();
      return;
    }
    lease.setHolder(this);
    const listener = this.#session.listener;
    if (listener) this.#tellHeld(listener, lease);
  }

  #releaseLease(): void {
    const lease = this.#lease;
    if (!lease || this.#phase !== 'held') return;
    this.#phase = 'releasing';
    this.#unfollow();
    // What the client published before it let go is published (and acknowledged) first.
    const release = (): Promise<void> => this.#session.storeWork(() => lease.release());
    const released = this.#holderRequests ? this.#holderRequests.then(release) : release();
    released.then(
      () => {
        this.#endHold('released');
        if (this.#grantUntold && this.#letGo) {
          this.#end({ kind: 'ended', error: this.#withdrawalReason(this.#letGo) });
          return;
        }
        if (this.#letGo === 'cancel') {
          this.#end({ kind: 'ended', error: this.#refusal ?? cancelledHold(this.request.name) });
          return;
        }
        this.#tell({ kind: 'released', lease });
        this.#end({ kind: 'ended', error: undefined });
      },
      (error: unknown) => {
        this.#endHold('lost');
        const why = isLockError(error, 'LOCK_LOST') ? lossReport(this.request.name, error) : error;
        this.#end({ kind: 'ended', error: why });
      },
    );
  }

  /** The lock was lost: tells the client; resolves once the stream has taken it, if one is attached. */
  #lost(): void | Promise<void> {
    if (this.#phase !== 'held') return undefined;
    this.#unfollow();
    this.#endHold('lost');
    this.#end({ kind: 'lost', error: lossReport(this.request.name, this.#lease?.lossReason) });
    return this.#told;
  }

  #unfollow(): void {
    this.#lease?.setHolder(undefined);
  }

  // LeaseHolder: what the held lease tells its holder.

  /** The lock was lost: tells the client; resolves once the stream has taken it, if one is attached. */
  lost(): void | Promise<void> {
    return this.#lost();
  }

  confirmation(confirmed: boolean): void {
    this.#tell({ kind: 'confirmation', confirmed });
  }

  revokeRequested(revoke: RevokeRequest): void {
    const listener = this.#session.listener;
    if (listener) this.#tellRevoke(listener, revoke);
  }

  /** Ends the request: tells the attached stream, or keeps the news for the next one. */
  #end(news: RequestNews): void {
    if (this.#phase === 'ended') return;
    this.#phase = 'ended';
    this.#unfollow();
    const listener = this.#session.listener;
    if (listener) {
      this.#session.forgetRequest(this);
      this.#told = listener.tell(this.id, this.request, news);
    } else if (this.#session.ended) {
      this.#session.forgetRequest(this);
    } else {
      this.#untoldEnd = news;
    }
    this.#done?.resolve();
  }
}
