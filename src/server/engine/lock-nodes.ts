/*
 * How lockstream lays out a lock in the store: the lock's parent node, named for the lock
 * (encodeLockName); one node per request in it, whose name says the request's mode and place
 * (QueueNode); and what each request node records (NodeRecord).
 */
import { SEMAPHORE_LIMIT_MAX } from '../../common/limits.js';
import { lockNameProblem } from '../../common/lock-name-rule.js';
import { LockError } from '../lock-error.js';
import type { CoordinationStore } from '../stores/store.js';
import type { AcquireRequest, LockMode, RequestTag } from './lock-request.js';

/**
 * A request in a lock's queue as the grant rule sees it, read from its node's name:
 * `<mode>-<request id>-<sequence>` for the lock modes, `sem-<limit>-<weight>-<request id>-<sequence>`
 * for a semaphore request.
 */
export interface QueueNode {
  readonly nodeName: string;
  readonly mode: LockMode;
  /** ZooKeeper's sequence suffix: queue order within one lifetime of the lock's parent. */
  readonly sequence: number;
  /** A semaphore request's limit and weight; 0 for the lock modes. */
  readonly limit: number;
  readonly weight: number;
}

/** A request node parsed in full, its request id checked too. */
export interface QueueEntry extends QueueNode {
  readonly requestId: string;
}

/** A semaphore request's capacity and its share of it. */
export interface SemaphoreShape {
  readonly limit: number;
  readonly weight: number;
}

/** The node name prefix for a request; the store appends the sequence number. */
export function nodePrefix(mode: LockMode, requestId: string, shape?: SemaphoreShape): string {
  if (mode !== 'semaphore') return `${mode}-${requestId}-`;
  if (!shape) throw new TypeError('a semaphore request needs a limit and a weight');
  return `sem-${shape.limit}-${shape.weight}-${requestId}-`;
}

const DASH = 0x2d;
const REQUEST_ID_LENGTH = 36;
/** Where randomUUID() puts its dashes, from the start of the request id. */
const UUID_DASHES = [8, 13, 18, 23] as const;

/** Whether `text` stands in `nodeName` at `offset` (startsWith without its call overhead). */
function hasAt(nodeName: string, text: string, offset: number): boolean {
  for (let i = 0; i < text.length; i += 1) {
    if (nodeName.charCodeAt(offset + i) !== text.charCodeAt(i)) return false;
  }
  return true;
}

/** The length of the `<mode>-` (or `sem-<limit>-<weight>-`) prefix of a request node's name, 0 if it has none. */
function modePrefixLength(nodeName: string): number {
  const first = nodeName.charCodeAt(0);
  if (first === 0x6d /* m */) return hasAt(nodeName, 'mutex-', 0) ? 6 : 0;
  if (first === 0x77 /* w */) return hasAt(nodeName, 'write-', 0) ? 6 : 0;
  if (first === 0x72 /* r */) return hasAt(nodeName, 'read-', 0) ? 5 : 0;
  if (first === 0x73 /* s */) return hasAt(nodeName, 'sem-', 0) ? semaphoreFieldsEnd(nodeName) : 0;
  if (first === 0x63 /* c */) return hasAt(nodeName, 'candidate-', 0) ? 10 : 0;
  return 0;
}

/** Digits a semaphore node's limit or weight may have: as many as SEMAPHORE_LIMIT_MAX has. */
const SHAPE_MAX_DIGITS = String(SEMAPHORE_LIMIT_MAX).length;

/** Where the `<limit>-<weight>-` after `sem-` ends, 0 if it is malformed. */
function semaphoreFieldsEnd(nodeName: string): number {
  let i = 4;
  for (let field = 0; field < 2; field += 1) {
    const start = i;
    while (i - start <= SHAPE_MAX_DIGITS && isDigit(nodeName.charCodeAt(i))) i += 1;
    if (i === start || i - start > SHAPE_MAX_DIGITS || nodeName.charCodeAt(i) !== DASH) return 0;
    i += 1;
  }
  return i;
}

