/**
 * The records workload's PostgreSQL store (a CounterStore of counter-stores.ts): each counter is
 * a row of `jepsen_counters` (its ids as text[], and a revision counting its writes), appended to
 * as the lock's holder through lockstream/fencing/postgres, the counter's name (`r0/k1`) as the
 * fenced resource and the lockstream lock held as the fence:
 *
 * 1. the read, in a fenced transaction: the counter's mark rises to the holder's token before the
 *    row is read, so from then on no older holder can write it;
 * 2. the thinking (the `read` line first: where `pause-writer` stops a holder);
 * 3. the write, in a fenced transaction: what was read, with the id appended (a blind write: only
 *    the token guards it). A holder paused at 2 past its loss, woken after a later holder read or
 *    wrote the counter, is refused here (StaleTokenError).
 *
 * Both must be fenced: a write fenced alone could land between a later holder's read and its
 * write, and be lost. With `fenced: false` (the planted run, `unguarded-records`) the same two
 * steps run as plain transactions, the token never looked at: the woken holder overwrites what
 * the later holders appended, and those updates are lost.
 */
import pg from 'pg';
import { fenced, FencingError, StaleTokenError, type FencedTarget } from '../../../src/fencing/postgres.js';
import type { CounterRead, CounterStore } from './counter-stores.js';

/** The store's name in the history (`store`). */
export const POSTGRES_STORE = 'pg';

const TABLE = 'jepsen_counters';

/** The counters' table (created once, before the clients start: net/postgres-hosts.ts). */
export const COUNTERS_TABLE_SQL = `CREATE TABLE IF NOT EXISTS ${TABLE} (
  name text PRIMARY KEY,
  ids text[] NOT NULL,
  revision bigint NOT NULL
)`;

/** The write: the whole list, and the revision one up (1 for a new row). */
const WRITE_SQL = `INSERT INTO ${TABLE} AS c (name, ids, revision) VALUES ($1, $2, 1)
  ON CONFLICT (name) DO UPDATE SET ids = EXCLUDED.ids, revision = c.revision + 1
  RETURNING revision::text AS revision`;

/** A write that failed once its COMMIT was sent (or about to be): it may have committed. */
class CommitUnknownError extends Error {
  constructor(readonly reason: unknown) {
    super(`outcome unknown at COMMIT: ${reason instanceof Error ? reason.message : String(reason)}`);
  }
}

type Guard = <T>(
  client: pg.PoolClient,
  target: FencedTarget,
  work: (tx: pg.PoolClient) => Promise<T>,
) => Promise<T>;

/** The planted run's guard: `work` in a plain transaction, the token never looked at. */
async function plainTransaction<T>(
  client: pg.PoolClient,
  _target: FencedTarget,
  work: (tx: pg.PoolClient) => Promise<T>,
): Promise<T> {
  await client.query('BEGIN');
  let result: T;
  try {
    result = await work(client);
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
  const commit = await client.query('COMMIT');
  if (commit.command === 'ROLLBACK') throw new Error('the transaction was rolled back at COMMIT');
  return result;
}

async function readCounter(db: pg.Pool | pg.PoolClient, name: string): Promise<CounterRead> {
  const { rows } = await db.query<{ ids: string[]; revision: string }>(
    `SELECT ids, revision::text AS revision FROM ${TABLE} WHERE name = $1`,
    [name],
  );
  return rows[0] ?? { ids: [], revision: '0' };
}

/**
 * Counters in PostgreSQL at `url`, each read and written in a transaction of its own through
 * `fenced` (or, with `fenced: false`, a plain one).
 */
export function postgresCounterStore(url: string, options: { readonly fenced: boolean }): CounterStore {
  // One connection per increment in flight: one given up (timed out) keeps its own until it ends.
  const pool = new pg.Pool({
    connectionString: url,
    max: 4,
    idleTimeoutMillis: 0,
    connectionTimeoutMillis: 5_000,
  });
  // An idle connection that broke: the pool drops it; the next increment opens another.
  pool.on('error', () => {});
  const guard: Guard = options.fenced
    ? (client, target, work) => fenced(client, target, work)
    : plainTransaction;
  return {
    name: POSTGRES_STORE,
    async append(holder, key, id, told) {
      const name = `${holder.lock}/${key}`;
      const target: FencedTarget = { resource: name, lock: { name: holder.lock, token: holder.token } };
      const client = await pool.connect();
      let committing = false;
      let broken = false;
      try {
        const current = await guard(client, target, (tx) => readCounter(tx, name));
        await told(current);
        return await guard(client, target, async (tx) => {
          const { rows } = await tx.query<{ revision: string }>(WRITE_SQL, [name, [...current.ids, id]]);
          committing = true;
          return rows[0]!.revision;
        });
      } catch (error) {
        // A refusal rolled back and left the connection as it was; after anything else, drop it.
        broken = !(error instanceof FencingError);
        // Before its COMMIT was sent a transaction cannot have committed; after, anything may have.
        throw committing ? new CommitUnknownError(error) : error;
      } finally {
        client.release(broken);
      }
    },
    judge(error) {
      if (error instanceof StaleTokenError) return { type: 'fail', code: 'STALE_TOKEN' };
      if (error instanceof FencingError) return { type: 'fail', code: error.code };
      if (error instanceof CommitUnknownError) return { type: 'info', code: 'COMMIT_UNKNOWN' };
      const code = (error as { code?: unknown }).code;
      return { type: 'fail', code: typeof code === 'string' ? code : 'NOT_COMMITTED' };
    },
    read: (lock, key) => readCounter(pool, `${lock}/${key}`),
    close: () => void pool.end().catch(() => {}),
  };
}
