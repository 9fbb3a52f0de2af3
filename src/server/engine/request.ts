/*
 * One lock request, whichever RPC or caller made it (LockRequest): its one state machine, with
 * one phase from its arrival to its end — its turn, its nodes made, its wait, the one grant
 * decision, its hold (loss, revocation, a value, a downgrade), its release, and what its client
 * is told. Each part's wait (the recipe's loop) is request-wait.ts's, the store work on its
 * nodes request-nodes.ts's.
 */
import { isLockError, LockError } from '../lock-error.js';
import { ELECTED_EARLY_DELAY_MS, plantedBug } from '../planted-bugs.js';
import { withResolvers } from '../../common/deferred.js';
import type { CreatedNode, OwnedNode, StoreSession } from '../stores/store.js';
import {
  cancelledHold,
  HANDED_OVER,
  lockLost,
  lossReport,
  nodeGone,
  nodeVanished,
  notAcquired,
  whenTold,
} from './loss-reasons.js';
import {
  heldRequests,
  type AcquireRequest,
  type HeldLock,
  type LockMode,
  type RevokeRequest,
} from './lock-request.js';
import type { HeldPosition, Position } from './queue-position.js';
import type { LetGo, RequestListener, RequestNews, RequestSession } from './request-news.js';
import { notDowngradable, validateRequest, valueSizeProblem } from './request-validation.js';
import {
  adoptedParts,
  deleteNodes,
  deleteParts,
  newParts,
  readAdopted,
  replaceWithRead,
  takeNodes,
  unfollow,
  writeValue,
} from './request-nodes.js';
import {
  aheadOf,
  endWait,
  firstPositions,
  forgetParts,
  handOut,
  recount,
  startWaits,
  type Part,
  type PartOwner,
  type RequestEngine,
} from './request-wait.js';
import { HeldRevocation } from './revocation.js';
import type { SessionDependent } from './session-dependents.js';

/**
 * Where a request stands:
 * - `pending`: made, waiting for its turn among its session's store work;
 * - `creating`: its nodes being created (again, after its store session was lost while it
 *   waited), or an adopted request's nodes being read;
 * - `waiting`: its nodes wait for their turn;
 * - `withdrawing`: it gives up: its nodes are being deleted, or its failure is being told;
 * - `held`, then `releasing`: its lock is held, then being released;
 * - `ended`: over, told or kept for the next stream (lost is an end).
 */
export type RequestPhase =
  'pending' | 'creating' | 'waiting' | 'withdrawing' | 'held' | 'releasing' | 'ended';

/** Whether a request in `phase` has not held yet (and so is withdrawn, not released, when let go). */
export function queued(phase: RequestPhase): boolean {
  return phase === 'pending' || phase === 'creating' || phase === 'waiting' || phase === 'withdrawing';
}

/**
 * One lock request, from its arrival to its end, as one state machine with one phase (see
 * RequestPhase) and one end path (`end`). Its lock (or a multi-lock's locks, each a Part) is
 * queued for when its turn among its session's store work comes (`takeTurn`), waited for,
 * held, and released or lost. Every kind of news of its wait (a listing, a deletion, a
 * semaphore wake-up) comes back through `turnCame` or `giveUp`, and the grant is decided in one
 * place, `decide`; a withdrawal (the client's, the wait timeout's, a handover's) and a vanished
 * node are inputs to it. Its nodes' news (a change, a deletion) and its store session's (doubt,
 * loss) mean what the phase says: a vanished node ends a wait, or loses a hold. A request whose
 * store session was lost while it waited queues again on the new one.
 *
 * A state machine told by callbacks, not a suspended async function with a promise chain:
 * thousands wait at once, and each keeps what its steps need in fields.
 */
