/*
 * A lock request's way through the store to its turn: its nodes created (or adopted), then each
 * lock's wait in its queue — the recipe's loop of listing, and awaiting the deletion of the one
 * node that blocks it — as functions over the request's parts (Part). Whether the request then
 * holds is its own decision (LockRequest's `decide`); this file only feeds it news.
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
} from '../stores/store.js';
import { LockRequestNode } from './lease.js';
import type { LocalQueue, QueueListener, QueueWaits } from './local-queue.js';
import { nodeVanished } from './loss-reasons.js';
import type { AcquireRequest, RequestTag } from './lock-request.js';
import { nodePrefix, parseNodeName, requestRecords } from './lock-nodes.js';
import { disagreement, releaseFreesWatchers, type HeldPosition, type Position } from './queue-position.js';
import { semaphoreShapeOf } from './request-validation.js';
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
}

/** What a part's wait needs of its request (LockRequest), and tells it. */
export interface WaitingRequest {
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
}

/**
 * One lock of a request (a multi-lock has several) and where its wait stands: its node, its
 * queue, what it awaits. Plain state of its request, which alone acts on it: a part has no
 * phase of its own (its wait is live while the request waits and its turn has not come).
 */
export class Part implements QueueListener {
  readonly owner: WaitingRequest;
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
  readonly deleted = (error?: LockError): void => predecessorDeleted(this, error);

  constructor(
    owner: WaitingRequest,
    index: number,
    request: AcquireRequest,
    node: LockRequestNode,
    wakeup: SemaphoreWakeup | undefined,
    requestId: string | undefined,
  ) {
    this.owner = owner;
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
    this.owner.placeChanged();
  }
}

/** The locks a request asks for: its own, or each of a multi-lock's. */
function targetsOf(request: AcquireRequest): AcquireRequest[] {
  return request.locks?.map((target) => ({ ...request, ...target, locks: undefined })) ?? [request];
}

/**
 * The parts of a request about to create its nodes, and what the store is asked to create for
 * each (kept apart: a waiter keeps its parts, not the nodes' records). `since`: when the request
 * was made (epoch ms); `tag`: the resumable session it belongs to.
 */
export function newParts(
  owner: WaitingRequest,
  since: number,
  tag: RequestTag | undefined,
): { parts: Part[]; entries: SequentialEntry[]; written: number[] } {
  const { engine, request } = owner;
  const data = requestRecords(request, {
    server: engine.instanceId,
    since: new Date(since).toISOString(),
    tag,
  });
  const { store, replacement, semaphores, dependents } = engine;
  const parts: Part[] = [];
  const entries: SequentialEntry[] = [];
  for (const [index, target] of targetsOf(request).entries()) {
    const shape = semaphoreShapeOf(target);
    const requestId = randomUUID();
    // Known here before its node exists: a grant ahead that lists the node finds it local.
    const wakeup = shape ? semaphores.register(requestId) : undefined;
    const node = new LockRequestNode(store, replacement, target, dependents);
    entries.push({
      dir: engine.lockPath(target.name),
      prefix: nodePrefix(target.mode, requestId, shape),
      data: data[index] ?? data[0]!,
      follow: node.follow,
    });
    // Only a semaphore part keeps its request id (a string of a dozen joined pieces, as
    // randomUUID makes it): nothing else needs it once the node's prefix is written.
    parts.push(new Part(owner, index, target, node, wakeup, shape ? requestId : undefined));
  }
  return { parts, entries, written: data.map((record) => record.byteLength) };
}

/** The parts of a request whose nodes exist already (see LockEngine.adopt), in its order. */
export function adoptedParts(owner: WaitingRequest, nodes: readonly OwnedNode[]): Part[] {
  const { store, replacement, semaphores, dependents } = owner.engine;
  const targets = targetsOf(owner.request);
  return nodes.map((owned, i): Part => {
    const target = targets[i]!;
    const shape = semaphoreShapeOf(target);
    const requestId = shape ? parseNodeName(baseName(owned.path))?.requestId : undefined;
    const wakeup = requestId === undefined ? undefined : semaphores.register(requestId);
    const node = new LockRequestNode(store, replacement, target, dependents);
    const part = new Part(owner, i, target, node, wakeup, requestId);
    part.path = owned.path;
    return part;
  });
}

/**
 * Reads adopted nodes as a create would have answered: each node's follow is armed first, then
 * its queue listed (what the listing misses, the follow tells).
 */
export function readAdopted(
  store: CoordinationStore,
  parts: readonly Part[],
  nodes: readonly OwnedNode[],
): Promise<CreatedNode[]> {
  const session = store.session;
  return Promise.all(
    nodes.map(async (owned, i): Promise<CreatedNode> => {
      const followed = await store.watchNode(owned.path, parts[i]!.node.follow);
      const siblings = await store.children(parentPath(owned.path));
      return { path: owned.path, session, siblings, creationId: owned.creationId, followed };
    }),
  );
}

/**
 * The request's nodes exist: each part takes its node, and where each stands in its queue's
 * listing. Throws if a node is gone, or the lock's queue holds requests of another shape.
 */
export function firstPositions(
  owner: WaitingRequest,
  created: readonly CreatedNode[],
  written: readonly number[],
): Position[] {
  const parts = owner.parts;
  parts.forEach((part, i) => (part.path = created[i]!.path));
  parts.forEach((part, i) => part.node.created(created[i]!, written[i] ?? written[0]!));
  return parts.map((part, i) => {
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
  owner: WaitingRequest,
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
 * Hands out one lock whose turn came. A semaphore request may have a waiter right behind it
 * that waits for this grant: it is told (see SemaphoreWakeups).
 */
export function handOut(part: Part): LockRequestNode {
  const { node, turn } = part;
  const { waits, semaphores } = part.owner.engine;
  node.hold(releaseFreesWatchers(part.request.mode) ? waits.released : undefined);
  if (turn!.current.successor !== undefined)
    semaphores.granted(part.path, turn!.current.successor, turn!.children);
  return node;
}

/** The request is over: its semaphore parts' wake-ups are no longer registered. */
export function forgetParts(parts: readonly Part[]): void {
  for (const part of parts) {
    if (part.requestId !== undefined) part.owner.engine.semaphores.forget(part.requestId);
  }
}
