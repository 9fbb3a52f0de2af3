/*
 * One lock request, whichever RPC or caller made it (LockRequest): one state machine with one
 * phase from its arrival to its end — its nodes created, its turn waited for, held, released or
 * lost — and its news told to the session it belongs to.
 */
import { isLockError, LockError } from '../lock-error.js';
import { withResolvers } from '../../common/deferred.js';
import type { CreatedNode, OwnedNode, StoreSession } from '../stores/store.js';
import { cancelledHold, HANDED_OVER, lossReport, notAcquired } from './loss-reasons.js';
import {
  heldRequests,
  type AcquireRequest,
  type Lease,
  type LeaseHolder,
  type RevokeRequest,
} from './lock-request.js';
import { MultiLease } from './multi-lease.js';
import type { HeldPosition, Position } from './queue-position.js';
import type { LetGo, RequestListener, RequestNews, RequestSession } from './request-news.js';
import { validateRequest } from './request-validation.js';
import {
  adoptedParts,
  aheadOf,
  endWait,
  firstPositions,
  forgetParts,
  handOut,
  newParts,
  readAdopted,
  recount,
  startWaits,
  type Part,
  type RequestEngine,
  type WaitingRequest,
} from './request-wait.js';

/**
 * Where a request stands:
 * - `pending`: made, waiting for its turn among its session's store work;
 * - `creating`: its nodes being created (again, after its store session was lost while it
 *   waited), or an adopted request's nodes being read;
 * - `waiting`: its nodes wait for their turn;
 * - `withdrawing`: it gives up: its nodes are being deleted, or its failure is being told;
 * - `held`, then `releasing`: its lease is held, then being released;
 * - `ended`: over, told or kept for the next stream (lost is an end).
 */
export type RequestPhase =
  'pending' | 'creating' | 'waiting' | 'withdrawing' | 'held' | 'releasing' | 'ended';

/** Whether a request in `phase` has not held yet (and so is withdrawn, not released, when let go). */
function queued(phase: RequestPhase): boolean {
  return phase === 'pending' || phase === 'creating' || phase === 'waiting' || phase === 'withdrawing';
}

/**
 * One lock request, from its arrival to its end, as one state machine with one phase (see
 * RequestPhase) and one end path (`#end`). Its wait in the store is request-wait.ts's, whose
 * every kind of news (a listing, a deletion, a semaphore wake-up) comes back here through
 * `turnCame` or `giveUp`; the grant is decided in one place, `#decide`: every part's turn has
 * come, on a store session that the store vouches for, for a request nobody withdrew. A request
 * whose store session was lost while it waited queues again on the new one. Once held, its
 * lease tells it of loss, doubt and revocation (LeaseHolder).
 *
 * A state machine told by callbacks, not a suspended async function with a promise chain:
 * thousands wait at once, and each keeps what its steps need in fields.
 */
export class LockRequest implements WaitingRequest, LeaseHolder {
  readonly id: number;
  readonly request: AcquireRequest;
  readonly engine: RequestEngine;
  readonly #session: RequestSession;
  #phase: RequestPhase = 'pending';
  #parts: readonly Part[] = [];
  /** The store session its nodes live in, once created. */
  #storeSession: StoreSession | undefined;
  /** The nodes of a request another instance made, until it is started (see LockEngine.adopt). */
  #adopted: readonly OwnedNode[] | undefined;
  /** Made from another instance's nodes: a lost store session ends it (it is not queued again). */
  readonly #fromAdoption: boolean;
  /** Set once withdrawn while queued (by its client, its deadline, its session's move), with why. */
  #withdrawn = false;
  #withdrawnBy: unknown;
  #deadline: NodeJS.Timeout | undefined;
  /** Stops waiting for the store session to be vouched for again, while the request does. */
  #cancelConfirmationWait: (() => void) | undefined;
  /** What a node's vanishing calls while the request waits. */
  readonly #vanished = (reason: unknown): void => this.giveUp(reason);
  /** When its turn among the session's work came (epoch ms): its records say so. */
  #madeAt = 0;
  /** When the request was made, until it is granted; then when it was granted. */
  #since = performance.now();
  /** Which count of the session's accounting the request is in. */
  #counted: 'waiting' | 'holding' | undefined = 'waiting';
  /** Frees the request's slot among the session's store work; dropped once called. */
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

