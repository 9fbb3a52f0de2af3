import type { CoordinationStore } from '../stores/store.js';
import type { AcquireRequest, RequestTag } from './lock-request.js';

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
  made: { readonly server: string; readonly since: string; readonly tag: RequestTag | undefined },
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
  if (tag === undefined) return [encodeNodeRecord(record)];
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
