/*
 * One lock request's way through the engine, as one state machine (Acquisition): its nodes created,
 * their turn waited for in each lock's queue, and the lease handed over; or its nodes deleted when
 * it fails or is withdrawn.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { LockError } from '../lock-error.js';
import {
  AS_TOLD,
  baseName,
  joinPath,
  parentPath,
  type CoordinationStore,
  type CreatedNode,
  type NodeReplacement,
  type OwnedNode,
  type SequentialEntry,
  type StoreSession,
} from '../stores/store.js';
import { LockRequestNode } from './lease.js';
import type { LocalQueue, QueueListener } from './local-queue.js';
import { HANDED_OVER, nodeVanished } from './loss-reasons.js';
import {
  Withdrawal,
  type AcquireRequest,
  type Lease,
  type PlaceCounter,
  type QueuePlace,
  type RequestOptions,
  type RequestTag,
} from './lock-request.js';
import { MultiLease } from './multi-lease.js';
import { nodePrefix, parseNodeName } from './lock-nodes.js';
import { requestRecords } from './lock-nodes.js';
import { disagreement, releaseFreesWatchers, type HeldPosition, type Position } from './queue-position.js';
import type { QueueWaits } from './local-queue.js';
import { semaphoreShapeOf } from './request-validation.js';
import type { SemaphoreWakeup, SemaphoreWakeups } from './semaphore-wakeups.js';
import type { SessionDependents } from './session-dependents.js';

/** What an Acquisition needs of its engine (one object per engine). */
export interface AcquisitionEngine {
  readonly store: CoordinationStore;
  /** How a downgrade replaces a node, where the store can. */
  readonly replacement: NodeReplacement | undefined;
  readonly logger: Logger;
  /** Identifies this server in lock nodes. */
  readonly instanceId: string;
  readonly semaphores: SemaphoreWakeups;
  readonly waits: QueueWaits;
  readonly dependents: SessionDependents;
  /** The store path of a lock's queue. */
  lockPath(name: string): string;
  /** Deletes a withdrawn request's node; never rejects. */
  withdraw(path: string): Promise<void>;
}

/** Told how a request of the engine goes: its place while it waits, then its lease or why it has none. */
export interface AcquireListener extends QueueListener {
  /** The request holds; told once, and then nothing else. */
  granted(lease: Lease): void;
  /** The request ended without a lease (nothing of it stays queued); told once. */
  failed(reason: unknown): void;
}

/**
 * Where an Acquisition stands: its nodes being created (again, after its store session was
 * lost while it waited), waiting for their turn, giving up (its nodes being deleted), and over:
 * granted or failed.
 */
type Phase = 'creating' | 'waiting' | 'giving-up' | 'granted' | 'failed';

/**
 * One request in the engine, from its call to its lease or its end, as one state machine with
 * one phase: creates its nodes (a multi-lock's in one transaction), waits for their turn, and
 * hands the lease to its listener; on any failure or withdrawal deletes its nodes first. A
 * request whose store session was lost while it waited queues again on the new one.
 *
 * The wait is the recipe's loop: each lock of the request (a Part; one, or a multi-lock's
 * several) either holds, or waits for the deletion of the one node that blocks it (a semaphore
 * request: for what its SemaphoreWake names) and lists again. Every kind of news (a listing, a
 * deletion, a semaphore wake-up, the session vouched for again) goes through `#step` into one
 * decision, `#decide`: the request is granted once every part's turn has come on a session the
 * store vouches for. A state machine told by callbacks, not a suspended async function with a
 * promise chain: thousands wait at once, and each keeps what its steps need in fields.
 */
export class Acquisition implements PlaceCounter {
  readonly #engine: AcquisitionEngine;
  readonly #request: AcquireRequest;
  readonly #listener: AcquireListener;
  readonly #place: QueuePlace | undefined;
  readonly #tag: RequestTag | undefined;
  /** Withdrawn by the caller or, with a wait timeout, by the deadline (see withDeadline). */
  readonly #stop: Withdrawal;
  /** When the request was made (ms): its records say so, again if it queues again. */
  readonly #since = Date.now();
  /** Nodes another instance made (see LockEngine.adopt): a lost session ends the request. */
  readonly #adopted: boolean;
  #phase: Phase = 'creating';
  #parts: readonly Part[] = [];
  #session: StoreSession | undefined;
  /** What the withdrawal and a node's vanishing call, while the request waits. */
  readonly #failed = (reason: unknown): void => this.#giveUp(reason);
  /** Stops waiting for the session to be vouched for again, while the request does. */
  #cancelConfirmationWait: (() => void) | undefined;

