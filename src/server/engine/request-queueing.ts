/*
 * A lock request until it holds (QueueingRequest, what LockRequest is made of first): its turn
 * among its session's store work, its nodes created or adopted, its wait for their turn, the
 * one grant decision, and giving up. One object and one phase with LockRequest, which adds the
 * hold and what the client is told; this file is the part of its state machine before the grant.
 */
import { LockError } from '../lock-error.js';
import type { CreatedNode, OwnedNode, StoreSession } from '../stores/store.js';
import { HANDED_OVER, nodeVanished } from './loss-reasons.js';
import { heldRequests, type AcquireRequest, type HeldLock } from './lock-request.js';
import type { HeldPosition, Position } from './queue-position.js';
import type { RequestNews, RequestSession } from './request-news.js';
import { validateRequest } from './request-validation.js';
import { adoptedParts, newParts, readAdopted, takeNodes, unfollow } from './request-nodes.js';
import {
  aheadOf,
  endWait,
  firstPositions,
  forgetParts,
  handOut,
  startWaits,
  type Part,
  type PartOwner,
  type RequestEngine,
} from './request-wait.js';
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
 * A lock request until it holds: the first half of LockRequest's state machine (its phase is
 * this class's `phase`). Its wait in the store is request-wait.ts's, whose every kind of news
 * (a listing, a deletion, a semaphore wake-up) comes back through `turnCame` or `giveUp`; the
 * grant is decided in one place, `#decide`; a withdrawal (the client's, the wait timeout's, a
 * handover's) and a vanished node are inputs to it. A request whose store session was lost
 * while it waited queues again on the new one. Its nodes' news and its store session's end a
 * wait here, and go to the hold (`held*`) once it holds.
 */
export abstract class QueueingRequest implements PartOwner, SessionDependent, HeldLock {
  readonly id: number;
  readonly request: AcquireRequest;
  readonly engine: RequestEngine;
  protected readonly session: RequestSession;
  protected phase: RequestPhase = 'pending';
  #parts: readonly Part[] = [];
  /** The store session its nodes live in, once created; whether it is told of it (see SessionDependents). */
  protected storeSession: StoreSession | undefined;
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
  protected deadline: NodeJS.Timeout | undefined;
  /** Stops waiting for the store session to be vouched for again, while the request does. */
  #cancelConfirmationWait: (() => void) | undefined;
  /** When its turn among the session's work came (epoch ms): its records say so. */
  #madeAt = 0;
  /** When the request was made, until it is granted; then when it was granted. */
  protected since = performance.now();
  /** Which count of the session's accounting the request is in. */
  protected counted: 'waiting' | 'holding' | undefined = 'waiting';
  /** Frees the request's slot among the session's store work; dropped once called. */
  #workDone: (() => void) | undefined;
  protected ahead: number | undefined;
  /** Data its nodes were seen with while it queued: read once it holds (a revocation, perhaps). */
  #changedWhileQueued: Array<{ part: Part; data: Uint8Array }> | undefined;
  /** Resolves once a request not started yet has its first news; made only for a resume that waits for it. */
  protected firstNews: { promise: Promise<void>; resolve: () => void } | undefined;

  constructor(
    engine: RequestEngine,
    session: RequestSession,
    id: number,
    request: AcquireRequest,
    adopted?: readonly OwnedNode[],
  ) {
    this.engine = engine;
    this.session = session;
    this.id = id;
    this.request = request;
    this.#adopted = adopted;
    this.#fromAdoption = adopted !== undefined;
    session.accounting.waiting(request.mode);
  }

  /** PartOwner: whether news of its parts' waits counts now. */
  get waiting(): boolean {
    return this.phase === 'waiting';
  }

  get parts(): readonly Part[] {
    return this.#parts;
  }

  /**
   * Its turn among the session's store work has come: validates it, then creates its nodes (or
   * reads the adopted ones) and waits for their turn. `workDone` is called once its first store
   * work is over: it waits in the queue, holds, or has ended.
   */
  start(workDone: () => void): void {
    if (this.phase !== 'pending') {
      workDone();
      return;
    }
    this.#workDone = workDone;
    this.#madeAt = Date.now();
    const adopted = this.#adopted;
    this.#adopted = undefined;
    this.phase = 'creating';
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
    this.deadline = setTimeout(() => {
      const { request } = this;
      const what = request.locks ? `locks ${request.name} were` : `lock "${request.name}" was`;
      this.withdraw(new LockError('TIMEOUT', `${what} not acquired within ${ms} ms`));
    }, ms);
  }

  /** Creates the request's nodes (a multi-lock's in one transaction), once, and waits for their turn. */
  #queue(): void {
    this.phase = 'creating';
    this.#parts = [];
    this.#vanished = undefined;
    try {
      const { parts, entries, written } = newParts(
        this,
        this.request,
        this.#madeAt,
        this.session.tag(this.id),
      );
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
    this.#parts = adoptedParts(this, this.request, nodes);
    this.storeSession = store.session;
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
    unfollow(this.#parts);
    forgetParts(this.#parts);
    this.#fail(error);
  }

  /**
   * The request's nodes exist: it is told of their store session from now on, and holds at
   * once if every part does on a session the store vouches for (uncontended: no wait, nothing
   * to undo), else waits.
   */
  #created(created: readonly CreatedNode[], written: readonly number[]): void {
    const session = created[0]!.session;
    this.storeSession = session;
    if (!session.lost.aborted) {
      this.engine.dependents.add(session, this);
      this.#inStoreSession = true;
    }
    let positions: Position[];
    try {
      takeNodes(this.#parts, created, written, this.#vanished);
      positions = firstPositions(this, created);
    } catch (error) {
      this.phase = 'waiting';
      this.giveUp(error);
      return;
    }
    this.phase = 'waiting';
    if (positions.every((current) => current.kind === 'held') && session.confirmed) {
      this.#parts.forEach((part, i) => part.hasTurn(positions[i] as HeldPosition, created[i]!.siblings));
      this.#decide();
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
    this.#decide();
  }

  /**
   * The one grant decision: the request holds once every part's turn has come, on a session
   * the store vouches for (never grant on one it cannot: it may already be lost), unless it
   * was withdrawn, or a node of it vanished, meanwhile.
   */
  #decide(): void {
    if (this.phase !== 'waiting' || this.#cancelConfirmationWait) return;
    for (const part of this.#parts) if (part.turn === undefined) return;
    const session = this.storeSession!;
    if (this.#withdrawn || this.#vanished || session.lost.aborted) {
      this.giveUp(this.#withdrawn ? this.#withdrawnBy : (this.#vanished ?? (session.lost.reason as unknown)));
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

  /** Every part's turn came: hands each lock out, and holds (see `held`). */
  #grant(): void {
    this.#stopWaiting();
    for (const part of this.#parts) handOut(part);
    forgetParts(this.#parts);
    clearTimeout(this.deadline);
    this.firstWorkDone();
    this.endWait();
    const now = performance.now();
    this.session.accounting.granted(this.request.mode, now - this.since, heldRequests(this.request, this));
    this.counted = 'holding';
    this.since = now;
    this.phase = 'held';
    // What its nodes were seen with while it waited (a revocation, perhaps) is news now.
    const changed = this.#changedWhileQueued;
    if (changed) {
      this.#changedWhileQueued = undefined;
      for (const { part, data } of changed) this.nodeData(part, data);
    }
    this.held();
  }

  /** Undoes everything the wait set up: the confirmation wait and each part's wait. */
  #stopWaiting(): void {
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
    if (this.phase !== 'waiting' && this.phase !== 'creating') return;
    this.phase = 'withdrawing';
    this.#stopWaiting();
    this.leaveStoreSession();
    const parts = this.#parts;
    const session = this.storeSession!;
    unfollow(parts);
    this.#changedWhileQueued = undefined;
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
    this.phase = 'withdrawing';
    clearTimeout(this.deadline);
    queueMicrotask(() => {
      this.firstWorkDone();
      this.endWait();
      this.session.accounting.notGranted(this.request.mode, reason);
      this.end({ kind: 'ended', error: reason });
    });
  }

  /**
   * Withdraws the request while it has not held (the first reason given stands): one not
   * started yet ends here and now, one being created gives up once its nodes exist, a waiting
   * one gives up now.
   */
  withdraw(reason: unknown): void {
    if (this.#withdrawn || !queued(this.phase)) return;
    this.#withdrawn = true;
    this.#withdrawnBy = reason;
    if (this.phase === 'pending') {
      this.endWait();
      this.session.accounting.notGranted(this.request.mode, reason);
      this.end({ kind: 'ended', error: reason });
    } else if (this.phase === 'waiting') {
      this.giveUp(reason);
    }
  }

  /** PartOwner: a part's place changed; the request is told the sum of its parts' places. */
  placeChanged(): void {
    this.firstWorkDone();
    const ahead = aheadOf(this.#parts);
    this.ahead = ahead;
    this.tell({ kind: 'waiting', ahead });
  }

  /** The request's first store work is over (it waits, holds, or has ended): its turn's slot is free. */
  protected firstWorkDone(): void {
    const workDone = this.#workDone;
    this.#workDone = undefined;
    workDone?.();
    this.firstNews?.resolve();
    this.firstNews = undefined;
  }

  protected endWait(): void {
    if (this.counted !== 'waiting') return;
    this.counted = undefined;
    this.session.accounting.waitEnded(this.request.mode);
  }

  /** PartOwner: a part's node changed (or was read); kept until the request holds, then news of the hold. */
  nodeData(part: Part, data: Uint8Array): void {
    if (this.phase === 'creating' || this.phase === 'waiting')
      (this.#changedWhileQueued ??= []).push({ part, data });
    else this.heldNodeData(part, data);
  }

  /** PartOwner: a part's node was deleted: a wait ends, a hold is lost. */
  nodeDeleted(part: Part): void {
    if (queued(this.phase)) this.#nodeVanished(nodeVanished(part.request.name));
    else this.heldNodeDeleted(part);
  }

  /** SessionDependent: the store session is lost, and with it every node of the request. */
  sessionLost(): void {
    this.#inStoreSession = false;
    const reason = this.storeSession!.lost.reason as unknown;
    if (queued(this.phase)) this.#nodeVanished(reason as LockError);
    else this.heldSessionLost(reason);
  }

  /** News of the hold: its node changed (a revocation, perhaps). */
  protected abstract heldNodeData(part: Part, data: Uint8Array): void;
  /** News of the hold: a node of it was deleted. */
  protected abstract heldNodeDeleted(part: Part): void;
  /** News of the hold: its store session was lost. */
  protected abstract heldSessionLost(reason: unknown): void;
  /** SessionDependent: the store session fell in doubt or is vouched for again (news of a hold). */
  abstract confirmationChanged(confirmed: boolean): void;
  /** The request is over: `news` says how (see LockRequest#end). */
  protected abstract end(news: RequestNews): void;

  /** A node vanished before the request held: its wait ends (a create in flight learns why). */
  #nodeVanished(reason: LockError): void {
    if (this.phase === 'waiting') this.giveUp(reason);
    else if (this.phase === 'creating') this.#vanished ??= reason;
  }

  protected leaveStoreSession(): void {
    if (!this.#inStoreSession) return;
    this.#inStoreSession = false;
    this.engine.dependents.remove(this.storeSession!, this);
  }

  protected tell(news: RequestNews): void {
    void this.session.listener?.tell(this.id, this.request, news);
  }

  /** The request holds now: the rest is LockRequest's. */
  protected abstract held(): void;

  abstract readonly name: string;
  abstract readonly mode: HeldLock['mode'];
  abstract readonly fencingToken: bigint;
}
