/*
 * A lock request's nodes in the store: made, or read back from a store session taken over (every
 * node of a resumable session carries a RequestTag, so the nodes alone say which lockstream
 * session each request belongs to and what it asked for) and adopted; then, once held, given a
 * new value, replaced by a READ node (a downgrade: the WRITE node's place in the queue, record
 * and fencing token kept) and deleted. Store work over the request's parts, each step decided by
 * the request itself (LockRequest), the reading back by the takeover (StoreTakeovers).
 */
import { randomUUID } from 'node:crypto';
import { LockError } from '../lock-error.js';
import {
  baseName,
  parentPath,
  type CoordinationStore,
  type CreatedNode,
  type NodeFollow,
  type NodeReplacement,
  type OwnedNode,
  type SequentialEntry,
  type StoreSession,
} from '../stores/store.js';
import { nodeGone, nodeVanished } from './loss-reasons.js';
import type { AcquireRequest, LockTarget, RequestTag, SessionKind } from './lock-request.js';
import {
  decodeLockName,
  encodeNodeRecord,
  nodePrefix,
  parseNodeName,
  parseNodeRecord,
  publishedValue,
  readNodeName,
  recordedValue,
  requestRecords,
  updateNodeRecord,
  withValue,
  type NodeRecord,
} from './lock-nodes.js';
import { plantedBug, RELEASED_EARLY_DELAY_MS } from '../planted-bugs.js';
import { semaphoreShapeOf } from './request-validation.js';
import { Part, type PartOwner, type RequestEngine } from './request-wait.js';

/** The locks a request asks for: its own, or each of a multi-lock's. */
function targetsOf(request: AcquireRequest): AcquireRequest[] {
  return request.locks?.map((target) => ({ ...request, ...target, locks: undefined })) ?? [request];
}

/**
 * The parts of a request about to create its nodes, and what the store is asked to create for
 * each (kept apart: a waiter keeps its parts, not the nodes' records). `since`: when the request
 * was made (epoch ms); `session`: the resumable session it belongs to (`tag`), or how often
 * the stream of one that cannot be resumed has heartbeats.
 */
export function newParts(
  request: AcquireRequest,
  owner: PartOwner,
  since: number,
  session: { readonly tag: RequestTag | undefined; readonly heartbeatMs?: number | undefined },
): { parts: Part[]; entries: SequentialEntry[]; written: number[] } {
  const { engine } = owner;
  const data = requestRecords(request, {
    server: engine.instanceId,
    since: new Date(since).toISOString(),
    tag: session.tag,
    heartbeatMs: session.heartbeatMs,
  });
  const targets = targetsOf(request);
  const ids = targets.map(() => randomUUID());
  // Mapped, not pushed to: a request keeps `parts` while it lives, and a pushed-to empty array
  // reserves room for seventeen.
  const parts = targets.map((target, index) => newPart(owner, index, target, ids[index]!));
  const entries: SequentialEntry[] = [];
  let index = 0;
  for (const target of targets) {
    entries.push(sequentialEntry(engine, target, ids[index]!, data[index] ?? data[0]!, parts[index]!.follow));
    index += 1;
  }
  const written = data.map((record) => record.byteLength);
  return { parts, entries, written };
}

/** What the store is asked to create for one target: its node's queue, name prefix and record. */
function sequentialEntry(
  engine: RequestEngine,
  target: AcquireRequest,
  id: string,
  data: Uint8Array,
  follow: NodeFollow,
): SequentialEntry {
  return {
    dir: engine.lockPath(target.name),
    prefix: nodePrefix(target.mode, id, semaphoreShapeOf(target)),
    data,
    follow,
  };
}

