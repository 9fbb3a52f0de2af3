/*
 * One lock request, whichever RPC or caller made it (LockRequest): one state machine with one
 * phase from its arrival to its end. Until it holds it is a QueueingRequest (request-queueing.ts);
 * this file is its hold (loss, revocation, a value, a downgrade, its release) and what its
 * client is told (its news, a resumed stream's report, its one end).
 */
import { isLockError, LockError } from '../lock-error.js';
import { withResolvers } from '../../common/deferred.js';
import {
  cancelledHold,
  HANDED_OVER,
  lockLost,
  lossReport,
  nodeGone,
  notAcquired,
  whenTold,
} from './loss-reasons.js';
import { heldRequests, type HeldLock, type LockMode, type RevokeRequest } from './lock-request.js';
import type { LetGo, RequestListener, RequestNews } from './request-news.js';
import { notDowngradable, valueSizeProblem } from './request-validation.js';
import { deleteNodes, deleteParts, replaceWithRead, unfollow, writeValue } from './request-nodes.js';
import { QueueingRequest, queued } from './request-queueing.js';
import { recount, type Part } from './request-wait.js';
import { HeldRevocation } from './revocation.js';

/**
 * One lock request, from its arrival to its end, as one state machine with one phase (see
 * RequestPhase) and one end path (`end`): its lock (or a multi-lock's locks, each a Part) is
 * queued for and waited for (QueueingRequest, the first half), held, and released or lost
 * here. Its wait in the
 * store is request-wait.ts's, whose every kind of news (a listing, a deletion, a semaphore
 * wake-up) comes back through `turnCame` or `giveUp`; the grant is decided in one place,
 * `#decide`. Its nodes' news (a change, a deletion) and its store session's (doubt, loss) come
 * here too, and mean what the phase says: a vanished node ends a wait, or loses a hold. A
 * request whose store session was lost while it waited queues again on the new one.
 *
 * A state machine told by callbacks, not a suspended async function with a promise chain:
 * thousands wait at once, and each keeps what its steps need in fields.
 */
export class LockRequest extends QueueingRequest implements HeldLock {
  /** Made when first needed: most holds are never revoked. */
  #revocation: HeldRevocation | undefined;
  /** The part whose node carried the revocation the holder was told. */
  #revokedPart: Part | undefined;
  /** Why the hold was lost, once it is. */
  #lossReason: LockError | undefined;
  /** Set once a release's delete is under way: a loss is then no longer news. */
  #deleting = false;
  /** How the client wants it to end, once it asked. */
  #letGo: LetGo | undefined;
  /** Granted after the client had withdrawn it: released without a word of the grant. */
  #grantUntold = false;
  /** Set once ended while no stream was attached: told to the next stream that attaches. */
  #untoldEnd: RequestNews | undefined;
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

  /** Whether the request has ended, or the client asked it to. */
  get letGo(): boolean {
    return this.phase === 'ended' || this.#letGo !== undefined;
  }

  get ended(): boolean {
    return this.phase === 'ended';
  }

  // HeldLock: what a grant tells of the held lock.

  get name(): string {
    return this.request.name;
  }

  /** How the (first) lock is held now: `read` after a downgrade. */
  get mode(): LockMode {
    return this.parts[0]?.mode ?? this.request.mode;
  }

  /** The (first) lock's fencing token; `tokens` has a multi-lock's each. */
  get fencingToken(): bigint {
    return this.parts[0]?.token ?? 0n;
  }

  /** Why the hold was lost, once it is. */
  get lossReason(): LockError | undefined {
    return this.#lossReason;
  }

  get tokens(): Array<{ readonly name: string; readonly token: bigint }> | undefined {
    return this.request.locks
      ? this.parts.map((part) => ({ name: part.request.name, token: part.token }))
      : undefined;
  }

