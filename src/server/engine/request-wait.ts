/*
 * A lock request's wait for its turn: each of its locks (a Part) waits in its queue by the
 * recipe's loop — list, and await the deletion of the one node that blocks it — as functions
 * over the parts. Whether the request then holds is its own decision (LockRequest's `decide`);
 * this file only feeds it news.
 */
import type { Logger } from 'pino';
import type { ElectionHistory } from './election-history.js';
import { LockError } from '../lock-error.js';
import {
  AS_TOLD,
  baseName,
  joinPath,
  NodeFollow,
  parentPath,
  type CoordinationStore,
  type CreatedNode,
  type NodeReplacement,
  type NodeWatchHandlers,
} from '../stores/store.js';
import type { LocalQueue, QueueListener, QueueWaits, ReleasedHolders } from './local-queue.js';
import { nodeVanished } from './loss-reasons.js';
import type { AcquireRequest, LockMode } from './lock-request.js';
import { disagreement, releaseFreesWatchers, type HeldPosition, type Position } from './queue-position.js';
import type { SemaphoreWakeup, SemaphoreWakeups } from './semaphore-wakeups.js';
import type { SessionDependents } from './session-dependents.js';

/** What every request of an engine works with (one object per engine). */
export interface RequestEngine {
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
  /** The histories of elections: a candidate's grant is recorded there before it is told. */
  readonly elections: ElectionHistory;
}

/** What a part needs of its request (LockRequest), and tells it. */
export interface PartOwner {
  readonly engine: RequestEngine;
  readonly request: AcquireRequest;
  /** Whether the request waits for its turn now: news of its parts counts only then. */
  readonly waiting: boolean;
  readonly parts: readonly Part[];
  /** A part's turn came: the request decides whether it holds. */
  turnCame(): void;
  /** A part's wait failed (its node vanished, its queue could not be read, it may not wait). */
  giveUp(error: unknown): void;
  /** A part's place changed. */
  placeChanged(): void;
  /** A part's node changed (or was read): a revocation may be in it. */
  nodeData(part: Part, data: Uint8Array): void;
  /** A part's node was deleted (by someone else, with its session, or by a forced revocation). */
  nodeDeleted(part: Part): void;
}

/**
 * One lock of a request (a multi-lock has several): its node, and where its wait stands (its
 * queue, what it awaits). Plain state of its request, which alone acts on it: a part has no
 * phase of its own (its wait is live while the request waits and its turn has not come; its
 * node's news goes to the request, which acts on it by its own phase).
 */
export class Part implements QueueListener, NodeWatchHandlers {
  readonly owner: PartOwner;
  /** Its place among the request's parts. */
  readonly index: number;
  readonly request: AcquireRequest;
  /** How its lock is held: as asked, or `read` after a downgrade. */
  mode: LockMode;
  /** Its node's fencing token (its creation id), once created. */
  token = 0n;
  /** Its node's follow, handed to the store's create; a downgrade's replacement node has its own. */
  follow: NodeFollow = new NodeFollow(this);
  /** While a downgrade replaces its node: the old node's deletion is the replacement's. */
  replacing = false;
  /** Told of its release while it frees the waiters here that watch it (see handOut). */
  releasedTo: ReleasedHolders | undefined;
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
  /** What the store calls once the node awaited is deleted: made for a part's first wait (most never wait). */
  #deleted: ((error?: LockError) => void) | undefined;

  constructor(
    owner: PartOwner,
    index: number,
    request: AcquireRequest,
    wakeup: SemaphoreWakeup | undefined,
    requestId: string | undefined,
  ) {
    this.owner = owner;
    this.index = index;
    this.request = request;
    this.mode = request.mode;
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
    this.owner.placeChanged();
  }

  /** NodeWatchHandlers: its node changed (or was read). */
  onData(data: Uint8Array): void {
    this.owner.nodeData(this, data);
  }