/** A part about to create its node: a semaphore's is known by `id` before its node exists. */
function newPart(owner: PartOwner, index: number, target: AcquireRequest, id: string): Part {
  const shape = semaphoreShapeOf(target);
  // Known here before its node exists: a grant ahead that lists the node finds it local.
  const wakeup = shape ? owner.engine.semaphores.register(id) : undefined;
  // Only a semaphore part keeps its request id (a string of a dozen joined pieces, as
  // randomUUID makes it): nothing else needs it once the node's prefix is written.
  return new Part(owner, index, target, wakeup, shape ? id : undefined);
}

/** A lockstream session as its nodes describe it. */
export interface FoundSession {
  readonly key: string;
  readonly kind: SessionKind;
  readonly graceMs: number;
  readonly callerName: string | undefined;
  readonly requests: FoundRequest[];
}

export interface FoundRequest {
  readonly id: number;
  readonly request: AcquireRequest;
  /** Its nodes, in the request's order (a multi-lock's in its locks' order). */
  readonly nodes: OwnedNode[];
}

/**
 * The sessions the lock nodes among `nodes` belong to, and the lock nodes of no resumable
 * session (their requests' streams ended with the instance that made them). Nodes that are
 * not lock nodes under `locksPath` are in neither.
 */
export function sessionsOfNodes(
  nodes: readonly OwnedNode[],
  locksPath: string,
): { sessions: FoundSession[]; untagged: OwnedNode[] } {
  const sessions = new Map<string, { session: FoundSession; parts: Map<number, TaggedNode[]> }>();
  const untagged: OwnedNode[] = [];
  for (const node of nodes) {
    const lockDir = parentPath(node.path);
    if (parentPath(lockDir) !== locksPath || !parseNodeName(baseName(node.path))) continue;
    const record = parseNodeRecord(node.data);
    const tag = validTag(record.session);
    if (!tag) {
      untagged.push(node);
      continue;
    }
    let entry = sessions.get(tag.key);
    if (!entry) {
      entry = {
        session: { key: tag.key, kind: tag.kind, graceMs: tag.grace, callerName: tag.caller, requests: [] },
        parts: new Map(),
      };
      sessions.set(tag.key, entry);
    }
    const parts = entry.parts.get(tag.id) ?? [];
    parts.push({ node, record, tag, name: decodeLockName(baseName(lockDir)) });
    entry.parts.set(tag.id, parts);
  }
  return {
    sessions: [...sessions.values()].map(({ session, parts }) => {
      for (const [id, tagged] of parts) session.requests.push(requestOf(id, tagged));
      return session;
    }),
    untagged,
  };
}

interface TaggedNode {
  readonly node: OwnedNode;
  readonly record: NodeRecord;
  readonly tag: RequestTag;
  /** The lock's name, from its queue's path. */
  readonly name: string;
}

/** The request that made `tagged` (one node, or a multi-lock's several). */
function requestOf(id: number, tagged: TaggedNode[]): FoundRequest {
  tagged.sort((a, b) => (a.tag.part ?? 0) - (b.tag.part ?? 0));
  const first = tagged[0]!;
  const { record, tag } = first;
  const targets = tagged.map(({ node, name }): LockTarget => {
    const parsed = parseNodeName(baseName(node.path))!;
    return parsed.mode === 'semaphore'
      ? { name, mode: parsed.mode, limit: parsed.limit, weight: parsed.weight }
      : { name, mode: parsed.mode };
  });
  const value = publishedValue(record);
  const common = {
    owner: record.owner,
    peer: record.peer,
    ...(value.byteLength > 0 ? { value } : {}),
    ...(tag.until === undefined ? {} : { waitTimeoutMs: waitLeftMs(tag.until, tag.wait) }),
  };
  const request: AcquireRequest =
    tag.set !== undefined && targets.length > 1
      ? { ...common, name: tag.set, mode: targets[0]!.mode, locks: targets }
      : { ...common, ...targets[0]! };
  return { id, request, nodes: tagged.map(({ node }) => node) };
}