  #endHold(outcome: 'released' | 'lost'): void {
    if (this.counted !== 'holding') return;
    this.counted = undefined;
    const heldMs = performance.now() - this.since;
    this.session.accounting.holdEnded(this.request.mode, outcome, heldMs, heldRequests(this.request, this));
  }

  /** The request holds now (see QueueingRequest#grant): the client is told, unless it let go meanwhile. */
  protected held(): void {
    if (this.#letGo) {
      // Withdrawn in the same moment as it was granted: the client never hears of the grant,
      // and the request ends as a withdrawal does.
      this.#grantUntold = true;
      this.#releaseHold();
      return;
    }
    const listener = this.session.listener;
    if (listener && this.phase === 'held') this.#tellHeld(listener);
  }

  // What the store tells of the hold (see QueueingRequest#nodeData).

  /** A part's node changed (or was read): once held, a revocation may be in it. */
  protected heldNodeData(part: Part, data: Uint8Array): void {
    if (!this.#watching) return;
    const revocation = (this.#revocation ??= new HeldRevocation(
      (revoke) => this.#forced(revoke),
      (revoke) => this.#revokeRequested(revoke),
    ));
    const told = revocation.request;
    revocation.seen(data);
    if (revocation.request !== told) this.#revokedPart = part;
  }

  /** A part's node was deleted while held: the hold is lost. */
  protected heldNodeDeleted(part: Part): void {
    const session = this.storeSession!;
    if (session.lost.aborted) {
      this.#lose(lockLost(part.request.name, session.lost.reason), 'all');
      return;
    }
    const revoked = this.#revocation?.request;
    const why = revoked
      ? `lock "${part.request.name}" was revoked: ${revoked.reason || 'no reason given'}`
      : `lock "${part.request.name}" was lost: its node was deleted by someone else`;
    this.#lose(new LockError('LOCK_LOST', why), part);
  }

  /** The store session is lost while held: so is the hold. */
  protected heldSessionLost(reason: unknown): void {
    this.#lose(lockLost(this.request.name, reason), 'all');
  }

  /** SessionDependent: the holder hears of the session's doubt. */
  confirmationChanged(confirmed: boolean): void {
    if (this.phase === 'held') this.tell({ kind: 'confirmation', confirmed });
  }

  /**
   * Whether the hold still watches its nodes: while held, and while a release waits for the
   * holder's requests before its delete (a loss or a deadline then still counts).
   */
  get #watching(): boolean {
    return this.phase === 'held' || (this.phase === 'releasing' && !this.#deleting);
  }

  /** The hold's watching ends: no more revocations, store session news or node news. */
  #stopHolding(): void {
    this.#revocation?.stop();
    this.leaveStoreSession();
    unfollow(this.parts);
  }

  /**
   * A revocation's deadline passed while held: the lock is lost, and nobody else may wait on a
   * holder that was told to go, so its nodes are deleted as soon as the holder has heard it lost
   * the lock (it must hear before anyone is granted it).
   */
  #forced(revoke: RevokeRequest): void {
    const name = this.#revokedPart?.request.name ?? this.request.name;
    this.#lose(
      new LockError(
        'LOCK_LOST',
        `lock "${name}" was revoked and not released in time: ${revoke.reason || 'no reason given'}`,
      ),
      undefined,
    );
  }

  /**
   * The hold is lost: the client is told (a multi-lock's loss names the set), and the nodes
   * that may still exist (all but `gone`'s; none when their session is gone) are deleted once it
   * has heard. Lost while a release waits for the holder's requests, it is recorded for the
   * release to report.
   */
  #lose(reason: LockError, gone: Part | 'all' | undefined): void {
    if (!this.#watching) return;
    const holding = this.phase === 'held';
    this.#lossReason = this.request.locks
      ? new LockError('LOCK_LOST', `${reason.message} (one of locks ${this.request.name})`, { cause: reason })
      : reason;
    this.#stopHolding();
    const left = gone === 'all' ? [] : this.parts.filter((part) => part !== gone);
    let told: void | Promise<void> = undefined;
    if (holding) {
      this.#endHold('lost');
      this.end({ kind: 'lost', error: lossReport(this.request.name, this.#lossReason) });
      told = this.#told;
    }
    if (left.length === 0) return;
    void whenTold([told])
      .then(() => deleteParts(this.engine.store, left))
      .catch(() => {});
  }

  /** Tells a newly attached stream where this request stands; a waiting one after a new count. */
  async report(listener: RequestListener): Promise<void> {
    if (this.#untoldEnd) {
      const news = this.#untoldEnd;
      this.#untoldEnd = undefined;
      this.session.forgetRequest(this);
      void listener.tell(this.id, this.request, news);
      return;
    }
    if (queued(this.phase) && this.ahead === undefined) {
      // Not counted yet (it may wait for its turn among the session's work): wait for its first news.
      await (this.firstNews ??= withResolvers()).promise;
    }
    if (queued(this.phase)) {
      const counted =
        this.phase === 'waiting' && this.request.waitTimeoutMs !== 0 && (await recount(this.parts));
      // Not counted: granted or ended meanwhile (told as it happened), or the store is out of reach.
      if (!counted && queued(this.phase) && this.ahead !== undefined && this.session.isAttached(listener))
        void listener.tell(this.id, this.request, { kind: 'waiting', ahead: this.ahead });
    } else if (this.phase === 'held' || this.phase === 'releasing') {
      this.#tellHeld(listener);
    }
  }

  /** Tells `listener` the request holds, and whether it is in doubt or asked back. */
  #tellHeld(listener: RequestListener): void {
    void listener.tell(this.id, this.request, { kind: 'granted', lease: this });
    if (!this.storeSession!.confirmed)
      void listener.tell(this.id, this.request, { kind: 'confirmation', confirmed: false });
    const revoke = this.#revocation?.request;
    if (revoke) this.#tellRevoke(listener, revoke);
  }

  /** The holder is asked to release (again, when a deadline escalates the request). */
  #revokeRequested(revoke: RevokeRequest): void {
    const listener = this.session.listener;
    if (listener && this.phase === 'held') this.#tellRevoke(listener, revoke);
  }

  /**
   * Tells `listener` the holder is asked to release, once per stream and request: a resumed
   * stream hears it in the report of where the request stands, and the node may tell the same
   * request again as it is read (a session taken over from another instance).
   */
  #tellRevoke(listener: RequestListener, revoke: RevokeRequest): void {
    if (this.#revokeTold?.listener === listener && this.#revokeTold.revoke === revoke) return;
    this.#revokeTold = { listener, revoke };
    void listener.tell(this.id, this.request, { kind: 'revoke-requested', revoke });
  }

  /** The client lets the request go: withdrawn if it has not held, released if it holds. */
  release(how: LetGo): void {
    if (this.#letGo) return;
    this.#letGo = how;
    if (queued(this.phase))
      this.withdraw(this.#refusal ?? notAcquired(this.request.name, how, this.session.streamNoun));
    else if (this.phase === 'held') this.#releaseHold();
  }

  /**
   * Publishes `value` for the held lock (in every node of a multi-lock), then tells the stream
   * `value-published`. Sent while the request waits, or malformed, it ends the request with
   * that error (releasing what it holds). After the client let the request go it is ignored.
   */
  setValue(value: Uint8Array, early: string): void {
    this.#fromHolder(
      early,
      () => {
        const tooLarge = valueSizeProblem(value);
        if (tooLarge) throw tooLarge;
        return writeValue(this.engine.store, this.parts, value, (otherwise) =>
          this.#throwUnlessHeld(otherwise),
        );
      },
      { kind: 'value-published' },
    );
  }

  /**
   * Turns the WRITE hold into a READ hold in one step, then tells the stream `downgraded`;
   * otherwise as setValue. The node is replaced by a READ node with the same place in the
   * queue and the same record and token, so no writer or reader changes places in between
   * (see replaceWithReadNode); a downgraded hold's is a no-op. Refused (NOT_HELD) for a MUTEX or
   * READ hold and a multi-lock, UNSUPPORTED on a store that cannot replace a node atomically.
   */
  downgrade(early: string): void {
    this.#fromHolder(early, () => this.#downgrade(), { kind: 'downgraded' });
  }

  async #downgrade(): Promise<void> {
    this.#throwUnlessHeld();
    const part = this.parts[0]!;
    if (this.request.locks) {
      throw new LockError(
        'NOT_HELD',
        `locks ${this.request.name} are held as one multi-lock: a downgrade applies to a single WRITE lock`,
      );
    }
    if (part.mode === 'read' && this.request.mode === 'write') return;
    if (part.mode !== 'write') throw notDowngradable(this.request.name, part.mode);
    const replaced = await replaceWithRead(this, part, this.storeSession!, () => this.#throwUnlessHeld());
    if (replaced) return;
    // The node is gone (deleted by a forced revocation, or with the session).
    this.#lose(nodeGone(this.request.name), part);
    this.#throwUnlessHeld();
  }

  #throwUnlessHeld(otherwise?: LockError): void {
    if (this.#lossReason) throw this.#lossReason;
    if (this.phase !== 'held' && this.phase !== 'releasing') {
      throw new LockError('NOT_HELD', `lock "${this.request.name}" is not held: it was released`);
    }
    if (otherwise) throw otherwise;
  }

  /**
   * A holder's request, applied once the ones sent before it are done, then acknowledged on
   * the stream that sent it only (after a resume the client sends again what was not
   * acknowledged, and counts one acknowledgement per message it sent). Sent while waiting
   * (`early` says why that is refused) or refused, it ends the request.
   */
  #fromHolder(early: string, apply: () => Promise<void>, done: RequestNews): void {
    if (this.#letGo || this.phase === 'ended') return;
    if (queued(this.phase)) {
      this.#refuse(new LockError('NOT_HELD', `lock "${this.request.name}": ${early}`));
      return;
    }
    if (this.phase !== 'held') return;
    const sender = this.session.listener;
    this.#holderRequests = (this.#holderRequests ?? Promise.resolve()).then(apply).then(
      () => {
        if (sender && this.session.isAttached(sender)) void sender.tell(this.id, this.request, done);
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
    if (this.phase === 'ended') return Promise.resolve();
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
    if (this.phase === 'ended') return;
    this.#untoldEnd = undefined;
    this.#letGo ??= 'cancel';
    this.endWait();
    this.#endHold('released');
    if (this.phase !== 'pending' && queued(this.phase)) {
      this.withdraw(HANDED_OVER);
    } else {
      this.#stopHolding();
      this.phase = 'ended';
    }
    this.session.forgetRequest(this);
    this.#done?.resolve();
  }

  /** The session ends: withdraw or release without telling anyone. Never rejects. */
  async abandon(reason: LockError): Promise<void> {
    this.#untoldEnd = undefined;
    if (this.phase === 'ended') return;
    this.#letGo ??= 'cancel';
    if (queued(this.phase)) this.withdraw(reason);
    else this.#releaseHold();
    await this.closeWithSession();
  }

  /** Releases the hold: once the holder's requests sent before are done, its nodes are deleted. */
  #releaseHold(): void {
    if (this.phase !== 'held') return;
    this.phase = 'releasing';
    const remove = (): Promise<void> =>
      this.session.storeWork(() => {
        if (this.#lossReason) return Promise.reject(this.#lossReason);
        this.#deleting = true;
        this.#stopHolding();
        return deleteNodes(this.engine.store, this.parts);
      });
    // What the client published before it let go is published (and acknowledged) first.
    const released = this.#holderRequests ? this.#holderRequests.then(remove) : remove();
    released.then(
      () => {
        this.#endHold('released');
        const how = this.#letGo;
        if (this.#grantUntold && how) {
          const why = this.#refusal ?? notAcquired(this.request.name, how, this.session.streamNoun);
          this.end({ kind: 'ended', error: why });
        } else if (how === 'cancel') {
          this.end({ kind: 'ended', error: this.#refusal ?? cancelledHold(this.request.name) });
        } else {
          this.tell({ kind: 'released', lease: this });
          this.end({ kind: 'ended', error: undefined });
        }
      },
      (error: unknown) => {
        this.#endHold('lost');
        const why = isLockError(error, 'LOCK_LOST') ? lossReport(this.request.name, error) : error;
        this.end({ kind: 'ended', error: why });
      },
    );
  }

  /** The one end of a request: tells the attached stream, or keeps the news for the next one. */
  protected end(news: RequestNews): void {
    if (this.phase === 'ended') return;
    this.phase = 'ended';
    clearTimeout(this.deadline);
    const listener = this.session.listener;
    if (listener) {
      this.session.forgetRequest(this);
      this.#told = listener.tell(this.id, this.request, news);
    } else if (this.session.ended) {
      this.session.forgetRequest(this);
    } else {
      this.#untoldEnd = news;
    }
    this.firstNews?.resolve();
    this.#done?.resolve();
  }
}
