import { LockError } from '../lock-error.js';
import { joinPath, type CoordinationStore, type StoreSession } from '../stores/store.js';
import type { LockRequestNode } from './lease.js';
import type { LocalQueue, QueueListener } from './local-queue.js';
import type { AcquireRequest, PlaceCounter, QueuePlace, Withdrawal } from './lock-request.js';
import { nodeVanished } from './loss-reasons.js';
import type { HeldPosition, Position } from './queue-position.js';
import type { ReleasedHolders } from './released-holders.js';
import type { SemaphoreWakeup, SemaphoreWakeups } from './semaphore-wakeups.js';

/** What a TurnWait needs of the waits of its engine (QueueWaits). */
export interface TurnWaits {
  readonly store: CoordinationStore;
  readonly semaphores: SemaphoreWakeups;
  /** The most requests a request may find ahead of it. */
  readonly maxWaitersPerLock: number;
  /** The holders of this engine released while waiters here watched them. */
  readonly released: ReleasedHolders;
  /** Counts a request in `dir`'s queue until it calls `leave` with the queue returned. */
  join(dir: string): LocalQueue;
  leave(dir: string, queue: LocalQueue): void;
  /** Where `me` stands in a listing of `dir`. */
  position(dir: string, children: readonly string[], me: string): Position;
}

/**
 * Who a TurnWait reports to (the engine's Acquisition, or a multi-lock's part): its place while
 * it waits, then its turn or why it ended without one. One object, not a function per event.
 */
export interface TurnOwner extends QueueListener {
  /** The turn came: hand the lock out. A throw fails the wait with what was thrown. */
  turn(current: HeldPosition, children: readonly string[]): void;
  /** The wait ended without the turn (withdrawn, its node gone, its session lost, the store failed). */
  turnFailed(reason: unknown): void;
}

/** What a TurnWait is made of: the request, where its node is, and whom it reports to. */
export interface TurnWaitParts {
  readonly request: AcquireRequest;
  readonly session: StoreSession;
  readonly node: LockRequestNode;
  readonly stop: Withdrawal;
  /** Lets the caller have the request counted again while it waits. */
  readonly place: QueuePlace | undefined;
  readonly wakeup: SemaphoreWakeup | undefined;
  /** The queue's path, and the request's node name in it. */
  readonly dir: string;
  readonly me: string;
  readonly owner: TurnOwner;
}

/**
 * One waiting request's wait for its turn, the recipe's loop as a state machine: either hold,
 * or wait for the deletion of the one node that blocks ours (a semaphore request: for what
 * SemaphoreWake names) and list again. It ends, undoing all it set up, when the request is
 * granted, withdrawn (by its caller or deadline), its node vanishes, its session is lost, or
 * the store fails; at most one step (a deletion, a listing, a confirmation) is awaited at a time.
 * A waiter lives as long as its wait, thousands at once: it listens with the two functions
 * it is made with and keeps what its steps need in fields, not in a closure per subscription.
 */
export class TurnWait implements PlaceCounter {
  readonly #waits: TurnWaits;
  readonly #parts: TurnWaitParts;
  /** The queue joined (see TurnWaits.join), until the wait ends. */
  #queue: LocalQueue | undefined;
  #ended = false;
  /** Told its place (LocalQueue.wait), until the wait ends. */
  #told = false;
  /** What the withdrawal and the node's vanishing call. */
  readonly #failed = (reason: unknown): void => this.#fail(reason);
  /** What the store calls once the node awaited is deleted (see #awaitDeletion). */
  readonly #deleted = (error?: LockError): void => this.#predecessorDeleted(error);
  /** While a deletion is awaited: its path, whether it alone grants us, and how to stop the watch. */
  #awaited: string | undefined;
  #heldOnceAwaitedGoes = false;
  #cancelDeletion: (() => void) | undefined;
  /** Stops the step awaited now, for the rarer steps (a confirmation, a semaphore wake-up). */
  #cancelStep: (() => void) | undefined;

  constructor(waits: TurnWaits, parts: TurnWaitParts) {
    this.#waits = waits;
    this.#parts = parts;
  }