/**
 * What is left of a wait another instance began, which ends at `until` by that instance's wall
 * clock. Only the wall clock can say (no monotonic clock is shared), so a clock here that is
 * ahead of that instance's by s (or stepped forward) ends the wait s early, at once if s is
 * more than what was left; one behind (or stepped back) cannot make it last longer than its
 * whole wait timeout from now (`wait`, in tags lockstream writes since it has been recorded).
 */
export function waitLeftMs(until: number, wait: unknown): number {
  const left = Math.max(1, until - Date.now());
  return typeof wait === 'number' && wait > 0 ? Math.min(left, wait) : left;
}

/** A node's tag if it reads as one lockstream wrote (anything else is no resumable session's). */
function validTag(tag: unknown): RequestTag | undefined {
  if (typeof tag !== 'object' || tag === null) return undefined;
  const { key, id, kind, grace } = tag as Partial<RequestTag>;
  if (typeof key !== 'string' || key === '') return undefined;
  if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 0) return undefined;
  if (kind !== 'acquire' && kind !== 'session' && kind !== 'campaign') return undefined;
  if (typeof grace !== 'number' || !(grace > 0)) return undefined;
  return tag as RequestTag;
}

/** The parts of a request whose nodes exist already (see LockEngine.adopt), in its order. */
export function adoptedParts(owner: PartOwner, request: AcquireRequest, nodes: readonly OwnedNode[]): Part[] {
  const { semaphores } = owner.engine;
  const targets = targetsOf(request);
  return nodes.map((owned, i): Part => {
    const target = targets[i]!;
    const shape = semaphoreShapeOf(target);
    const requestId = shape ? parseNodeName(baseName(owned.path))?.requestId : undefined;
    const wakeup = requestId === undefined ? undefined : semaphores.register(requestId);
    const part = new Part(owner, i, target, wakeup, requestId);
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
      const followed = await store.watchNode(owned.path, parts[i]!.follow);
      const siblings = await store.children(parentPath(owned.path));
      return { path: owned.path, session, siblings, creationId: owned.creationId, followed };
    }),
  );
}

/**
 * The store made (or read) the parts' nodes: each part takes its path and fencing token (from
 * the create's answer, or the follow's first read). A node whose record differs from what was
 * written (-1: nothing was) is news for its request (a revocation, perhaps). Throws LOCK_LOST if
 * a node was already gone (`vanished`, if the request was told why).
 */
export function takeNodes(
  parts: readonly Part[],
  created: readonly CreatedNode[],
  written: readonly number[],
  vanished: LockError | undefined,
): void {
  parts.forEach((part, i) => {
    const made = created[i]!;
    part.path = made.path;
    const node = made.followed;
    if (!node) throw vanished ?? nodeVanished(part.request.name);
    part.token = made.creationId ?? node.creationId;
    if (node.data.byteLength !== (written[i] ?? written[0]!)) part.onData(node.data);
  });
}

/** The request ended or gave up: its nodes are no longer followed. */
export function unfollow(parts: readonly Part[]): void {
  for (const part of parts) part.follow.stop();
}

/**
 * Writes `value` into every part's node record (unless it is there already). `checkHeld`
 * throws unless the request still holds; a node found gone is LOCK_LOST.
 */
export async function writeValue(
  store: CoordinationStore,
  parts: readonly Part[],
  value: Uint8Array,
  checkHeld: (otherwise?: LockError) => void,
): Promise<void> {
  const encoded = recordedValue(value);
  await Promise.all(
    parts.map(async (part) => {
      checkHeld();
      const record = await updateNodeRecord(store, part.path, (current) =>
        current.value === encoded ? undefined : withValue(current, encoded),
      );
      // Gone: deleted by someone else or with the session (its follow reports the loss), or
      // released meanwhile.
      if (record === 'missing') checkHeld(nodeGone(part.request.name));
    }),
  );
}

/**
 * Replaces a WRITE part's node by a READ node in the same place (see replaceWithReadNode): the
 * part follows the new node from then on. Resolves false if the node is gone.
 */
