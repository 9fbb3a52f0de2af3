/*
 * Guarded records (GuardedRecords): small keyed values under a lock's name that only a current
 * holder of the lock can write, each write one store transaction with a check of the holder's node.
 */
import { randomBytes } from 'node:crypto';
import { recordKeyProblem } from '../../common/lock-name-rule.js';
import {
  RECORD_REQUEST_ID_MAX_BYTES,
  RECORD_VALUE_MAX_BYTES,
  RECORDS_PER_LOCK_MAX,
} from '../../common/limits.js';
import {
  decodeLockName,
  encodeLockName,
  validateLockName,
  type LockInspector,
  type LockMode,
} from '../engine/index.js';
import { isLockError, LockError } from '../lock-error.js';
import { plantedBug } from '../planted-bugs.js';
import {
  joinPath,
  type CoordinationStore,
  type NodeData,
  type RecordOp,
  type RecordTransactions,
} from '../stores/store.js';

/** A record as read: its value and revision. */
export interface StoredRecord {
  readonly value: Uint8Array;
  readonly revision: bigint;
}

/** Who writes: the holder's fencing token, and what the writer may do in the holder's mode. */
export interface RecordWriter {
  readonly token: bigint;
  /** Throws (PERMISSION_DENIED) unless the caller may acquire the lock in `mode`. */
  readonly authorize: (mode: LockMode) => void;
}

const EMPTY = new Uint8Array(0);
/**
 * A record node's data: a format byte, the length of the write's id and the id (the client's
 * request id, else 16 random bytes), the revision (64 bits), then the value.
 */
const FORMAT = 1;
const RANDOM_ID_BYTES = 16;
/** The counter's name beside the records: encoded keys never start with a dot (see encodeLockName). */
const COUNTER = '.revision';

/**
 * Guarded records, on any store with transactions. Each lock's records live in a directory of
 * their own (`<root>/records/<lock>`, persistent), one node per key, beside a counter node
 * (`.revision`, a name no encoded key can have) whose data version counts the writes and
 * deletes of the lock's records: the counter at version v has given revision v + 1. Each record
 * carries the revision of its write, so revisions strictly grow per key across deletes.
 *
 * A write is one transaction of three steps: a check that the holder's node still exists (its
 * request holds the lock while it does), the counter moved on from the version read (made at
 * the lock's first write), and the record created, set or deleted from the version read. Either
 * every step holds at the back end at once, or nothing is written.
 */
export class GuardedRecords {
  readonly #store: CoordinationStore;
  readonly #records: RecordTransactions | undefined;
  readonly #inspector: LockInspector;
  readonly #root: string;

  constructor(options: {
    readonly store: CoordinationStore;
    readonly records: RecordTransactions | undefined;
    readonly inspector: LockInspector;
    readonly rootPath: string;
  }) {
    this.#store = options.store;
    this.#records = options.records;
    this.#inspector = options.inspector;
    this.#root = joinPath(options.rootPath, 'records');
  }

