/*
 * High-water marks in a PostgreSQL table: its DDL, the one statement that checks and raises a
 * mark (taking the mark row's lock), and a MarkStore over it. Talks to the caller's node-postgres
 * (`pg`) client through the small structural type below: nothing here imports `pg`.
 */
import { fenceOf, type Fence, type FencingHolder } from './header.js';
import { refusal, type Mark, type MarkStore, type RaiseResult } from './marks.js';

/**
 * What the adapter needs of a database handle: `query(text, values)` as node-postgres has it.
 * A `pg.Client` and a `pg.PoolClient` are one connection (a transaction needs one); a `pg.Pool`
 * is good for PostgresMarkStore, whose statements each stand alone, and refused by `fenced`.
 */
export interface PgQueryable {
  query(text: string, values?: unknown[]): Promise<PgResult>;
}

/** The part of node-postgres's QueryResult the adapter reads. */
export interface PgResult {
  readonly rows: readonly unknown[];
  /** The command tag: a COMMIT of a failed transaction answers `ROLLBACK`. */
  readonly command: string;
}

/** The table's name when none is given. */
export const DEFAULT_FENCING_TABLE = 'lockstream_fencing';

/** Where the marks are: `table` (default `lockstream_fencing`), `name` or `schema.name`. */
export interface FencingTableOptions {
  /** Letters, digits, `_` and `$` (not first), with one optional `schema.` prefix; quoted as given. */
  readonly table?: string;
}

/**
 * The table's DDL (`CREATE TABLE IF NOT EXISTS`), for a migration of your own:
 *
 * ```sql
 * CREATE TABLE IF NOT EXISTS "lockstream_fencing" (
 *   resource text PRIMARY KEY,
 *   lock_name text NOT NULL,
 *   token numeric(20,0) NOT NULL CHECK (token >= 0 AND token <= 18446744073709551615),
 *   raised_at timestamptz NOT NULL DEFAULT now()
 * )
 * ```
 *
 * One row per resource: the lock that fences it and the highest token admitted (a uint64, so
 * numeric: bigint stops at 2^63 - 1), and when the mark last rose.
 */
export function fencingTableSql(options: FencingTableOptions = {}): string {
  return [
    `CREATE TABLE IF NOT EXISTS ${tableName(options)} (`,
    '  resource text PRIMARY KEY,',
    '  lock_name text NOT NULL,',
    '  token numeric(20,0) NOT NULL CHECK (token >= 0 AND token <= 18446744073709551615),',
    '  raised_at timestamptz NOT NULL DEFAULT now()',
    ')',
  ].join('\n');
}

/**
 * Creates the table if it does not exist. Two processes creating it at once is not an error
 * (PostgreSQL's IF NOT EXISTS can still fail with a duplicate of the table's type: ignored).
 */
export async function ensureFencingTable(db: PgQueryable, options: FencingTableOptions = {}): Promise<void> {
  try {
    await db.query(fencingTableSql(options));
  } catch (error) {
    // 23505 unique_violation (pg_type), 42P07 duplicate_table: another session created it first.
    const code = (error as { code?: unknown }).code;
    if (code !== '23505' && code !== '42P07') throw error;
  }
}

/**
 * Checks `lock`'s token against `resource`'s mark and raises the mark, as the first statement of
 * a transaction the caller runs (`fenced` runs it for you). Rejects with StaleTokenError or
 * FencingLockMismatchError: then roll back. Once it resolves, the transaction holds the mark
 * row's lock until it ends, so writers of one resource commit one at a time, in token order.
 */
export async function raiseFencingMark(
  tx: PgQueryable,
  target: { readonly resource: string; readonly lock: FencingHolder },
  options: FencingTableOptions = {},
): Promise<void> {
  const fence = fenceOf(target.lock);
  const { admitted, mark } = await raiseMark(tx, tableName(options), target.resource, fence);
  if (!admitted) throw refusal(target.resource, fence, mark);
}

/**
 * The check and raise, in one statement: insert the mark, or on conflict raise it only if it is
 * the same lock's and not above the token. The conflict takes the row's lock whether or not the
 * WHERE holds, and at READ COMMITTED the WHERE is evaluated against the newest committed row
 * (waiting for a writer that holds it): a lower token can never commit after a higher one.
 * When nothing is returned the token was refused; a second statement reads the mark that did.
 */
async function raiseMark(
  db: PgQueryable,
  table: string,
  resource: string,
  fence: Fence,
): Promise<RaiseResult> {
  const raised = await db.query(
    `INSERT INTO ${table} AS mark (resource, lock_name, token) VALUES ($1, $2, $3)
     ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token, raised_at = now()
       WHERE mark.lock_name = EXCLUDED.lock_name AND mark.token <= EXCLUDED.token
     RETURNING lock_name, token::text AS token`,
    [resource, fence.name, fence.token.toString()],
  );
  if (raised.rows.length === 1) return { admitted: true, mark: toMark(raised.rows[0]) };
  const current = await readMark(db, table, resource);
  // Refused but gone: someone deleted the mark between the two statements (outside a
  // transaction only; inside one the row is locked). Report the token as refused by itself.
  return { admitted: false, mark: current ?? { lockName: fence.name, token: fence.token } };
}

async function readMark(db: PgQueryable, table: string, resource: string): Promise<Mark | undefined> {
  const { rows } = await db.query(
    `SELECT lock_name, token::text AS token FROM ${table} WHERE resource = $1`,
    [resource],
  );
  return rows.length === 0 ? undefined : toMark(rows[0]);
}

function toMark(row: unknown): Mark {
  const { lock_name: lockName, token } = row as { lock_name: string; token: string };
  return { lockName, token: BigInt(token) };
}

/**
 * Marks in the PostgreSQL table, for fencingServerInterceptor and fencingMiddleware over a
 * resource that must remember its marks across restarts. Each raise is one statement on its own
 * (pass a pg.Pool or a client that is not inside a transaction). To check a token and write in
 * one transaction, use `fenced` instead.
 */
export class PostgresMarkStore implements MarkStore {
  readonly #db: PgQueryable;
  readonly #table: string;

  constructor(db: PgQueryable, options: FencingTableOptions = {}) {
    this.#db = db;
    this.#table = tableName(options);
  }

  raise(resource: string, fence: Fence): Promise<RaiseResult> {
    return raiseMark(this.#db, this.#table, resource, fence);
  }

  get(resource: string): Promise<Mark | undefined> {
    return readMark(this.#db, this.#table, resource);
  }
}

/** The table's quoted name; a TypeError for a name that is not a plain identifier. */
export function tableName(options: FencingTableOptions): string {
  const table = options.table ?? DEFAULT_FENCING_TABLE;
  if (!/^[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)?$/.test(table)) {
    throw new TypeError(
      `fencing table ${JSON.stringify(table)} is not [schema.]name of letters, digits, _ and $`,
    );
  }
  return table
    .split('.')
    .map((part) => `"${part}"`)
    .join('.');
}