export async function replaceWithRead(
  owner: PartOwner,
  part: Part,
  session: StoreSession,
  checkHeld: () => void,
): Promise<boolean> {
  const { store, replacement } = owner.engine;
  const replaced = await replaceWithReadNode(store, replacement, part.path, part.token, session, {
    checkHeld,
    newFollow: () => part.newFollow(),
    replacing: (on) => (part.replacing = on),
  });
  if (!replaced) return false;
  part.follow.stop();
  part.follow = replaced.follow;
  part.path = replaced.path;
  part.mode = 'read';
  // A read hold's release frees no waiter the engine's shortcut knows of.
  part.releasedTo = undefined;
  return true;
}

/**
 * Deletes the parts' nodes, a multi-lock's in one step (nobody sees part of the set released
 * and part held); a holder of this server whose release frees its watchers is told first (see
 * ReleasedHolders).
 */
export function deleteNodes(store: CoordinationStore, parts: readonly Part[]): Promise<void> {
  for (const part of parts) part.releasedTo?.add(part.path);
  const remove = (): Promise<void> => deleteParts(store, parts);
  return plantedBug === 'released-early' ? releasedEarly(remove) : remove();
}

/** Deletes the parts' nodes: one node by itself, several in one step. */
export function deleteParts(store: CoordinationStore, parts: readonly Part[]): Promise<void> {
  return parts.length === 1 ? store.delete(parts[0]!.path) : store.delete(parts.map((part) => part.path));
}

/** The planted bug `released-early` (planted-bugs.ts): resolves now, deletes later. */
function releasedEarly(remove: () => Promise<void>): Promise<void> {
  setTimeout(() => void remove().catch(() => {}), RELEASED_EARLY_DELAY_MS);
  return Promise.resolve();
}

/** What a held lock lends the replacement of its node (see replaceWithReadNode). */
export interface ReplacedHold {
  /** Throws unless the lock is still held; asked before every try. */
  checkHeld(): void;
  /** A follow for the replacement node. */
  newFollow(): NodeFollow;
  /** Set while the store replaces the node: the old node's deletion is then the replacement's. */
  replacing(on: boolean): void;
}

/**
 * A WRITE hold's downgrade, in the store: the node at `path` is replaced by a READ node with the
 * same place in the queue (the same sequence number) and the same record, with `token` written
 * in it (the fencing token stays), so no writer or reader changes places in between; readers
 * queued behind it that waited only for it are granted (their watch on the old node fires). A
 * revocation written meanwhile makes the store refuse the replacement: it is copied too, on the
 * next try. Resolves with the new node's path and follow, or undefined if the node is gone
 * (deleted by a forced revocation, or with its session).
 */
export async function replaceWithReadNode(
  store: CoordinationStore,
  replacement: NodeReplacement | undefined,
  path: string,
  token: bigint,
  session: StoreSession,
  lease: ReplacedHold,
): Promise<{ path: string; follow: NodeFollow } | undefined> {
  if (!replacement)
    throw new LockError('UNSUPPORTED', 'this store cannot replace a node atomically: a downgrade needs it');
  const name = readNodeName(path.slice(path.lastIndexOf('/') + 1));
  for (;;) {
    lease.checkHeld();
    const node = await store.nodeData(path);
    if (!node) return undefined;
    const record = { ...parseNodeRecord(node.data), token: token.toString() };
    const follow = lease.newFollow();
    lease.replacing(true);
    let replaced;
    try {
      replaced = await replacement.replaceNode(
        path,
        name,
        encodeNodeRecord(record),
        node.version,
        session,
        follow,
      );
    } catch (error) {
      follow.stop();
      throw error;
    } finally {
      lease.replacing(false);
    }
    if (replaced === 'conflict') {
      follow.stop();
      continue;
    }
    if (replaced === 'missing') {
      follow.stop();
      return undefined;
    }
    return { path: replaced.path, follow };
  }
}