  constructor(
    engine: AcquisitionEngine,
    request: AcquireRequest,
    options: RequestOptions,
    listener: AcquireListener,
    adopted: boolean,
  ) {
    this.#engine = engine;
    this.#request = request;
    this.#listener = listener;
    this.#place = options.place;
    this.#tag = options.tag;
    this.#adopted = adopted;
    this.#stop = withDeadline(request, options.withdrawal);
  }

  /**
   * Queues once: creates the request's nodes and waits for their turn. A failure before the
   * store is asked is told as any other (asynchronously).
   */
  queue(): void {
    this.#phase = 'creating';
    this.#parts = [];
    try {
      const data = this.#records();
      const targets = this.#targets();
      // Mapped, not pushed to: a waiter keeps `parts`, and a pushed-to empty array has seventeen slots.
      const made = targets.map((target, i) => this.#part(target, i, data[i] ?? data[0]!));
      this.#parts = made.map(({ part }) => part);
      const written = data.map((record) => record.byteLength);
      this.#engine.store.create(made.map(({ entry }) => entry)).then(
        (created) => this.#created(created, written),
        (error: unknown) => this.#createFailed(error),
      );
    } catch (error) {
      this.#createFailed(error);
    }
  }

  /**
   * Carries on from nodes that exist already (see LockEngine.adopt), in the request's order:
   * each node's follow is armed first, then its queue listed (what the listing misses, the
   * follow tells); whatever a node's record says now (a revocation, perhaps) is news here.
   */
  adopt(nodes: readonly OwnedNode[]): void {
    const { store, replacement, semaphores, dependents } = this.#engine;
    const targets = this.#targets();
    this.#parts = nodes.map((owned, i): Part => {
      const target = targets[i]!;
      const shape = semaphoreShapeOf(target);
      const requestId = shape ? parseNodeName(baseName(owned.path))?.requestId : undefined;
      const wakeup = requestId === undefined ? undefined : semaphores.register(requestId);
      const node = new LockRequestNode(store, replacement, target, dependents);
      const part = new Part(this, i, target, node, wakeup, requestId);
      part.path = owned.path;
      return part;
    });
    const session = store.session;
    this.#session = session;
    Promise.all(
      nodes.map(async (owned, i): Promise<CreatedNode> => {
        const followed = await store.watchNode(owned.path, this.#parts[i]!.node.follow);
        const siblings = await store.children(parentPath(owned.path));
        return { path: owned.path, session, siblings, creationId: owned.creationId, followed };
      }),
    ).then(
      (created) =>
        this.#created(
          created,
          nodes.map(() => -1),
        ),
      (error: unknown) => this.#giveUp(error),
    );
  }

  /** The locks the request asks for: its own, or each of a multi-lock's. */
  #targets(): AcquireRequest[] {
    const request = this.#request;
    return request.locks?.map((target) => ({ ...request, ...target, locks: undefined })) ?? [request];
  }

  #createFailed(error: unknown): void {
    for (const part of this.#parts) part.node.abandon();
    this.#forget();
    this.#fail(error);
  }

  /**
   * The request's nodes exist: each part takes its node and finds where it stands; the request
   * holds at once if every part does (uncontended: no wait, nothing to undo), else waits.
   */
  #created(created: readonly CreatedNode[], written: readonly number[]): void {
    const parts = this.#parts;
    const session = created[0]!.session;
    this.#session = session;
    parts.forEach((part, i) => (part.path = created[i]!.path));
    const positions: Position[] = [];
    try {
      parts.forEach((part, i) => part.node.created(created[i]!, written[i] ?? written[0]!));
      for (const [i, part] of parts.entries()) {
        const current = this.#engine.waits.position(part.dir, created[i]!.siblings, part.me);
        if (current.kind !== 'missing' && current.head !== undefined) {
          const why = disagreement(current.head, part.me);
          if (why !== undefined)
            throw new LockError('MISMATCHED_REQUEST', `lock "${part.request.name}": ${why}`);
        }
        positions.push(current);
      }
      if (positions.every((current) => current.kind === 'held') && session.confirmed) {
        this.#stop.throwIfWithdrawn();
        session.lost.throwIfAborted();
        parts.forEach((part, i) => part.hasTurn(positions[i] as HeldPosition, created[i]!.siblings));
        this.#phase = 'waiting';
        this.#grant();
        return;
      }
    } catch (error) {
      this.#phase = 'waiting';
      this.#giveUp(error);
      return;
    }
    this.#wait(positions, created);
  }

  /** Starts the wait: listens for the withdrawal and each node's vanishing, and takes each part's first step. */
  #wait(positions: readonly Position[], created: readonly CreatedNode[]): void {
    this.#phase = 'waiting';
    if (!this.#stop.listen(this.#failed)) return;
    const parts = this.#parts;
    for (const part of parts) {
      part.node.setVanishedListener(this.#failed);
      if (this.#phase !== 'waiting') return;
    }
    const { waits } = this.#engine;
    const request = this.#request;
    for (const [i, part] of parts.entries()) {
      const current = positions[i]!;
      part.queue = waits.join(part.dir);
      if (current.kind === 'waiting' && current.ahead > waits.maxWaitersPerLock) {
        this.#giveUp(
          new LockError(
            'RESOURCE_EXHAUSTED',
            `lock "${part.request.name}" has ${current.ahead} requests ahead; this server allows ${waits.maxWaitersPerLock}`,
          ),
        );
        return;
      }
      // Told its place now and whenever it changes (a try never waits, so it is never told);
      // `place` may ask for a recount meanwhile (see recount).
      if (request.waitTimeoutMs !== 0) {
        part.queue.wait(part.me, part, part.request.mode === 'semaphore');
        part.told = true;
      }
    }
    if (request.waitTimeoutMs !== 0) this.#place?.bind(this);
    for (const [i, part] of parts.entries()) {
      if (this.#phase !== 'waiting') return;
      this.#step(part, positions[i]!, created[i]!.siblings);
    }
  }

  /** Whether news of `part` still counts: the request waits, and the part is its own (not of a wait given up). */
  #current(part: Part): boolean {
    return this.#phase === 'waiting' && this.#parts[part.index] === part && part.turn === undefined;
  }

  /** One step of a part's wait, from where it stands in a listing of its queue. */
  #step(part: Part, current: Position, children: readonly string[]): void {
    part.cancelStep = undefined;
    if (!this.#current(part)) return;
    const request = part.request;
    if (current.kind === 'missing') {
      this.#giveUp(nodeVanished(request.name));
      return;
    }
    if (current.kind === 'held') {
      part.hasTurn(current, children);
      this.#endPartWait(part);
      this.#decide();
      return;
    }
    if (request.waitTimeoutMs === 0) {
      this.#giveUp(
        new LockError(
          'TIMEOUT',
          `lock "${request.name}" is not free (${current.ahead} ahead) and wait_timeout is 0`,
        ),
      );
      return;
    }
    part.queue!.report(part.me, current.ahead);
    if (!this.#current(part)) return;
    if (current.wake) {
      this.#awaitSemaphoreWake(part, current.wake);
      return;
    }
    // The listing is not kept while the deletion is awaited: a grant on the deletion alone
    // (see #predecessorGone) tells no successor (only a listing names one), and any other
    // step lists again.
    this.#awaitDeletion(part, joinPath(part.dir, current.predecessor), current.heldOncePredecessorGoes);
  }

  /**
   * The one grant decision: the request holds once every part's turn has come, on a session
   * the store vouches for (never grant on one it cannot: it may already be lost).
   */
  #decide(): void {
    if (this.#phase !== 'waiting' || this.#cancelConfirmationWait) return;
    for (const part of this.#parts) if (part.turn === undefined) return;
    const session = this.#session!;
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

  #awaitDeletion(part: Part, predecessor: string, heldOnceItGoes: boolean): void {
    const { store, waits } = this.#engine;
    const { released } = waits;
    released.awaiting(predecessor);
    part.awaited = predecessor;
    part.heldOnceAwaitedGoes = heldOnceItGoes;
    const cancel = store.onceDeleted(predecessor, part.deleted);
    // Unless the store answered at once (the node was gone): then nothing is left to cancel.
    if (part.awaited === predecessor) part.cancelDeletion = cancel;
  }

  /** Stops awaiting a deletion, if one is awaited; returns whether it alone grants the part (see #predecessorGone). */
  #stopAwaitingDeletion(part: Part): boolean {
    const predecessor = part.awaited;
    if (predecessor === undefined) return false;
    const { released } = this.#engine.waits;
    const clear = part.heldOnceAwaitedGoes || released.released(predecessor);
    released.stopAwaiting(predecessor);
    part.awaited = undefined;
    part.cancelDeletion = undefined;
    return clear;
  }

  /** Told by the store: the node `part` awaits was deleted (or could not be watched: `error`). */
  predecessorDeleted(part: Part, error?: LockError): void {
    if (part.awaited === undefined) return;
    const clear = this.#stopAwaitingDeletion(part);
    // Decided after the events delivered with this one: a session's close deletes its nodes
    // in one go, and the deletion of our own node may come right behind our predecessor's.
    // A grant the deletion alone decides waits one turn more, for the releasing holder's own
    // continuation (it is counted, and told `released`, a few promise turns after the
    // deletion), so that every record of the lock reads release, then grant.
    if (clear) setImmediate(() => this.#predecessorGone(part, clear, error));
    else queueMicrotask(() => this.#predecessorGone(part, clear, error));
  }

  /**
   * Nothing that blocked the part is left ahead when the predecessor's deletion alone grants
   * it (see heldOncePredecessorGoes), or when it was a holder of this server whose release
   * frees its watchers (see releaseFreesWatchers), released just now (`clear`): its turn has
   * come, no listing needed. Its node still exists: its watch, armed since it was created,
   * would have fired first otherwise (a store reports a session's watch events in order).
   */
  #predecessorGone(part: Part, clear: boolean, error?: LockError): void {
    if (!this.#current(part)) return;
    if (error) this.#giveUp(error);
    else if (clear) this.#step(part, { kind: 'held', ahead: 0, head: undefined }, []);
    else this.#list(part);
  }

  /** A semaphore: released weight, or a grant ahead, may let the part in; list again to know. */
  #awaitSemaphoreWake(part: Part, wake: NonNullable<Extract<Position, { kind: 'waiting' }>['wake']>): void {
    const stopped = new AbortController();
    part.cancelStep = () => stopped.abort();
    this.#engine.waits.semaphores.wait(part.dir, wake, part.wakeup!, stopped.signal).then(
      (told) => {
        if (stopped.signal.aborted) return;
        if (told) this.#relisted(part, told);
        else this.#list(part);
      },
      (error: unknown) => {
        if (!stopped.signal.aborted) this.#giveUp(error);
      },
    );
  }

  /** Lists the part's queue, and takes the next step from where it stands in it. */
  #list(part: Part): void {
    // Only the wait's end stops a listing in flight: its answer is then ignored.
    this.#engine.store.children(part.dir, AS_TOLD).then(
      (children) => this.#relisted(part, children),
      (error: unknown) => {
        if (this.#current(part)) this.#giveUp(error);
      },
    );
  }

  #relisted(part: Part, children: readonly string[]): void {
    if (!this.#current(part)) return;
    this.#step(part, this.#engine.waits.position(part.dir, children, part.me), children);
  }

  /** For the request's QueuePlace: counts it again now (see LocalQueue.recount). */
  async recount(): Promise<boolean> {
    const counting = this.#parts.filter((part) => part.told).map((part) => part.queue!.recount(part.me));
    return (await Promise.all(counting)).some(Boolean);
  }

  /** A part's place changed: the request is told the sum of its parts' places. */
  placeChanged(): void {
    let ahead = 0;
    for (const part of this.#parts) ahead += part.ahead;
    this.#listener.queued(ahead);
  }

  /** Every part's turn came: hands each lock out, and the lease to the listener. */
  #grant(): void {
    this.#stopWaiting();
    let lease: Lease;
    try {
      const nodes = this.#parts.map((part) => this.#handOut(part));
      lease = this.#request.locks ? new MultiLease(this.#request.name, nodes, this.#engine.store) : nodes[0]!;
    } catch (error) {
      this.#giveUp(error);
      return;
    }
    this.#phase = 'granted';
    this.#forget();
    endDeadline(this.#stop);
    this.#listener.granted(lease);
  }

  /**
   * Hands out one lock whose turn came. A semaphore request may have a waiter right behind it
   * that waits for this grant: it is told (see SemaphoreWakeups).
   */
  #handOut(part: Part): LockRequestNode {
    const { node, turn } = part;
    const { waits, semaphores } = this.#engine;
    node.hold(releaseFreesWatchers(part.request.mode) ? waits.released : undefined);
    if (turn!.current.successor !== undefined)
      semaphores.granted(part.path, turn!.current.successor, turn!.children);
    return node;
  }

  /** Undoes everything the wait set up: its listeners, each part's wait, and the place. */
  #stopWaiting(): void {
    this.#stop.unlisten(this.#failed);
    this.#cancelConfirmationWait?.();
    this.#cancelConfirmationWait = undefined;
    for (const part of this.#parts) {
      part.node.setVanishedListener(undefined);
      this.#endPartWait(part);
    }
    if (this.#request.waitTimeoutMs !== 0) this.#place?.bind(undefined);
  }

  #endPartWait(part: Part): void {
    const cancelDeletion = part.cancelDeletion;
    this.#stopAwaitingDeletion(part);
    cancelDeletion?.();
    part.cancelStep?.();
    part.cancelStep = undefined;
    const queue = part.queue;
    if (!queue) return;
    part.queue = undefined;
    if (part.told) {
      part.told = false;
      queue.unwait(part.me);
    }
    this.#engine.waits.leave(part.dir, queue);
  }

  /**
   * The wait failed: the nodes are deleted (unless their session took them, or the request
   * was handed over to another instance, which keeps them), then the request queues again if
   * only its session ended, or fails.
   */
  #giveUp(error: unknown): void {
    // From `creating` too: adopted nodes whose follow or listing failed.
    if (this.#phase !== 'waiting' && this.#phase !== 'creating') return;
    this.#phase = 'giving-up';
    this.#stopWaiting();
    const parts = this.#parts;
    const session = this.#session!;
    const stop = this.#stop;
    for (const part of parts) part.node.abandon();
    const after = (): void => {
      this.#forget();
      // Asked after the withdrawal: a closed session deletes its nodes before the store hears
      // that the session is over, so a waiter may see its node vanish first.
      if (!session.lost.aborted || stop.withdrawn) {
        this.#fail(stop.withdrawn ? stop.reason : error);
      } else if (this.#adopted) {
        // A taken-over session is not replaced: nothing is queued again.
        this.#fail(
          new LockError(
            'LOCK_LOST',
            `lock "${this.#request.name}": its taken-over session ended while it waited`,
          ),
        );
      } else {
        // The session (and with it our place in the queue) ended while we waited: queue again
        // on the new session rather than fail a caller who held nothing.
        this.#engine.logger.debug({ lock: this.#request.name }, 'session lost while waiting; queuing again');
        this.queue();
      }
    };
    if (!session.lost.aborted && stop.reason !== HANDED_OVER) {
      void Promise.all(parts.map((part) => this.#engine.withdraw(part.path))).then(after);
    } else {
      after();
    }
  }

  /** Ends the request without a lease; its listener hears of it after what is under way now. */
  #fail(reason: unknown): void {
    if (this.#phase === 'granted' || this.#phase === 'failed') return;
    this.#phase = 'failed';
    endDeadline(this.#stop);
    queueMicrotask(() => this.#listener.failed(reason));
  }

  #forget(): void {
    for (const part of this.#parts) {
      if (part.requestId !== undefined) this.#engine.semaphores.forget(part.requestId);
    }
  }

  /**
   * One lock of a request, before its node is created, and what the store is asked to create
   * for it (kept apart: a waiter keeps its part, not the node's record).
   */
  #part(request: AcquireRequest, index: number, data: Buffer): { part: Part; entry: SequentialEntry } {
    const { store, replacement, semaphores, dependents } = this.#engine;
    const shape = semaphoreShapeOf(request);
    const requestId = randomUUID();
    // Known here before its node exists: a grant ahead that lists the node finds it local.
    const wakeup = shape ? semaphores.register(requestId) : undefined;
    const node = new LockRequestNode(store, replacement, request, dependents);
    const entry = {
      dir: this.#engine.lockPath(request.name),
      prefix: nodePrefix(request.mode, requestId, shape),
      data,
      follow: node.follow,
    };
    // Only a semaphore part keeps its request id (a string of a dozen joined pieces, as
    // randomUUID makes it): nothing else needs it once the node's prefix is written.
    const part = new Part(this, index, request, node, wakeup, shape ? requestId : undefined);
    return { part, entry };
  }

  /** What the request's nodes record (see requestRecords). */
  #records(): Buffer[] {
    const since = new Date(this.#since).toISOString();
    return requestRecords(this.#request, { server: this.#engine.instanceId, since, tag: this.#tag });
  }
}

/**
 * One lock of a request (a multi-lock has several) and where its wait stands: its node, its
 * queue, what it awaits. Plain state of its Acquisition, which alone acts on it: a part has no
 * phase of its own (its wait is live while the request waits and its turn has not come).
 */
class Part implements QueueListener {
  readonly #owner: Acquisition;
  /** Its place among the request's parts. */
  readonly index: number;
  readonly request: AcquireRequest;
  readonly node: LockRequestNode;
  /** A semaphore request's wake-up, and the request id it is registered under. */
  readonly wakeup: SemaphoreWakeup | undefined;
  readonly requestId: string | undefined;
  /** Its node's path, once created (or adopted); its queue's path, and its node's name there. */
  #path = '';
  dir = '';
  me = '';
  /** The queue joined (see QueueWaits.join), while the part waits. */
  queue: LocalQueue | undefined;
  /** Told its place (LocalQueue.wait), while the part waits. */
  told = false;
  /** Its requests ahead, as last told. */
  ahead = 0;
  /** Where it stands once its turn came. */
  turn: { readonly current: HeldPosition; readonly children: readonly string[] } | undefined;
  /** While a deletion is awaited: its path, whether it alone grants the part, and how to stop the watch. */
  awaited: string | undefined;
  heldOnceAwaitedGoes = false;
  cancelDeletion: (() => void) | undefined;
  /** Stops the step awaited now, for the rarer steps (a semaphore wake-up). */
  cancelStep: (() => void) | undefined;
  /** What the store calls once the node awaited is deleted. */
  readonly deleted = (error?: LockError): void => this.#owner.predecessorDeleted(this, error);

  constructor(
    owner: Acquisition,
    index: number,
    request: AcquireRequest,
    node: LockRequestNode,
    wakeup: SemaphoreWakeup | undefined,
    requestId: string | undefined,
  ) {
    this.#owner = owner;
    this.index = index;
    this.request = request;
    this.node = node;
    this.wakeup = wakeup;
    this.requestId = requestId;
  }

  get path(): string {
    return this.#path;
  }

  set path(path: string) {
    this.#path = path;
    this.dir = parentPath(path);
    this.me = baseName(path);
  }

  /** Its turn came, at `current` in `children`. */
  hasTurn(current: HeldPosition, children: readonly string[]): void {
    this.turn = { current, children };
    this.ahead = 0;
  }

  /** QueueListener: its place changed. */
  queued(ahead: number): void {
    this.ahead = ahead;
    this.#owner.placeChanged();
  }
}

/**
 * A withdrawal of the engine's own for a request with a wait timeout: it follows the caller's,
 * and comes by itself when the timeout passes.
 */
class Deadline extends Withdrawal {
  readonly #timer: NodeJS.Timeout;
  readonly #unlink: () => void;

  constructor(request: AcquireRequest, withdrawal: Withdrawal, ms: number) {
    super();
    this.#unlink = withdrawal.onWithdrawn((reason) => this.withdraw(reason));
    this.#timer = setTimeout(() => {
      const what = request.locks ? `locks ${request.name} were` : `lock "${request.name}" was`;
      this.withdraw(new LockError('TIMEOUT', `${what} not acquired within ${ms} ms`));
    }, ms);
  }

  end(): void {
    clearTimeout(this.#timer);
    this.#unlink();
  }
}

/**
 * What stops a request: the caller's withdrawal itself, or with a wait timeout, a Deadline that
 * follows it (a timer only where a deadline is); `endDeadline` once the request is over.
 */
function withDeadline(request: AcquireRequest, withdrawal: Withdrawal): Withdrawal {
  const ms = request.waitTimeoutMs;
  return ms === undefined || ms === 0 ? withdrawal : new Deadline(request, withdrawal, ms);
}

/** The request that `stop` (from withDeadline) stops is over: its timer, if any, goes. */
function endDeadline(stop: Withdrawal): void {
  if (stop instanceof Deadline) stop.end();
}