function isDigit(code: number): boolean {
  return code >= 0x30 && code <= 0x39;
}

/** The limit and weight a semaphore node's name carries (a name `sequenceOf` accepted as one). */
export function semaphoreShape(nodeName: string): SemaphoreShape {
  const limitEnd = nodeName.indexOf('-', 4);
  const weightEnd = nodeName.indexOf('-', limitEnd + 1);
  return {
    limit: Number(nodeName.slice(4, limitEnd)),
    weight: Number(nodeName.slice(limitEnd + 1, weightEnd)),
  };
}

/**
 * The sequence number of a request node `<mode>-<request id>-<sequence>`, or NaN when the name
 * is not one. ZooKeeper formats the sequence with %010d: ten digits, or a sign and 9-10 digits
 * once the parent's signed 32-bit counter has overflowed (-2147483648 .. -000000001). Checks only
 * the request id's shape (its dashes); parseNodeName checks it in full.
 */
export function sequenceOf(nodeName: string): number {
  const idStart = modePrefixLength(nodeName);
  if (idStart === 0) return Number.NaN;
  const idEnd = idStart + REQUEST_ID_LENGTH;
  for (const dash of UUID_DASHES) if (nodeName.charCodeAt(idStart + dash) !== DASH) return Number.NaN;
  if (nodeName.charCodeAt(idEnd) !== DASH) return Number.NaN;
  let i = idEnd + 1;
  const negative = nodeName.charCodeAt(i) === DASH;
  if (negative) i += 1;
  const digits = nodeName.length - i;
  if (!(negative ? digits === 9 || digits === 10 : digits === 10)) return Number.NaN;
  let value = 0;
  for (; i < nodeName.length; i += 1) {
    const digit = nodeName.charCodeAt(i) - 0x30;
    if (digit < 0 || digit > 9) return Number.NaN;
    value = value * 10 + digit;
  }
  return negative ? -value : value;
}

/** The mode of a node whose name `sequenceOf` accepted (from its first letter). */
export function modeOf(nodeName: string): LockMode {
  const first = nodeName.charCodeAt(0);
  if (first === 0x6d /* m */) return 'mutex';
  if (first === 0x72 /* r */) return 'read';
  if (first === 0x63 /* c */) return 'candidate';
  return first === 0x73 /* s */ ? 'semaphore' : 'write';
}

/**
 * A request node as the grant rule sees it, or undefined when the name is not one (a node
 * written by someone else, which takes no part in the queue). Checks the request id's shape
 * only, as sequenceOf does: this is the engine's path, run for every child of every listing.
 */
export function queueNodeOf(nodeName: string): QueueNode | undefined {
  const sequence = sequenceOf(nodeName);
  if (Number.isNaN(sequence)) return undefined;
  const mode = modeOf(nodeName);
  const { limit, weight } = mode === 'semaphore' ? semaphoreShape(nodeName) : NO_SHAPE;
  return { nodeName, mode, sequence, limit, weight };
}

const NO_SHAPE: SemaphoreShape = { limit: 0, weight: 0 };

const REQUEST_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Parses a request node's name in full (the request id too), or returns null. */
export function parseNodeName(nodeName: string): QueueEntry | null {
  const node = queueNodeOf(nodeName);
  if (!node) return null;
  const idStart = modePrefixLength(nodeName);
  const requestId = nodeName.slice(idStart, idStart + REQUEST_ID_LENGTH);
  if (!REQUEST_ID.test(requestId)) return null;
  const { mode, sequence, limit, weight } = node;
  return { nodeName, mode, requestId, sequence, limit, weight };
}

/** Children in queue order: by the numeric sequence suffix, never by the whole name. */
export function queueOrder(children: readonly string[]): QueueEntry[] {
  const entries: QueueEntry[] = [];
  for (const child of children) {
    const entry = parseNodeName(child);
    // Nodes that are not lock requests (written by someone else) take no part in the queue.
    if (entry) entries.push(entry);
  }
  return entries.sort(bySequence);
}

export function bySequence(a: QueueNode, b: QueueNode): number {
  return a.sequence - b.sequence;
}