export class LockRequest implements PartOwner, SessionDependent, HeldLock {
  readonly id: number;
  readonly request: AcquireRequest;
  readonly engine: RequestEngine;
  readonly #session: RequestSession;
  #phase: RequestPhase = 'pending';
  #parts: readonly Part[] = [];
  /** The store session its nodes live in, once created; whether it is told of it (see SessionDependents). */
  #storeSession: StoreSession | undefined;
  #inStoreSession = false;
  /** The nodes of a request another instance made, until it is started (see LockEngine.adopt). */
  #adopted: readonly OwnedNode[] | undefined;
  /** Made from another instance's nodes: a lost store session ends it (it is not queued again). */
  readonly #fromAdoption: boolean;
  /** Set once withdrawn while queued (by its client, its deadline, its session's move), with why. */
  #withdrawn = false;
  #withdrawnBy: unknown;
  /** Why a node of it vanished while its nodes were being created. */
  #vanished: LockError | undefined;
  #deadline: NodeJS.Timeout | undefined;
  /** Stops waiting for the store session to be vouched for again, while the request does. */
  #cancelConfirmationWait: (() => void) | undefined;
  /** When its turn among the session's work came (epoch ms): its records say so. */
  #madeAt = 0;
  /** When the request was made, until it is granted; then when it was granted. */
  #since: number;
  /** Which count of the session's accounting the request is in. */
  #counted: 'waiting' | 'holding' | undefined = 'waiting';
  /** Frees the request's slot among the session's store work; dropped once called. */
  #workDone: (() => void) | undefined;
  #ahead: number | undefined;
  /** Data its nodes were seen with while it queued: read once it holds (a revocation, perhaps). */
  #changedWhileQueued: Array<{ part: Part; data: Uint8Array }> | undefined;
  /** Resolves once a request not started yet has its first news; made only for a resume that waits for it. */
  #firstNews: { promise: Promise<void>; resolve: () => void } | undefined;