  constructor(
    engine: RequestEngine,
    session: RequestSession,
    id: number,
    request: AcquireRequest,
    adopted?: readonly OwnedNode[],
  ) {
    this.engine = engine;
    this.#session = session;
    this.id = id;
    this.request = request;
    this.#adopted = adopted;
    this.#fromAdoption = adopted !== undefined;
    session.accounting.waiting(request.mode);
  }

  get phase(): RequestPhase {
    return this.#phase;
  }

  /** WaitingRequest: whether news of its parts counts now. */
  get waiting(): boolean {
    return this.#phase === 'waiting';
  }

  get parts(): readonly Part[] {
    return this.#parts;
  }

  /** Whether the request has ended, or the client asked it to. */
  get letGo(): boolean {
    return this.#phase === 'ended' || this.#letGo !== undefined;
  }

  get ended(): boolean {
    return this.#phase === 'ended';
  }

  /**
   * Its turn among the session's store work has come: validates it, then creates its nodes (or
   * reads the adopted ones) and waits for their turn. `workDone` is called once its first store
   * work is over: it waits in the queue, holds, or has ended.
   */
  start(workDone: () => void): void {
    if (this.#phase !== 'pending') {
      workDone();
      return;
    }
    this.#workDone = workDone;
    this.#madeAt = Date.now();
    const adopted = this.#adopted;
    this.#adopted = undefined;
    this.#phase = 'creating';
    try {
      if (!adopted) validateRequest(this.request);
    } catch (error) {
      this.#fail(error);
      return;
    }
    this.#armDeadline();
    if (adopted) this.#adopt(adopted);
    else this.#queue();
  }