  get deleted(): (error?: LockError) => void {
    return (this.#deleted ??= (error?: LockError): void => predecessorDeleted(this, error));
  }

  /** NodeWatchHandlers: its node was deleted (not the one a downgrade replaces). */
  onDeleted(): void {
    if (!this.replacing) this.owner.nodeDeleted(this);
  }

  /** A follow for a node that replaces its own (a downgrade's). */
  newFollow(): NodeFollow {
    return new NodeFollow(this);
  }
}

/**
 * Where each part stands in its queue's listing, once its node exists. Throws if the lock's
 * queue holds requests of another shape.
 */
export function firstPositions(owner: PartOwner, created: readonly CreatedNode[]): Position[] {
  return owner.parts.map((part, i) => {
    const current = owner.engine.waits.position(part.dir, created[i]!.siblings, part.me);
    if (current.kind !== 'missing' && current.head !== undefined) {
      const why = disagreement(current.head, part.me);
      if (why !== undefined) throw new LockError('MISMATCHED_REQUEST', `lock "${part.request.name}": ${why}`);
    }
    return current;
  });
}

/**
 * Starts each part's wait from where it stands: joins its queue (told its place from now on,
 * unless the request only tries), then takes its first step. Stops early once the request no
 * longer waits.
 */
export function startWaits(
  owner: PartOwner,
  positions: readonly Position[],
  created: readonly CreatedNode[],
): void {
  const { waits } = owner.engine;
  const request = owner.request;
  for (const [i, part] of owner.parts.entries()) {
    const current = positions[i]!;
    part.queue = waits.join(part.dir);
    if (current.kind === 'waiting' && current.ahead > waits.maxWaitersPerLock) {
      owner.giveUp(
        new LockError(
          'RESOURCE_EXHAUSTED',
          `lock "${part.request.name}" has ${current.ahead} requests ahead; this server allows ${waits.maxWaitersPerLock}`,
        ),
      );
      return;
    }
    // Told its place now and whenever it changes (a try never waits, so it is never told).
    if (request.waitTimeoutMs !== 0) {
      part.queue.wait(part.me, part, part.request.mode === 'semaphore');
      part.told = true;
    }
  }
  for (const [i, part] of owner.parts.entries()) {
    if (!owner.waiting) return;
    step(part, positions[i]!, created[i]!.siblings);
  }
}

/** Whether news of `part` still counts: its request waits, and the part is its own (not of a wait given up). */
function current(part: Part): boolean {
  const owner = part.owner;
  return owner.waiting && owner.parts[part.index] === part && part.turn === undefined;
}

/** One step of a part's wait, from where it stands in a listing of its queue. */
function step(part: Part, position: Position, children: readonly string[]): void {
  part.cancelStep = undefined;
  if (!current(part)) return;
  const { owner, request } = part;
  if (position.kind === 'missing') {
    owner.giveUp(nodeVanished(request.name));
    return;
  }
  if (position.kind === 'held') {
    part.hasTurn(position, children);
    endWait(part);
    owner.turnCame();
    return;
  }
  if (request.waitTimeoutMs === 0) {
    owner.giveUp(
      new LockError(
        'TIMEOUT',
        `lock "${request.name}" is not free (${position.ahead} ahead) and wait_timeout is 0`,
      ),
    );
    return;
  }
  part.queue!.report(part.me, position.ahead);
  if (!current(part)) return;
  if (position.wake) {
    awaitSemaphoreWake(part, position.wake);
    return;
  }
  // The listing is not kept while the deletion is awaited: a grant on the deletion alone
  // (see predecessorGone) tells no successor (only a listing names one), and any other step
  // lists again.
  awaitDeletion(part, joinPath(part.dir, position.predecessor), position.heldOncePredecessorGoes);
}

function awaitDeletion(part: Part, predecessor: string, heldOnceItGoes: boolean): void {
  const { store, waits } = part.owner.engine;
  waits.released.awaiting(predecessor);
  part.awaited = predecessor;
  part.heldOnceAwaitedGoes = heldOnceItGoes;
  const cancel = store.onceDeleted(predecessor, part.deleted);
  // Unless the store answered at once (the node was gone): then nothing is left to cancel.
  if (part.awaited === predecessor) part.cancelDeletion = cancel;
}

/** Stops awaiting a deletion, if one is awaited; returns whether it alone grants the part (see predecessorGone). */
function stopAwaitingDeletion(part: Part): boolean {
  const predecessor = part.awaited;
  if (predecessor === undefined) return false;
  const { released } = part.owner.engine.waits;
  const clear = part.heldOnceAwaitedGoes || released.released(predecessor);
  released.stopAwaiting(predecessor);
  part.awaited = undefined;
  part.cancelDeletion = undefined;
  return clear;
}

/** Told by the store: the node `part` awaits was deleted (or could not be watched: `error`). */
function predecessorDeleted(part: Part, error?: LockError): void {
  if (part.awaited === undefined) return;
  const clear = stopAwaitingDeletion(part);
  // Decided after the events delivered with this one: a session's close deletes its nodes
  // in one go, and the deletion of our own node may come right behind our predecessor's.
  // A grant the deletion alone decides waits one turn more, for the releasing holder's own
  // continuation (it is counted, and told `released`, a few promise turns after the
  // deletion), so that every record of the lock reads release, then grant.
  if (clear) setImmediate(() => predecessorGone(part, clear, error));
  else queueMicrotask(() => predecessorGone(part, clear, error));
}

/**
 * Nothing that blocked the part is left ahead when the predecessor's deletion alone grants
 * it (see heldOncePredecessorGoes), or when it was a holder of this server whose release
 * frees its watchers (see releaseFreesWatchers), released just now (`clear`): its turn has
 * come, no listing needed. Its node still exists: its watch, armed since it was created,
 * would have fired first otherwise (a store reports a session's watch events in order).
 */
function predecessorGone(part: Part, clear: boolean, error?: LockError): void {
  if (!current(part)) return;
  if (error) part.owner.giveUp(error);
  else if (clear) step(part, { kind: 'held', ahead: 0, head: undefined }, []);
  else list(part);
}

/** A semaphore: released weight, or a grant ahead, may let the part in; list again to know. */
function awaitSemaphoreWake(
  part: Part,
  wake: NonNullable<Extract<Position, { kind: 'waiting' }>['wake']>,
): void {
  const stopped = new AbortController();
  part.cancelStep = () => stopped.abort();
  part.owner.engine.waits.semaphores.wait(part.dir, wake, part.wakeup!, stopped.signal).then(
    (told) => {
      if (stopped.signal.aborted) return;
      if (told) relisted(part, told);
      else list(part);
    },
    (error: unknown) => {
      if (!stopped.signal.aborted) part.owner.giveUp(error);
    },
  );
}

/** Lists the part's queue, and takes the next step from where it stands in it. */
function list(part: Part): void {
  // Only the wait's end stops a listing in flight: its answer is then ignored.
  part.owner.engine.store.children(part.dir, AS_TOLD).then(
    (children) => relisted(part, children),
    (error: unknown) => {
      if (current(part)) part.owner.giveUp(error);
    },
  );
}

function relisted(part: Part, children: readonly string[]): void {
  if (!current(part)) return;
  step(part, part.owner.engine.waits.position(part.dir, children, part.me), children);
}

/** Counts the request's waiting parts again now (see LocalQueue.recount); whether any was told. */
export async function recount(parts: readonly Part[]): Promise<boolean> {
  const counting = parts.filter((part) => part.told).map((part) => part.queue!.recount(part.me));
  return (await Promise.all(counting)).some(Boolean);
}

/** The request's place: the sum of its parts'. */
export function aheadOf(parts: readonly Part[]): number {
  let ahead = 0;
  for (const part of parts) ahead += part.ahead;
  return ahead;
}

/** Undoes what a part's wait set up: its watch, its step awaited, its place in its queue. */
export function endWait(part: Part): void {
  const cancelDeletion = part.cancelDeletion;
  stopAwaitingDeletion(part);
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
  part.owner.engine.waits.leave(part.dir, queue);
}

/**
 * Hands out one lock whose turn came: a holder here whose release frees the waiters here that
 * watch it tells them (see ReleasedHolders), and a semaphore request may have a waiter right
 * behind it that waits for this grant: it is told (see SemaphoreWakeups).
 */
export function handOut(part: Part): void {
  const { turn } = part;
  const { waits, semaphores } = part.owner.engine;
  part.releasedTo = releaseFreesWatchers(part.request.mode) ? waits.released : undefined;
  if (turn!.current.successor !== undefined)
    semaphores.granted(part.path, turn!.current.successor, turn!.children);
}

/** The request is over: its semaphore parts' wake-ups are no longer registered. */
export function forgetParts(parts: readonly Part[]): void {
  for (const part of parts) {
    if (part.requestId !== undefined) part.owner.engine.semaphores.forget(part.requestId);
  }
}
