/**
 * Where the records workload's counters live (record-increments.ts): a counter is an exact
 * history, the list of the ids of the increments applied to it, in order, and a store appends to
 * it as a lock's holder. Here the interface and guarded records (`records`); the other store, a
 * PostgreSQL table written through fenced transactions (`pg`), is postgres-counters.ts.
 */
import { LockClientError, Status, TokenNotHeldError, type LockClient } from '../../../src/client/index.js';
import { RECORD_VALUE_MAX_BYTES } from '../../../src/common/limits.js';

/** The hold an increment is made under: the lock's name and its fencing token. */
export interface Holder {
  readonly lock: string;
  readonly token: bigint;
}

/** What a counter was when it was read. */
export interface CounterRead {
  readonly ids: readonly string[];
  /** The store's version of it (a record's revision), as text; '0' when there is none. */
  readonly revision: string;
}

export interface CounterStore {
  /** Its name in the history (`store`). */
  readonly name: string;
  /**
   * Appends `id` to counter `key` of the holder's lock, as the holder: reads the counter, calls
   * `read` with what it read just before it sends the write (nothing is sent if `read`
   * rejects), and resolves with the new version once the write is acknowledged. A rejection
   * before `read` was called means nothing was written.
   */
  append(
    holder: Holder,
    key: string,
    id: string,
    read: (current: CounterRead) => Promise<void>,
  ): Promise<string>;
  /**
   * How a rejected write ended: `fail` when it definitely was not applied (refused), `info`
   * when it may have been; `code` names the refusal (a gRPC status name; the PostgreSQL store's
   * own: STALE_TOKEN, a SQLSTATE, ...).
   */
  judge(error: unknown): { readonly type: 'fail' | 'info'; readonly code: string };
  /** The counter as it is now (the final read), through this store's own client. */
  read(lock: string, key: string): Promise<CounterRead>;
  close(): void;
}

/** Refusals: the write was not made. Any other status (UNAVAILABLE, DEADLINE_EXCEEDED, ...) may hide a write. */
const REFUSALS: ReadonlySet<Status> = new Set([
  Status.FAILED_PRECONDITION,
  Status.ABORTED,
  Status.INVALID_ARGUMENT,
  Status.RESOURCE_EXHAUSTED,
  Status.PERMISSION_DENIED,
  Status.UNAUTHENTICATED,
  Status.NOT_FOUND,
  Status.ALREADY_EXISTS,
  Status.OUT_OF_RANGE,
  Status.UNIMPLEMENTED,
]);

/** A counter written as a guarded record of the lock (`records(lock, token).put`), no revision condition. */
export function guardedRecordsStore(client: LockClient): CounterStore {
  const read = async (lock: string, key: string): Promise<CounterRead> => {
    const record = await client.getRecord(lock, key);
    if (record === undefined) return { ids: [], revision: '0' };
    const ids: unknown = JSON.parse(Buffer.from(record.value).toString('utf8'));
    if (!Array.isArray(ids) || !ids.every((id) => typeof id === 'string'))
      throw new Error(`record ${lock}/${key} is not a JSON list of strings`);
    return { ids, revision: record.revision.toString() };
  };
  return {
    name: 'records',
    async append(holder, key, id, told) {
      const current = await read(holder.lock, key);
      const value = JSON.stringify([...current.ids, id]);
      if (Buffer.byteLength(value) > RECORD_VALUE_MAX_BYTES)
        throw new Error(`refused before sending: ${key} would pass ${RECORD_VALUE_MAX_BYTES} bytes`);
      await told(current);
      // A blind write, as the holder: only the token guards it (an expected revision would too).
      const revision = await client.records(holder.lock, holder.token).put(key, value);
      return revision.toString();
    },
    judge(error) {
      if (error instanceof TokenNotHeldError) return { type: 'fail', code: 'FAILED_PRECONDITION' };
      if (error instanceof LockClientError)
        return {
          type: REFUSALS.has(error.code) ? 'fail' : 'info',
          code: Status[error.code] ?? String(error.code),
        };
      return { type: 'info', code: 'UNKNOWN' };
    },
    read,
    // The client is its caller's, which closes it.
    close: () => {},
  };
}