  // The hold's.
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
  /** A try's stream was half-closed before its answer: released once it has it (see `release`). */
  #closeOnceAnswered = false;
  /** Granted after the client had withdrawn it: released without a word of the grant. */
  #grantUntold = false;
  /**
   * Whether its holder may be told it holds: at once for a lock; for a candidate once its term
   * is recorded in the election's history (see recordTerm), so that no leader is ever told of a
   * term that observers cannot see.
   */
  #tellable: boolean;
  /** Set once ended while no stream was attached: told to the next stream that attaches. */
  #untoldEnd: RequestNews | undefined;
  /** Resolves once the request has ended; made only for a session that waits for it. */
  #done: { promise: Promise<void>; resolve: () => void } | undefined;
  /** Set when the request ended with a loss: resolves once the client has it. */
  #told: void | Promise<void> = undefined;
  /** The revocation request last told, and to which stream (see tellRevoke). */
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
    this.#since = performance.now();
    this.#tellable = request.mode !== 'candidate';
    session.accounting.waiting(request.mode);
  }

  /** PartOwner: whether news of its parts' waits counts now. */
  get waiting(): boolean {
    return this.#phase === 'waiting';
  }

  get parts(): readonly Part[] {
    return this.#parts;
  }

  /**
   * Its turn among the session's store work has come: validates it, then creates its nodes (or
   * reads the adopted ones) and waits for their turn. `workDone` is called once its first store
   * work is over: it waits in the queue, holds, or has ended.
   */
  takeTurn(workDone: () => void): void {
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
      this.fail(error);
      return;
    }
    this.armDeadline();
    if (adopted) this.adopt(adopted);
    else this.queue();
  }

  /** With a wait timeout, the request withdraws itself when it passes. */
  private armDeadline(): void {
    const ms = this.request.waitTimeoutMs;
    if (ms === undefined || ms === 0) return;
    this.#deadline = setTimeout(() => {
      const { request } = this;
      const what = request.locks ? `locks ${request.name} were` : `lock "${request.name}" was`;
      this.withdraw(new LockError('TIMEOUT', `${what} not acquired within ${ms} ms`));
    }, ms);
  }

  /** Creates the request's nodes (a multi-lock's in one transaction), once, and waits for their turn. */
  private queue(): void {
    this.#phase = 'creating';
    this.#parts = [];
    this.#vanished = undefined;
    try {
      if (this.request.mode === 'candidate') this.engine.elections.checkSupported();
      const made = newParts(this.request, this, this.#madeAt, {
        tag: this.#session.tag(this.id),
        heartbeatMs: this.#session.heartbeatMs,
      });
      this.#parts = made.parts;
      this.engine.store.createNodes(made.entries).then(
        (created) => this.created(created, made.written),
        (error: unknown) => this.createFailed(error),
      );
    } catch (error) {
      this.createFailed(error);
    }
  }

  /** Carries on from nodes that exist already (see LockEngine.adopt). */
  private adopt(nodes: readonly OwnedNode[]): void {
    const { store } = this.engine;
    this.#parts = adoptedParts(this, this.request, nodes);
    this.#storeSession = store.session;
    readAdopted(store, this.#parts, nodes).then(
      (created) =>
        this.created(
          created,
          nodes.map(() => -1),
        ),
      (error: unknown) => this.giveUp(error),
    );
  }

  private createFailed(error: unknown): void {
    unfollow(this.#parts);
    forgetParts(this.#parts);
    this.fail(error);
  }

  /**
   * The request's nodes exist: it is told of their store session from now on, and holds at
   * once if every part does on a session the store vouches for (uncontended: no wait, nothing
   * to undo), else waits.
   */
  private created(created: readonly CreatedNode[], written: readonly number[]): void {
    const session = created[0]!.session;
    this.#storeSession = session;
    if (!session.lost.aborted) {
      this.engine.dependents.add(session, this);
      this.#inStoreSession = true;
    }
    let positions: Position[];
    try {
      takeNodes(this.#parts, created, written, this.#vanished);
      positions = firstPositions(this, created);
    } catch (error) {
      this.#phase = 'waiting';
      this.giveUp(error);
      return;
    }
    this.#phase = 'waiting';
    if (positions.every((current) => current.kind === 'held') && session.confirmed) {
      this.#parts.forEach((part, i) => part.hasTurn(positions[i] as HeldPosition, created[i]!.siblings));
      this.decide();
      return;
    }
    const gone = this.#withdrawn ? this.#withdrawnBy : this.#vanished;
    if (gone !== undefined) {
      this.giveUp(gone);
      return;
    }
    startWaits(this, positions, created);
  }

  /** PartOwner: a part's turn came. */
  turnCame(): void {
    this.decide();
  }

  /**
   * The one grant decision: the request holds once every part's turn has come, on a session
   * the store vouches for (never grant on one it cannot: it may already be lost), unless it
   * was withdrawn, or a node of it vanished, meanwhile.
   */
  private decide(): void {
    if (this.#phase !== 'waiting' || this.#cancelConfirmationWait) return;
    for (const part of this.#parts) if (part.turn === undefined) return;
    const session = this.#storeSession!;
    if (this.#withdrawn || this.#vanished || session.lost.aborted) {
      this.giveUp(this.#withdrawn ? this.#withdrawnBy : (this.#vanished ?? (session.lost.reason as unknown)));
      return;
    }
    if (session.confirmed) {
      this.grant();
      return;
    }
    const unsubscribe = session.onConfirmedChange((confirmed) => {
      if (confirmed === false) return;
      unsubscribe();
      this.#cancelConfirmationWait = undefined;
      queueMicrotask(() => this.decide());
    });
    this.#cancelConfirmationWait = unsubscribe;
  }

  /** Every part's turn came: hands each lock out, and holds (see `held`). */
  private grant(): void {
    this.stopWaiting();
    for (const part of this.#parts) handOut(part);
    forgetParts(this.#parts);
    clearTimeout(this.#deadline);
    this.firstWorkDone();
    this.endWait();
    const now = performance.now();
    this.#session.accounting.granted(this.request.mode, now - this.#since, heldRequests(this.request, this));
    this.#counted = 'holding';
    this.#since = now;
    this.#phase = 'held';
    // What its nodes were seen with while it waited (a revocation, perhaps) is news now.
    const changed = this.#changedWhileQueued;
    if (changed) {
      this.#changedWhileQueued = undefined;
      for (const { part, data } of changed) this.nodeData(part, data);
    }
    this.held();
  }

  /** Undoes everything the wait set up: the confirmation wait and each part's wait. */
  private stopWaiting(): void {
    this.#cancelConfirmationWait?.();
    this.#cancelConfirmationWait = undefined;
    for (const part of this.#parts) endWait(part);
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
    this.stopWaiting();
    this.leaveStoreSession();
    const parts = this.#parts;
    const session = this.#storeSession!;
    unfollow(parts);
    this.#changedWhileQueued = undefined;
    const after = (): void => {
      forgetParts(parts);
      // Asked after the withdrawal: a closed session deletes its nodes before the store hears
      // that the session is over, so a waiter may see its node vanish first.
      if (!session.lost.aborted || this.#withdrawn) {
        this.fail(this.#withdrawn ? this.#withdrawnBy : error);
      } else if (this.#fromAdoption) {
        // A taken-over session is not replaced: nothing is queued again.
        this.fail(
          new LockError(
            'LOCK_LOST',
            `lock "${this.request.name}": its taken-over session ended while it waited`,
          ),
        );
      } else {
        // The session (and with it our place in the queue) ended while we waited: queue again
        // on the new session rather than fail a caller who held nothing.
        this.engine.logger.debug({ lock: this.request.name }, 'session lost while waiting; queuing again');
        this.queue();
      }
    };
    if (!session.lost.aborted && this.#withdrawnBy !== HANDED_OVER) {
      void Promise.all(parts.map((part) => this.engine.withdraw(part.path))).then(after);
    } else {
      after();
    }
  }

  /** Ends the request without a lease, told after what is under way now. */
  private fail(reason: unknown): void {
    this.#phase = 'withdrawing';
    clearTimeout(this.#deadline);
    queueMicrotask(() => {
      this.firstWorkDone();
      this.endWait();
      this.#session.accounting.notGranted(this.request.mode, reason);
      this.end({ kind: 'ended', error: reason });
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
    if (this.#phase === 'pending') {
      this.endWait();
      this.#session.accounting.notGranted(this.request.mode, reason);
      this.end({ kind: 'ended', error: reason });
    } else if (this.#phase === 'waiting') {
      this.giveUp(reason);
    }
  }

  /** PartOwner: a part's place changed; the request is told the sum of its parts' places. */
  placeChanged(): void {
    this.firstWorkDone();
    const ahead = aheadOf(this.#parts);
    this.#ahead = ahead;
    this.tell({ kind: 'waiting', ahead });
  }

  /** The request's first store work is over (it waits, holds, or has ended): its turn's slot is free. */
  private firstWorkDone(): void {
    const workDone = this.#workDone;
    this.#workDone = undefined;
    workDone?.();
    this.#firstNews?.resolve();
    this.#firstNews = undefined;
  }

  private endWait(): void {
    if (this.#counted !== 'waiting') return;
    this.#counted = undefined;
    this.#session.accounting.waitEnded(this.request.mode);
  }

  /** PartOwner: a part's node changed (or was read); kept until the request holds, then news of the hold. */
  nodeData(part: Part, data: Uint8Array): void {
    if (this.#phase === 'creating' || this.#phase === 'waiting')
      (this.#changedWhileQueued ??= []).push({ part, data });
    else this.heldNodeData(part, data);
  }

  /** PartOwner: a part's node was deleted: a wait ends, a hold is lost. */
  nodeDeleted(part: Part): void {
    if (queued(this.#phase)) this.nodeVanished(nodeVanished(part.request.name));
    else this.heldNodeDeleted(part);
  }

  /** SessionDependent: the store session is lost, and with it every node of the request. */
  sessionLost(): void {
    this.#inStoreSession = false;
    const reason = this.#storeSession!.lost.reason as unknown;
    if (queued(this.#phase)) this.nodeVanished(reason as LockError);
    else this.heldSessionLost(reason);
  }

  /** News of the hold: a node of it was deleted. */
  /** SessionDependent: the store session fell in doubt or is vouched for again (news of a hold). */

  /** A node vanished before the request held: its wait ends (a create in flight learns why). */
  private nodeVanished(reason: LockError): void {
    if (this.#phase === 'waiting') this.giveUp(reason);
    else if (this.#phase === 'creating') this.#vanished ??= reason;
  }

  private leaveStoreSession(): void {
    if (!this.#inStoreSession) return;
    this.#inStoreSession = false;
    this.engine.dependents.remove(this.#storeSession!, this);
  }

  private tell(news: RequestNews): void {
    void this.#session.listener?.tell(this.id, this.request, news);
  }

  /** Whether the request has ended, or the client asked it to. */
  get letGo(): boolean {
    return this.#phase === 'ended' || this.#letGo !== undefined;
  }

  get ended(): boolean {
    return this.#phase === 'ended';
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

  private endHold(outcome: 'released' | 'lost'): void {
    if (this.#counted !== 'holding') return;
    this.#counted = undefined;
    const heldMs = performance.now() - this.#since;
    this.#session.accounting.holdEnded(this.request.mode, outcome, heldMs, heldRequests(this.request, this));
  }

  /**
   * The request holds now (see grant): the client is told, unless it let go meanwhile; a
   * candidate once its term is recorded.
   */
  private held(): void {
    if (!this.#tellable) {
      this.recordTerm();
      return;
    }
    if (this.#letGo) {
      // Withdrawn in the same moment as it was granted: the client never hears of the grant,
      // and the request ends as a withdrawal does.
      this.#grantUntold = true;
      this.releaseHold();
      return;
    }
    const listener = this.#session.listener;
    if (listener && this.#phase === 'held') this.tellHeld(listener);
    if (this.#closeOnceAnswered) this.release('close');
  }

  /**
   * A candidate's grant begins a term: recorded in the election's history (in one step with a
   * check that its node is still there), then told. A node gone meanwhile ends the hold through
   * its deletion, as a loss; a record that cannot be written loses the hold.
   */
  private recordTerm(): void {
    const part = this.parts[0]!;
    if (plantedBug === 'elected-early') {
      // The planted bug (planted-bugs.ts): told first, recorded later, if its node is still there.
      this.#tellable = true;
      this.held();
      setTimeout(() => {
        this.engine.elections.begin(this.request.name, part.token, part.path, this.request).catch(() => {});
      }, ELECTED_EARLY_DELAY_MS);
      return;
    }
    const decidedAt = performance.now();
    this.engine.elections.begin(this.request.name, part.token, part.path, this.request).then(
      (recorded) => {
        if (recorded === 'recorded') this.#session.accounting.termBegan(performance.now() - decidedAt);
        if (this.#phase !== 'held' || recorded === 'gone') return;
        this.#tellable = true;
        this.held();
      },
      (error: unknown) => {
        if (this.#phase !== 'held') return;
        const why = error instanceof LockError ? error.message : String(error);
        this.lose(
          new LockError(
            'LOCK_LOST',
            `election "${this.request.name}": its term could not be recorded: ${why}`,
          ),
          undefined,
        );
      },
    );
  }

  // What the store tells of the hold (see nodeData).

  /** A part's node changed (or was read): once held, a revocation may be in it. */
  private heldNodeData(part: Part, data: Uint8Array): void {
    if (!this.watching) return;
    const revocation = (this.#revocation ??= new HeldRevocation(
      (revoke) => this.forced(revoke),
      (revoke) => this.revokeRequested(revoke),
    ));
    const told = revocation.request;
    revocation.seen(data);
    if (revocation.request !== told) this.#revokedPart = part;
  }

  /** A part's node was deleted while held: the hold is lost. */
  private heldNodeDeleted(part: Part): void {
    const session = this.#storeSession!;
    if (session.lost.aborted) {
      this.lose(lockLost(part.request.name, session.lost.reason), 'all');
      return;
    }
    const revoked = this.#revocation?.request;
    const why = revoked
      ? `lock "${part.request.name}" was revoked: ${revoked.reason || 'no reason given'}`
      : `lock "${part.request.name}" was lost: its node was deleted by someone else`;
    this.lose(new LockError('LOCK_LOST', why), part);
  }

  /** The store session is lost while held: so is the hold. */
  private heldSessionLost(reason: unknown): void {
    this.lose(lockLost(this.request.name, reason), 'all');
  }

  /** SessionDependent: the holder hears of the session's doubt. */
  confirmationChanged(confirmed: boolean): void {
    if (this.#phase === 'held' && this.#tellable) this.tell({ kind: 'confirmation', confirmed });
  }

  /**
   * Whether the hold still watches its nodes: while held, and while a release waits for the
   * holder's requests before its delete (a loss or a deadline then still counts).
   */
  private get watching(): boolean {
    return this.#phase === 'held' || (this.#phase === 'releasing' && !this.#deleting);
  }

  /** The hold's watching ends: no more revocations, store session news or node news. */
  private stopHolding(): void {
    this.#revocation?.stop();
    this.leaveStoreSession();
    unfollow(this.parts);
  }

  /**
   * A revocation's deadline passed while held: the lock is lost, and nobody else may wait on a
   * holder that was told to go, so its nodes are deleted as soon as the holder has heard it lost
   * the lock (it must hear before anyone is granted it).
   */
  private forced(revoke: RevokeRequest): void {
    const name = this.#revokedPart?.request.name ?? this.request.name;
    this.lose(
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
  private lose(reason: LockError, gone: Part | 'all' | undefined): void {
    if (!this.watching) return;
    const holding = this.#phase === 'held';
    this.#lossReason = this.request.locks
      ? new LockError('LOCK_LOST', `${reason.message} (one of locks ${this.request.name})`, { cause: reason })
      : reason;
    this.stopHolding();
    const left = gone === 'all' ? [] : this.parts.filter((part) => part !== gone);
    let told: void | Promise<void> = undefined;
    if (holding) {
      this.endHold('lost');
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
        this.#phase === 'waiting' && this.request.waitTimeoutMs !== 0 && (await recount(this.parts));
      // Not counted: granted or ended meanwhile (told as it happened), or the store is out of reach.
      if (!counted && queued(this.#phase) && this.#ahead !== undefined && this.#session.isAttached(listener))
        void listener.tell(this.id, this.request, { kind: 'waiting', ahead: this.#ahead });
    } else if ((this.#phase === 'held' || this.#phase === 'releasing') && this.#tellable) {
      this.tellHeld(listener);
    }
  }

  /** Tells `listener` the request holds, and whether it is in doubt or asked back. */
  private tellHeld(listener: RequestListener): void {
    void listener.tell(this.id, this.request, { kind: 'granted', lease: this });
    if (!this.#storeSession!.confirmed)
      void listener.tell(this.id, this.request, { kind: 'confirmation', confirmed: false });
    const revoke = this.#revocation?.request;
    if (revoke) this.tellRevoke(listener, revoke);
  }

  /** The holder is asked to release (again, when a deadline escalates the request). */
  private revokeRequested(revoke: RevokeRequest): void {
    const listener = this.#session.listener;
    if (listener && this.#phase === 'held' && this.#tellable) this.tellRevoke(listener, revoke);
  }

  /**
   * Tells `listener` the holder is asked to release, once per stream and request: a resumed
   * stream hears it in the report of where the request stands, and the node may tell the same
   * request again as it is read (a session taken over from another instance).
   */
  private tellRevoke(listener: RequestListener, revoke: RevokeRequest): void {
    if (this.#revokeTold?.listener === listener && this.#revokeTold.revoke === revoke) return;
    this.#revokeTold = { listener, revoke };
    void listener.tell(this.id, this.request, { kind: 'revoke-requested', revoke });
  }

  /** The client lets the request go: withdrawn if it has not held, released if it holds. */
  release(how: LetGo): void {
    if (this.#letGo) return;
    // A try (wait_timeout 0) whose stream is half-closed before its answer still gets it, as
    // it would had the half-close come a moment later: not free (TIMEOUT), or granted and then
    // released by the half-close. On every store alike, however long the store takes to answer.
    if (
      how === 'close' &&
      this.request.waitTimeoutMs === 0 &&
      queued(this.#phase) &&
      this.#phase !== 'withdrawing'
    ) {
      this.#closeOnceAnswered = true;
      return;
    }
    this.#letGo = how;
    if (queued(this.#phase))
      this.withdraw(this.#refusal ?? notAcquired(this.request.name, how, this.#session.streamNoun));
    else if (this.#phase === 'held') {
      // A candidate whose term is still being recorded never hears of it: it withdrew.
      if (!this.#tellable) this.#grantUntold = true;
      this.releaseHold();
    }
  }

  /**
   * Publishes `value` for the held lock (in every node of a multi-lock), then tells the stream
   * `value-published`. Sent while the request waits, or malformed, it ends the request with
   * that error (releasing what it holds). After the client let the request go it is ignored.
   */
  setValue(value: Uint8Array, early: string): void {
    this.fromHolder(
      early,
      () => {
        const tooLarge = valueSizeProblem(value);
        if (tooLarge) throw tooLarge;
        return writeValue(this.engine.store, this.parts, value, (otherwise) =>
          this.throwUnlessHeld(otherwise),
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
    this.fromHolder(early, () => this.downgradeHold(), { kind: 'downgraded' });
  }

  private async downgradeHold(): Promise<void> {
    this.throwUnlessHeld();
    const part = this.parts[0]!;
    if (this.request.locks) {
      throw new LockError(
        'NOT_HELD',
        `locks ${this.request.name} are held as one multi-lock: a downgrade applies to a single WRITE lock`,
      );
    }
    if (part.mode === 'read' && this.request.mode === 'write') return;
    if (part.mode !== 'write') throw notDowngradable(this.request.name, part.mode);
    const replaced = await replaceWithRead(this, part, this.#storeSession!, () => this.throwUnlessHeld());
    if (replaced) return;
    // The node is gone (deleted by a forced revocation, or with the session).
    this.lose(nodeGone(this.request.name), part);
    this.throwUnlessHeld();
  }

  private throwUnlessHeld(otherwise?: LockError): void {
    if (this.#lossReason) throw this.#lossReason;
    if (this.#phase !== 'held' && this.#phase !== 'releasing') {
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
  private fromHolder(early: string, apply: () => Promise<void>, done: RequestNews): void {
    if (this.#letGo || this.#phase === 'ended') return;
    if (queued(this.#phase)) {
      this.refuse(new LockError('NOT_HELD', `lock "${this.request.name}": ${early}`));
      return;
    }
    if (this.#phase !== 'held') return;
    const sender = this.#session.listener;
    this.#holderRequests = (this.#holderRequests ?? Promise.resolve()).then(apply).then(
      () => {
        if (sender && this.#session.isAttached(sender)) void sender.tell(this.id, this.request, done);
      },
      (error: unknown) => {
        // A lost lock ends the request through its loss; anything else ends it here.
        if (!isLockError(error, 'LOCK_LOST')) this.refuse(error);
      },
    );
  }

  private refuse(error: unknown): void {
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
    this.endWait();
    this.endHold('released');
    if (this.#phase !== 'pending' && queued(this.#phase)) {
      this.withdraw(HANDED_OVER);
    } else {
      this.stopHolding();
      this.#phase = 'ended';
    }
    this.#session.forgetRequest(this);
    this.#done?.resolve();
  }

  /** The session ends: withdraw or release without telling anyone. Never rejects. */
  async abandon(reason: LockError): Promise<void> {
    this.#untoldEnd = undefined;
    if (this.#phase === 'ended') return;
    this.#letGo ??= 'cancel';
    if (queued(this.#phase)) this.withdraw(reason);
    else this.releaseHold();
    await this.closeWithSession();
  }

  /** Releases the hold: once the holder's requests sent before are done, its nodes are deleted. */
  private releaseHold(): void {
    if (this.#phase !== 'held') return;
    this.#phase = 'releasing';
    const remove = (): Promise<void> =>
      this.#session.storeWork(() => {
        if (this.#lossReason) return Promise.reject(this.#lossReason);
        this.#deleting = true;
        this.stopHolding();
        return deleteNodes(this.engine.store, this.parts);
      });
    // What the client published before it let go is published (and acknowledged) first.
    const released = this.#holderRequests ? this.#holderRequests.then(remove) : remove();
    released.then(
      () => {
        this.endHold('released');
        const how = this.#letGo;
        if (this.#grantUntold && how) {
          const why = this.#refusal ?? notAcquired(this.request.name, how, this.#session.streamNoun);
          this.end({ kind: 'ended', error: why });
        } else if (how === 'cancel') {
          this.end({ kind: 'ended', error: this.#refusal ?? cancelledHold(this.request.name) });
        } else {
          this.tell({ kind: 'released', lease: this });
          this.end({ kind: 'ended', error: undefined });
        }
      },
      (error: unknown) => {
        this.endHold('lost');
        const why = isLockError(error, 'LOCK_LOST') ? lossReport(this.request.name, error) : error;
        this.end({ kind: 'ended', error: why });
      },
    );
  }

  /** The one end of a request: tells the attached stream, or keeps the news for the next one. */
  private end(news: RequestNews): void {
    if (this.#phase === 'ended') return;
    this.#phase = 'ended';
    clearTimeout(this.#deadline);
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