  /** With a wait timeout, the request withdraws itself when it passes. */
  #armDeadline(): void {
    const ms = this.request.waitTimeoutMs;
    if (ms === undefined || ms === 0) return;
    this.#deadline = setTimeout(() => {
      const { request } = this;
      const what = request.locks ? `locks ${request.name} were` : `lock "${request.name}" was`;
      this.withdraw(new LockError('TIMEOUT', `${what} not acquired within ${ms} ms`));
    }, ms);
  }

  #clearDeadline(): void {
    clearTimeout(this.#deadline);
    this.#deadline = undefined;
  }

  /** Creates the request's nodes (a multi-lock's in one transaction), once, and waits for their turn. */
  #queue(): void {
    this.#phase = 'creating';
    this.#parts = [];
    try {
      const { parts, entries, written } = newParts(this, this.#madeAt, this.#session.tag(this.id));
      this.#parts = parts;
      this.engine.store.create(entries).then(
        (created) => this.#created(created, written),
        (error: unknown) => this.#createFailed(error),
      );
    } catch (error) {
      this.#createFailed(error);
    }
  }

  /** Carries on from nodes that exist already (see LockEngine.adopt). */
  #adopt(nodes: readonly OwnedNode[]): void {
    const { store } = this.engine;
    this.#parts = adoptedParts(this, nodes);
    this.#storeSession = store.session;
    readAdopted(store, this.#parts, nodes).then(
      (created) =>
        this.#created(
          created,
          nodes.map(() => -1),
        ),
      (error: unknown) => this.giveUp(error),
    );
  }

  #createFailed(error: unknown): void {
    for (const part of this.#parts) part.node.abandon();
    forgetParts(this.#parts);
    this.#fail(error);
  }

  /**
   * The request's nodes exist: it holds at once if every part does on a session the store
   * vouches for (uncontended: no wait, nothing to undo), else waits.
   */
  #created(created: readonly CreatedNode[], written: readonly number[]): void {
    const session = created[0]!.session;
    this.#storeSession = session;
    let positions: Position[];
    try {
      positions = firstPositions(this, created, written);
    } catch (error) {
      this.#phase = 'waiting';
      this.giveUp(error);
      return;
    }
    if (positions.every((current) => current.kind === 'held') && session.confirmed) {
      this.#parts.forEach((part, i) => part.hasTurn(positions[i] as HeldPosition, created[i]!.siblings));
      this.#phase = 'waiting';
      this.#decide();
      return;
    }
    this.#phase = 'waiting';
    if (this.#withdrawn) {
      this.giveUp(this.#withdrawnBy);
      return;
    }
    for (const part of this.#parts) {
      part.node.setVanishedListener(this.#vanished);
      if (this.#phase !== 'waiting') return;
    }
    startWaits(this, positions, created);
  }

  /** WaitingRequest: a part's turn came. */
  turnCame(): void {
    this.#decide();
  }

  /**
   * The one grant decision: the request holds once every part's turn has come, on a session
   * the store vouches for (never grant on one it cannot: it may already be lost), unless it
   * was withdrawn meanwhile.
   */
  #decide(): void {
    if (this.#phase !== 'waiting' || this.#cancelConfirmationWait) return;
    for (const part of this.#parts) if (part.turn === undefined) return;
    const session = this.#storeSession!;
    if (this.#withdrawn || session.lost.aborted) {
      this.giveUp(this.#withdrawn ? this.#withdrawnBy : session.lost.reason);
      return;
    }
    if (session.confirmed) {
      this.#grant();
      return;
    }
    const unsubscribe = session.onConfirmedChange((confirmed) => {
      if (!confirmed) return;
      unsubscribe();
      this.#cancelConfirmationWait = undefined;
      queueMicrotask(() => this.#decide());
    });
    this.#cancelConfirmationWait = unsubscribe;
  }

  /** Every part's turn came: hands each lock out, and holds the lease. */
  #grant(): void {
    this.#stopWaiting();
    let lease: Lease;
    try {
      const nodes = this.#parts.map(handOut);
      lease = this.request.locks ? new MultiLease(this.request.name, nodes, this.engine.store) : nodes[0]!;
    } catch (error) {
      this.giveUp(error);
      return;
    }
    forgetParts(this.#parts);
    this.#clearDeadline();
    this.#firstWorkDone();
    this.#endWait();
    this.#lease = lease;
    const now = performance.now();
    this.#session.accounting.granted(this.request.mode, now - this.#since, heldRequests(this.request, lease));
    this.#counted = 'holding';
    this.#since = now;
    this.#phase = 'held';
    if (this.#session.takesLeases) {
      // An in-process caller's request (LockEngine.acquire): the lease is the caller's now.
      this.#end({ kind: 'granted', lease });
      return;
    }
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

  /** Undoes everything the wait set up: the confirmation wait, the nodes' listeners, each part's wait. */
  #stopWaiting(): void {
    this.#cancelConfirmationWait?.();
    this.#cancelConfirmationWait = undefined;
    for (const part of this.#parts) {
      part.node.setVanishedListener(undefined);
      endWait(part);
    }
  }

  /**
   * The wait failed (or was withdrawn): the nodes are deleted (unless their session took them,
   * or the request was handed over to another instance, which keeps them), then the request
   * queues again if only its store session ended, or fails.
   */
  giveUp(error: unknown): void {
    // From `creating` too: adopted nodes whose follow or listing failed.
    if (this.#phase !== 'waiting' && this.#phase !== 'creating') return;
    this.#phase = 'withdrawing';
    this.#stopWaiting();
    const parts = this.#parts;
    const session = this.#storeSession!;
    for (const part of parts) part.node.abandon();
    const after = (): void => {
      forgetParts(parts);
      // Asked after the withdrawal: a closed session deletes its nodes before the store hears
      // that the session is over, so a waiter may see its node vanish first.
      if (!session.lost.aborted || this.#withdrawn) {
        this.#fail(this.#withdrawn ? this.#withdrawnBy : error);
      } else if (this.#fromAdoption) {
        // A taken-over session is not replaced: nothing is queued again.
        this.#fail(
          new LockError(
            'LOCK_LOST',
            `lock "${this.request.name}": its taken-over session ended while it waited`,
          ),
        );
      } else {
        // The session (and with it our place in the queue) ended while we waited: queue again
        // on the new session rather than fail a caller who held nothing.
        this.engine.logger.debug({ lock: this.request.name }, 'session lost while waiting; queuing again');
        this.#queue();
      }
    };
    if (!session.lost.aborted && this.#withdrawnBy !== HANDED_OVER) {
      void Promise.all(parts.map((part) => this.engine.withdraw(part.path))).then(after);
    } else {
      after();
    }
  }

  /** Ends the request without a lease, told after what is under way now. */
  #fail(reason: unknown): void {
    this.#phase = 'withdrawing';
    this.#clearDeadline();
    queueMicrotask(() => {
      this.#firstWorkDone();
      this.#notGranted(reason);
    });
  }

  /**
   * Withdraws the request while it has not held (the first reason given stands): one not
   * started yet ends here and now, one being created gives up once its nodes exist, a waiting
   * one gives up now.
   */
  withdraw(reason: unknown): void {
    if (this.#withdrawn || !queued(this.#phase)) return;
    this.#withdrawn = true;
    this.#withdrawnBy = reason;
    if (this.#phase === 'pending') this.#notGranted(reason);
    else if (this.#phase === 'waiting') this.giveUp(reason);
  }

  /** WaitingRequest: a part's place changed; the request is told the sum of its parts' places. */
  placeChanged(): void {
    this.#firstWorkDone();
    const ahead = aheadOf(this.#parts);
    this.#ahead = ahead;
    this.#tell({ kind: 'waiting', ahead });
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

  /** Tells a newly attached stream where this request stands; a waiting one after a new count. */
  async report(listener: RequestListener): Promise<void> {
    if (this.#untoldEnd) {
      const news = this.#untoldEnd;
      this.#untoldEnd = undefined;
      this.#session.forgetRequest(this);
      void listener.tell(this.id, this.request, news);
      return;
    }
    if (queued(this.#phase) && this.#ahead === undefined) {
      // Not counted yet (it may wait for its turn among the session's work): wait for its first news.
      await (this.#firstNews ??= withResolvers()).promise;
    }
    if (queued(this.#phase)) {
      const counted =
        this.#phase === 'waiting' && this.request.waitTimeoutMs !== 0 && (await recount(this.#parts));
      // Not counted: granted or ended meanwhile (told as it happened), or the store is out of reach.
      if (!counted && queued(this.#phase) && this.#ahead !== undefined && this.#session.isAttached(listener))
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

  /** The client lets the request go: withdrawn if it has not held, released if it holds. */
  release(how: LetGo): void {
    if (this.#letGo) return;
    this.#letGo = how;
    if (queued(this.#phase))
      this.withdraw(this.#refusal ?? notAcquired(this.request.name, how, this.#session.streamNoun));
    else if (this.#phase === 'held') this.#releaseLease();
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
    if (queued(this.#phase)) {
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
    this.#endWait();
    this.#endHold('released');
    if (this.#phase === 'pending') this.#phase = 'ended';
    else if (queued(this.#phase)) this.withdraw(HANDED_OVER);
    else this.#phase = 'ended';
    this.#unfollow();
    this.#session.forgetRequest(this);
    this.#done?.resolve();
  }

  /** The session ends: withdraw or release without telling anyone. Never rejects. */
  async abandon(reason: LockError): Promise<void> {
    this.#untoldEnd = undefined;
    if (this.#phase === 'ended') return;
    this.#letGo ??= 'cancel';
    if (queued(this.#phase)) this.withdraw(reason);
    else this.#releaseLease();
    await this.closeWithSession();
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
          const how = this.#letGo;
          this.#end({
            kind: 'ended',
            error: this.#refusal ?? notAcquired(this.request.name, how, this.#session.streamNoun),
          });
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

  /** The one end of a request: tells the attached stream, or keeps the news for the next one. */
  #end(news: RequestNews): void {
    if (this.#phase === 'ended') return;
    this.#phase = 'ended';
    this.#clearDeadline();
    if (!this.#session.takesLeases) this.#unfollow();
    const listener = this.#session.listener;
    if (listener) {
      this.#session.forgetRequest(this);
      this.#told = listener.tell(this.id, this.request, news);
    } else if (this.#session.ended) {
      this.#session.forgetRequest(this);
    } else {
      this.#untoldEnd = news;
    }
    this.#firstNews?.resolve();
    this.#done?.resolve();
  }
}