  start(current: Position, children: readonly string[]): void {
    const { request, node, stop, place, dir, me, owner } = this.#parts;
    if (!stop.listen(this.#failed)) return;
    node.setVanishedListener(this.#failed);
    if (this.#ended) return;
    const queue = this.#waits.join(dir);
    this.#queue = queue;
    if (current.kind === 'waiting' && current.ahead > this.#waits.maxWaitersPerLock) {
      this.#fail(
        new LockError(
          'RESOURCE_EXHAUSTED',
          `lock "${request.name}" has ${current.ahead} requests ahead; this server allows ${this.#waits.maxWaitersPerLock}`,
        ),
      );
      return;
    }
    // Told its place now and whenever it changes (a try never waits, so it is never told);
    // `place` may ask for a recount meanwhile (see recount).
    if (request.waitTimeoutMs !== 0) {
      queue.wait(me, owner, request.mode === 'semaphore');
      place?.bind(this);
      this.#told = true;
    }
    this.#step(current, children);
  }

  /** For the request's QueuePlace: counts it again now (see LocalQueue.recount). */
  recount(): Promise<boolean> {
    return this.#queue?.recount(this.#parts.me) ?? Promise.resolve(false);
  }

  #step(current: Position, children: readonly string[]): void {
    this.#cancelStep = undefined;
    if (this.#ended) return;
    const { request, session, dir, me } = this.#parts;
    if (current.kind === 'missing') {
      this.#fail(nodeVanished(request.name));
      return;
    }
    if (current.kind === 'held') {
      // Never grant on a session the store cannot vouch for: it may already be lost.
      if (session.confirmed) {
        this.#grant(current, children);
        return;
      }
      const unsubscribe = session.onConfirmedChange((confirmed) => {
        if (!confirmed) return;
        unsubscribe();
        this.#cancelStep = undefined;
        queueMicrotask(() => this.#step(current, children));
      });
      this.#cancelStep = unsubscribe;
      return;
    }
    if (request.waitTimeoutMs === 0) {
      this.#fail(
        new LockError(
          'TIMEOUT',
          `lock "${request.name}" is not free (${current.ahead} ahead) and wait_timeout is 0`,
        ),
      );
      return;
    }
    this.#queue!.report(me, current.ahead);
    if (this.#ended) return;
    if (current.wake) {
      this.#awaitSemaphoreWake(current.wake);
      return;
    }
    // The listing is not kept while the deletion is awaited: a grant on the deletion alone
    // (see #predecessorGone) tells no successor (only a listing names one), and any other
    // step lists again.
    this.#awaitDeletion(joinPath(dir, current.predecessor), current.heldOncePredecessorGoes);
  }

  #awaitDeletion(predecessor: string, heldOnceItGoes: boolean): void {
    const { released, store } = this.#waits;
    released.awaiting(predecessor);
    this.#awaited = predecessor;
    this.#heldOnceAwaitedGoes = heldOnceItGoes;
    const cancel = store.onceDeleted(predecessor, this.#deleted);
    // Unless the store answered at once (the node was gone): then nothing is left to cancel.
    if (this.#awaited === predecessor) this.#cancelDeletion = cancel;
  }

  /** Stops awaiting a deletion, if one is awaited; returns whether it alone grants us (see #predecessorGone). */
  #stopAwaitingDeletion(): boolean {
    const predecessor = this.#awaited;
    if (predecessor === undefined) return false;
    const clear = this.#heldOnceAwaitedGoes || this.#waits.released.released(predecessor);
    this.#waits.released.stopAwaiting(predecessor);
    this.#awaited = undefined;
    this.#cancelDeletion = undefined;
    return clear;
  }

  #predecessorDeleted(error?: LockError): void {
    if (this.#awaited === undefined) return;
    const clear = this.#stopAwaitingDeletion();
    // Decided after the events delivered with this one: a session's close deletes its nodes
    // in one go, and the deletion of our own node may come right behind our predecessor's.
    // A grant the deletion alone decides waits one turn more, for the releasing holder's own
    // continuation (it is counted, and told `released`, a few promise turns after the
    // deletion), so that every record of the lock reads release, then grant.
    if (clear) setImmediate(() => this.#predecessorGone(clear, error));
    else queueMicrotask(() => this.#predecessorGone(clear, error));
  }

  /**
   * Nothing that blocked us is left ahead when the predecessor's deletion alone grants us (see
   * heldOncePredecessorGoes), or when it was a holder of this server whose release frees its
   * watchers (see releaseFreesWatchers), released just now (`clear`): we hold the lock, no
   * listing needed. Our node still exists: its watch, armed since it was created, would have
   * fired first otherwise (a store reports a session's watch events in order).
   */
  #predecessorGone(clear: boolean, error?: LockError): void {
    if (this.#ended) return;
    if (error) this.#fail(error);
    else if (clear) this.#step({ kind: 'held', ahead: 0, head: undefined }, []);
    else this.#list();
  }
  /** A semaphore: released weight, or a grant ahead, may let us in; list again to know. */
  #awaitSemaphoreWake(wake: NonNullable<Extract<Position, { kind: 'waiting' }>['wake']>): void {
    const { dir } = this.#parts;
    const stopped = new AbortController();
    this.#cancelStep = () => stopped.abort();
    this.#waits.semaphores.wait(dir, wake, this.#parts.wakeup!, stopped.signal).then(
      (told) => {
        if (stopped.signal.aborted) return;
        if (told) this.#relisted(told);
        else this.#list();
      },
      (error: unknown) => {
        if (!stopped.signal.aborted) this.#fail(error);
      },
    );
  }

  /** Lists the queue, and takes the next step from where the request stands in it. */
  #list(): void {
    // Only the wait's end stops a listing in flight: its answer is then ignored.
    this.#waits.store.children(this.#parts.dir, AS_TOLD).then(
      (children) => {
        if (!this.#ended) this.#relisted(children);
      },
      (error: unknown) => {
        if (!this.#ended) this.#fail(error);
      },
    );
  }

  #relisted(children: readonly string[]): void {
    const { dir, me } = this.#parts;
    this.#step(this.#waits.position(dir, children, me), children);
  }

  #grant(current: HeldPosition, children: readonly string[]): void {
    this.#end();
    const { owner } = this.#parts;
    try {
      owner.turn(current, children);
    } catch (error) {
      owner.turnFailed(error);
    }
  }

  #fail(reason: unknown): void {
    if (this.#ended) return;
    this.#end();
    this.#parts.owner.turnFailed(reason);
  }

  #end(): void {
    this.#ended = true;
    const { node, stop, place, dir, me } = this.#parts;
    const cancelDeletion = this.#cancelDeletion;
    this.#stopAwaitingDeletion();
    cancelDeletion?.();
    this.#cancelStep?.();
    this.#cancelStep = undefined;
    const queue = this.#queue;
    if (queue) {
      if (this.#told) {
        place?.bind(undefined);
        queue.unwait(me);
      }
      this.#waits.leave(dir, queue);
    }
    node.setVanishedListener(undefined);
    stop.unlisten(this.#failed);
  }
}

/** A waiter's listing: as told by the store's watch (see CoordinationStore.children). */
const AS_TOLD = { asTold: true } as const;