/** How the engine reads a listing's names: parsed afresh, or through a QueueNodeCache. */
export type QueueNodeReader = (nodeName: string) => QueueNode | undefined;

/**
 * One lock's queue nodes, parsed once by name. Every request lists its whole queue (the
 * recipe's getChildren), so a queue of n waiters costs n²/2 name reads (50 million for 10,000
 * waiters); names repeat from listing to listing, so a long queue parses each once. Only long
 * queues keep one (see LocalQueue), and it is pruned to the names still listed, so memory
 * follows the queues that exist, not the requests that have been.
 */
export class QueueNodeCache {
  /** Parsed nodes by name; null for a name that is not a request node. */
  readonly #nodes = new Map<string, QueueNode | null>();

  readonly read: QueueNodeReader = (nodeName) => {
    let node = this.#nodes.get(nodeName);
    if (node === undefined) {
      node = queueNodeOf(nodeName) ?? null;
      this.#nodes.set(nodeName, node);
    }
    return node ?? undefined;
  };

  /** Forgets the names that `children` (the latest listing) no longer has, once they are most. */
  prune(children: readonly string[]): void {
    if (this.#nodes.size <= 2 * children.length) return;
    const listed = new Set(children);
    for (const name of this.#nodes.keys()) if (!listed.has(name)) this.#nodes.delete(name);
  }

  get size(): number {
    return this.#nodes.size;
  }
}

/** A WRITE node's name as the READ node that takes its place (the same place in the queue). */
export function readNodeName(writeNodeName: string): string {
  // `write-<request id>-<sequence>` → `read-<request id>-<sequence>`.
  return `read${writeNodeName.slice(writeNodeName.indexOf('-'))}`;
}

/**
 * What a request's node records, as JSON: who asked, from where, through which instance and
 * since when (see LockEngine.acquire); the value its holder publishes; and `revoke`, added by
 * RevokeLock. Two writers may change one record (the holder its value, a revoker from any
 * instance the revocation), so every change is a compare-and-set on the node's data version.
 */
export interface NodeRecord {
  owner?: string;
  peer?: string;
  server?: string;
  since?: string;
  /** The published value, base64; absent when empty. */
  value?: string;
  /**
   * The request's fencing token (decimal), in a node that replaced the request's first node (a
   * downgrade): the first node's creation id, not this one's.
   */
  token?: string;
  /**
   * `forceAfterMs` is the deadline as RevokeLock set it: how long after the holder's instance sees
   * it, measured by that instance's monotonic clock (see HeldRevocation). `requestedAt` and
   * `forceAt` are the revoking instance's wall clock, for people reading the node; no instance
   * acts on them, except on a record an older lockstream wrote without `forceAfterMs`.
   */
  revoke?: { reason: string; requestedAt: string; forceAt?: string; forceAfterMs?: number };
  /**
   * A semaphore request that was granted while the request right behind it, of another
   * instance, may wait for that (see LockEngine): written for its watch.
   */
  granted?: boolean;
  /** Where the request belongs, for an instance that takes its session over (see RequestTag). */
  session?: RequestTag;
  /**
   * In a request of a session that cannot be resumed (no `session`), the heartbeat interval of
   * its stream, ms, if it has heartbeats: its client takes a server silent for three of them as
   * gone, so an instance that takes the store session over knows how long the request may still
   * be held by a client that has been told nothing (see StoreTakeovers#keepUnresumable).
   */
  heartbeat?: number;
}

export function parseNodeRecord(data: Uint8Array): NodeRecord {
  try {
    const value: unknown = JSON.parse(Buffer.from(data).toString('utf8'));
    return typeof value === 'object' && value !== null ? value : {};
  } catch {
    return {};
  }
}

/** The fencing token of a request's node: the one its record carries, else its creation id. */
export function recordedToken(record: NodeRecord, creationId: bigint): bigint {
  if (typeof record.token === 'string' && /^\d{1,20}$/.test(record.token)) return BigInt(record.token);
  return creationId;
}

/**
 * What a request's nodes record: who asked, from where, through which instance (`server`) and
 * since when, and its value; in a resumable session (`tag`) also where it belongs. One record
 * for all its nodes, or, for a resumable session's multi-lock, one per lock (each says its
 * place in the set).
 */
export function requestRecords(
  request: AcquireRequest,
  made: {
    readonly server: string;
    readonly since: string;
    readonly tag: RequestTag | undefined;
    readonly heartbeatMs?: number | undefined;
  },
): Buffer[] {
  const record: NodeRecord = {
    owner: request.owner ?? '',
    peer: request.peer ?? '',
    server: made.server,
    since: made.since,
  };
  const value = recordedValue(request.value);
  if (value !== undefined) record.value = value;
  const { tag } = made;
  if (tag === undefined) {
    if (made.heartbeatMs) record.heartbeat = made.heartbeatMs;
    return [encodeNodeRecord(record)];
  }
  const waitMs = request.waitTimeoutMs;
  const session: RequestTag = waitMs ? { ...tag, until: Date.parse(made.since) + waitMs, wait: waitMs } : tag;
  if (!request.locks) return [encodeNodeRecord({ ...record, session })];
  return request.locks.map((_, part) =>
    encodeNodeRecord({ ...record, session: { ...session, set: request.name, part } }),
  );
}

export function encodeNodeRecord(record: NodeRecord): Buffer {
  return Buffer.from(JSON.stringify(record));
}

/** A value as the record keeps it: base64, or absent when empty. */
export function recordedValue(value: Uint8Array | undefined): string | undefined {
  return value === undefined || value.byteLength === 0 ? undefined : Buffer.from(value).toString('base64');
}

/** `record` publishing `value` (as recordedValue gives it) instead of its own. */
export function withValue(record: NodeRecord, value: string | undefined): NodeRecord {
  const { value: _previous, ...rest } = record;
  return value === undefined ? rest : { ...rest, value };
}

/** The value a record publishes (empty if none, or if it is not base64 lockstream wrote). */
export function publishedValue(record: NodeRecord): Uint8Array {
  return typeof record.value === 'string' ? Buffer.from(record.value, 'base64') : Buffer.alloc(0);
}

/**
 * Changes the record of the node at `path`: reads it, and writes `change(record)` unless that
 * is undefined (nothing to change), if nobody wrote the node in between; otherwise reads again.
 * Resolves with the record as it is now ('missing' when the node does not exist).
 */
export async function updateNodeRecord(
  store: CoordinationStore,
  path: string,
  change: (record: NodeRecord) => NodeRecord | undefined,
): Promise<NodeRecord | 'missing'> {
  for (;;) {
    const node = await store.nodeData(path);
    if (!node) return 'missing';
    const record = parseNodeRecord(node.data);
    const changed = change(record);
    if (changed === undefined) return record;
    const outcome = await store.setData(path, encodeNodeRecord(changed), node.version);
    if (outcome === 'set') return changed;
    if (outcome === 'missing') return 'missing';
    // 'conflict': written meanwhile (or our write went through and its reply was lost): again.
  }
}

/**
 * Checks a client-supplied lock name; throws `LockError('INVALID_ARGUMENT')` saying what is
 * wrong (see lockNameProblem).
 */
export function validateLockName(name: string): void {
  const problem = lockNameProblem(name);
  if (problem !== undefined) throw invalidName(problem);
}

function invalidName(reason: string): LockError {
  return new LockError('INVALID_ARGUMENT', `invalid lock name: ${reason}`);
}

/**
 * Maps a lock name to one znode name that cannot escape its parent: every character other than
 * ASCII letters, digits, `-` and `_` becomes %XX of its UTF-8 bytes, so `/`, `.`, `..`, spaces
 * and any Unicode are inert. Reversible with `decodeLockName`; distinct names never collide.
 */
export function encodeLockName(name: string): string {
  return encodeURIComponent(name).replace(
    /[.!~*'()]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

export function decodeLockName(encoded: string): string {
  return decodeURIComponent(encoded);
}