  /** Every record of lock `name`, by key (for the live page): at most RECORDS_PER_LOCK_MAX. */
  async list(name: string): Promise<Array<StoredRecord & { readonly key: string }>> {
    validateLockName(name);
    // A back end without transactions has no records (nor can it be given any).
    if (!this.#records?.transactions) return [];
    const dir = this.#dir(name);
    const keys = (await this.#store.children(dir)).filter((child) => child !== COUNTER).sort();
    const nodes = await Promise.all(keys.map((key) => this.#store.nodeData(joinPath(dir, key))));
    return keys.flatMap((key, i) => {
      const node = nodes[i];
      if (!node) return [];
      const { value, revision } = decodeRecord(node.data, joinPath(dir, key));
      return [{ key: decodeLockName(key), value, revision }];
    });
  }

  /** The record `key` of lock `name`, or undefined when there is none. */
  async get(name: string, key: string): Promise<StoredRecord | undefined> {
    const path = this.#path(name, key);
    const [node] = await storeStep('read', this.#transactions.readLatest([path]));
    return node ? decodeRecord(node.data, path) : undefined;
  }

  /**
   * Writes `value` as the holder whose token is `writer.token`, if the record's revision is
   * `expected` (when given; 0: the record must not exist). Resolves with the new revision; with
   * the revision of the record's last write instead, writing nothing, when that write carried
   * `requestId` (non-empty): it was this one, sent before.
   */
  async put(
    name: string,
    key: string,
    value: Uint8Array,
    writer: RecordWriter,
    options: { readonly expected?: bigint | undefined; readonly requestId?: Uint8Array | undefined } = {},
  ): Promise<bigint> {
    const path = this.#path(name, key);
    if (value.byteLength > RECORD_VALUE_MAX_BYTES)
      throw new LockError(
        'INVALID_ARGUMENT',
        `record value is ${value.byteLength} bytes; the limit is ${RECORD_VALUE_MAX_BYTES}`,
      );
    const requestId = options.requestId ?? EMPTY;
    if (requestId.byteLength > RECORD_REQUEST_ID_MAX_BYTES)
      throw new LockError(
        'INVALID_ARGUMENT',
        `record request id is ${requestId.byteLength} bytes; the limit is ${RECORD_REQUEST_ID_MAX_BYTES}`,
      );
    const id = requestId.byteLength > 0 ? requestId : randomBytes(RANDOM_ID_BYTES);
    const written = await this.#write(name, path, writer, options.expected, id, (record, revision) => {
      if (record !== null && requestId.byteLength > 0) {
        const stored = decodeRecord(record.data, path);
        if (Buffer.compare(stored.id, requestId) === 0) return stored.revision;
      }
      const data = encodeRecord(id, revision, value);
      if (record === null) return { op: 'create', path, data };
      return { op: 'set', path, data, version: record.version };
    });
    return written ?? 0n;
  }

  /** Deletes the record as the holder whose token is `writer.token`; false if there was none. */
  async delete(name: string, key: string, writer: RecordWriter, expected?: bigint): Promise<boolean> {
    const path = this.#path(name, key);
    const written = await this.#write(name, path, writer, expected, EMPTY, (record) =>
      record === null ? undefined : { op: 'delete', path, version: record.version },
    );
    return written !== undefined;
  }

  /**
   * The one way a record is changed: `change` makes the record's op from the node read (null:
   * none) and the revision it will have; undefined when there is nothing to do, a revision when
   * it was done before. Resolves with the revision, or undefined when nothing was done. `id` is
   * the write's, which the record carries once written.
   */
  async #write(
    name: string,
    path: string,
    writer: RecordWriter,
    expected: bigint | undefined,
    id: Uint8Array,
    change: (record: NodeData | null, revision: bigint) => RecordOp | bigint | undefined,
  ): Promise<bigint | undefined> {
    const records = this.#transactions;
    // The planted bug (test/jepsen only): no holder looked up, none checked in the transaction.
    const unguarded = plantedBug === 'unguarded-records';
    const holder = unguarded
      ? { mode: 'write' as const, path: undefined }
      : await this.#inspector.holderOf(name, writer.token);
    if (holder === undefined) throw notHolder(name, writer.token);
    if (holder.mode === 'read')
      throw new LockError(
        'NOT_HELD',
        `fencing token ${writer.token} holds lock ${JSON.stringify(name)} in READ mode, which shares it: records are written under an exclusive hold, a semaphore's or a leader's`,
      );
    writer.authorize(holder.mode);
    const dir = parentOf(path);
    const counter = joinPath(dir, COUNTER);
    await records.makeDirs(dir);
    for (;;) {
      // The newest there is: a member that lags would only make the transaction below fail.
      const [count = null, record = null] = await storeStep('read', records.readLatest([counter, path]));
      const current = record === null ? 0n : decodeRecord(record.data, path).revision;
      const revision = count === null ? 1n : BigInt(count.version) + 2n;
      const op = change(record, revision);
      if (typeof op === 'bigint') return op;
      if (expected !== undefined && expected !== current)
        throw new LockError(
          'REVISION_MISMATCH',
          `record ${JSON.stringify(keyOf(path))} of ${JSON.stringify(name)} is at revision ${current}, not ${expected}`,
        );
      if (op === undefined) return undefined;
      if (op.op === 'create') await this.#checkRoom(name, dir);
      const outcome = await storeStep(
        'write',
        records.transact([
          ...(holder.path === undefined ? [] : [{ op: 'check' as const, path: holder.path }]),
          count === null
            ? { op: 'create', path: counter, data: EMPTY }
            : { op: 'set', path: counter, data: EMPTY, version: count.version },
          op,
        ]),
      );
      if (outcome.kind === 'done') return revision;
      if (outcome.afterLostReply) return this.#afterLostReply(name, path, id, op);
      // The holder's node is gone: its request no longer holds the lock.
      if (outcome.index === 0 && holder.path !== undefined) throw notHolder(name, writer.token);
      // Another write to the lock's records (index 1) or to this record (2) came first: read again.
    }
  }

  /**
   * A transaction sent again after a lost reply failed: the first try may have been applied.
   * The record tells: it carries the write's id if this write made it (a delete: it is gone).
   * Otherwise the outcome cannot be known, and the caller is told so.
   */
  async #afterLostReply(name: string, path: string, id: Uint8Array, op: RecordOp): Promise<bigint> {
    const [node = null] = await storeStep('write', this.#transactions.readLatest([path]));
    if (op.op === 'delete' && node === null) return 0n;
    if (node !== null && op.op !== 'delete') {
      const stored = decodeRecord(node.data, path);
      if (Buffer.compare(stored.id, id) === 0) return stored.revision;
    }
    throw new LockError(
      'UNAVAILABLE',
      `the write of record ${JSON.stringify(keyOf(path))} of ${JSON.stringify(name)} lost its reply and was sent again; whether it was made is unknown: read the record`,
    );
  }

  /** Refuses a new record once the lock has RECORDS_PER_LOCK_MAX of them. */
  async #checkRoom(name: string, dir: string): Promise<void> {
    const count = (await this.#store.children(dir)).filter((child) => child !== COUNTER).length;
    if (count >= RECORDS_PER_LOCK_MAX)
      throw new LockError(
        'RESOURCE_EXHAUSTED',
        `lock ${JSON.stringify(name)} has ${count} records; the limit is ${RECORDS_PER_LOCK_MAX}`,
      );
  }

  #path(name: string, key: string): string {
    validateLockName(name);
    const problem = recordKeyProblem(key);
    if (problem !== undefined) throw new LockError('INVALID_ARGUMENT', `invalid record key: ${problem}`);
    return joinPath(this.#dir(name), encodeLockName(key));
  }

  /** The store directory of lock `name`'s records. */
  #dir(name: string): string {
    return joinPath(this.#root, encodeLockName(name));
  }

  get #transactions(): RecordTransactions {
    if (this.#records?.transactions) return this.#records;
    throw new LockError(
      'UNSUPPORTED',
      "guarded records need a back end that writes several nodes in one step: the embedded store, or ZooKeeper through lockstream's own client (--zookeeper-client protocol, the default)",
    );
  }
}

/**
 * `step`'s result; a store session given up under it (LOCK_LOST: the write's session was taken
 * over or lost as it went out) is UNAVAILABLE to the caller, with a write's outcome unknown: the
 * transaction may have been applied before its reply was lost.
 */
async function storeStep<T>(what: 'read' | 'write', step: Promise<T>): Promise<T> {
  try {
    return await step;
  } catch (error) {
    if (!isLockError(error, 'LOCK_LOST')) throw error;
    throw new LockError(
      'UNAVAILABLE',
      what === 'write'
        ? `the store's session was given up while the write was under way; whether it was made is unknown: read the record (${error.message})`
        : `the store's session was given up during the read (${error.message})`,
      { cause: error },
    );
  }
}

function notHolder(name: string, token: bigint): LockError {
  return new LockError(
    'NOT_HELD',
    `fencing token ${token} does not hold lock ${JSON.stringify(name)}: it was never granted, or was released or lost, or is another lock's`,
  );
}

function encodeRecord(id: Uint8Array, revision: bigint, value: Uint8Array): Uint8Array {
  const header = 2 + id.byteLength + 8;
  const data = Buffer.allocUnsafe(header + value.byteLength);
  data[0] = FORMAT;
  data[1] = id.byteLength;
  data.set(id, 2);
  data.writeBigUInt64BE(revision, 2 + id.byteLength);
  data.set(value, header);
  return data;
}

function decodeRecord(data: Uint8Array, path: string): StoredRecord & { readonly id: Uint8Array } {
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const idBytes = bytes[1] ?? 0;
  const header = 2 + idBytes + 8;
  if (bytes.byteLength < header || bytes[0] !== FORMAT)
    throw new LockError('UNAVAILABLE', `the node at ${path} is not a lockstream record`);
  return {
    id: bytes.subarray(2, 2 + idBytes),
    revision: bytes.readBigUInt64BE(2 + idBytes),
    value: Uint8Array.prototype.slice.call(bytes, header),
  };
}

function parentOf(path: string): string {
  return path.slice(0, path.lastIndexOf('/'));
}

function keyOf(path: string): string {
  return decodeURIComponent(path.slice(path.lastIndexOf('/') + 1));
}
