/*
 * lockstream/fencing/postgres: a PostgreSQL resource that checks fencing tokens in the same
 * transaction as the writes they guard. `fenced` runs the caller's writes in one transaction that
 * first checks and raises the resource's high-water mark (see postgres-marks.ts for the table).
 *
 * Needs node-postgres (`pg`, an optional peer dependency) only in the caller's hands: this module
 * takes the caller's client and imports nothing from `pg`.
 */
import { raiseFencingMark, tableName, type FencingTableOptions, type PgQueryable } from './postgres-marks.js';
import { fenceOf, type FencingHolder } from './header.js';

export {
  DEFAULT_FENCING_TABLE,
  ensureFencingTable,
  fencingTableSql,
  PostgresMarkStore,
  raiseFencingMark,
  type FencingTableOptions,
  type PgQueryable,
  type PgResult,
} from './postgres-marks.js';
export { FencingError, FencingLockMismatchError, StaleTokenError } from './errors.js';

/** The isolation levels `fenced` can begin its transaction with. */
export type IsolationLevel = 'read committed' | 'repeatable read' | 'serializable';

/** Options of `fenced`. */
export interface FencedOptions extends FencingTableOptions {
  /**
   * `BEGIN ISOLATION LEVEL ...`; by default plain `BEGIN` (the session's default, READ COMMITTED
   * unless configured). The check is sound at every level: at READ COMMITTED a transaction that
   * waited for a higher token's commit is refused; at REPEATABLE READ and SERIALIZABLE it fails
   * with serialization_failure (40001) instead, and retrying it is then refused as stale.
   */
  readonly isolationLevel?: IsolationLevel;
}

/** What `fenced` checks: the resource written to and the lock (or `{ name, token }`) it is written under. */
export interface FencedTarget {
  /** The resource's name in the mark table: a table, a row, a tenant; whatever one lock guards. */
  readonly resource: string;
  readonly lock: FencingHolder;
}

/**
 * Runs `work(tx)` in one transaction on `client` that first checks `target.lock`'s token against
 * `target.resource`'s high-water mark and raises the mark to it:
 *
 * ```ts
 * const client = await pool.connect();
 * try {
 *   await fenced(client, { resource: 'invoices', lock }, async (tx) => {
 *     await tx.query('UPDATE invoices SET paid = true WHERE id = $1', [id]);
 *   });
 * } finally {
 *   client.release();
 * }
 * ```
 *
 * Resolves with what `work` resolved with, once the transaction committed. Rejects, with the
 * transaction rolled back (nothing of `work` and no mark committed), with StaleTokenError when
 * the token is below the mark (a later holder of the lock wrote first; `work` never runs),
 * FencingLockMismatchError when another lock fences the resource, or with `work`'s error, or
 * with an Error when COMMIT rolled back because `work` caught a failed statement's error.
 *
 * Writers of one resource hold its mark row's lock from the check to their commit, so they
 * commit one at a time, and a lower token never commits after a higher one. `client` must be one
 * connection (a pg.Client, or a PoolClient from `pool.connect()`) outside any transaction, and
 * `work` must neither commit nor roll back. If COMMIT itself fails (the connection drops), its
 * error is thrown as is: the outcome is unknown, as for any COMMIT; destroy the connection
 * (`client.release(error)`).
 */
export async function fenced<C extends PgQueryable, T>(
  client: C,
  target: FencedTarget,
  work: (tx: C) => Promise<T>,
  options: FencedOptions = {},
): Promise<T> {
  refusePool(client);
  // Refuse a lock or table that cannot be fenced before opening a transaction for it.
  fenceOf(target.lock);
  tableName(options);
  await client.query(
    options.isolationLevel === undefined ? 'BEGIN' : `BEGIN ISOLATION LEVEL ${level(options.isolationLevel)}`,
  );
  let result: T;
  try {
    await raiseFencingMark(client, target, options);
    result = await work(client);
  } catch (error) {
    // The rollback's own failure (a broken connection) must not hide why we roll back.
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
  const commit = await client.query('COMMIT');
  if (commit.command === 'ROLLBACK') {
    throw new Error(
      `fenced: the transaction for resource ${JSON.stringify(target.resource)} was rolled back at COMMIT: ` +
        'a statement in the callback failed and its error was caught; nothing was written and the mark did not rise',
    );
  }
  return result;
}

function level(isolation: IsolationLevel): string {
  switch (isolation) {
    case 'read committed':
      return 'READ COMMITTED';
    case 'repeatable read':
      return 'REPEATABLE READ';
    case 'serializable':
      return 'SERIALIZABLE';
    default:
      throw new TypeError(`unknown isolation level ${JSON.stringify(isolation)}`);
  }
}

/** A pg.Pool sends each query to any of its connections: BEGIN on one, the writes on another. */
function refusePool(client: object): void {
  if ('totalCount' in client && 'idleCount' in client && 'connect' in client) {
    throw new TypeError(
      'fenced needs one connection for its transaction: pass a pg.Client or `await pool.connect()`, not a pg.Pool',
    );
  }
}
