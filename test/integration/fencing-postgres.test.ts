import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockClient, type Lock } from '../../src/client/index.js';
import { withResolvers } from '../../src/common/deferred.js';
import { HighWaterMarks } from '../../src/fencing/index.js';
import {
  FencingLockMismatchError,
  PostgresMarkStore,
  StaleTokenError,
  ensureFencingTable,
  fenced,
  fencingTableSql,
} from '../../src/fencing/postgres.js';
import { startPostgres, type PostgresCluster } from '../setup/postgres-process.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { scaled } from '../support/timing.js';

/**
 * lockstream/fencing/postgres against a real PostgreSQL (a private cluster, test/setup/
 * postgres-process.ts) with locks from a real lockstream server: the mark is checked, raised and
 * committed with the holder's writes, or refused with nothing of them committed.
 */

let cluster: PostgresCluster;
let lockstream: ServerProcess;
let locks: LockClient;
const opened: pg.Client[] = [];

beforeAll(async () => {
  [cluster, lockstream] = await Promise.all([startPostgres(), startServerProcess([])]);
  locks = new LockClient(lockstream.address);
}, scaled(60_000));

afterAll(async () => {
  locks?.close();
  await Promise.all([lockstream?.kill('SIGTERM'), cluster?.stop()]);
});

afterEach(async () => {
  await Promise.all(opened.splice(0).map((client) => client.end()));
});

async function connect(): Promise<pg.Client> {
  const client = new pg.Client(cluster.url);
  opened.push(client);
  await client.connect();
  return client;
}

let tables = 0;
/** A fresh mark table and data table for one test. */
async function freshTables(db: pg.Client): Promise<{ table: string; data: string }> {
  tables += 1;
  const table = `fencing_${tables}`;
  const data = `writes_${tables}`;
  await ensureFencingTable(db, { table });
  await db.query(`CREATE TABLE ${data} (id text PRIMARY KEY, token numeric(20,0) NOT NULL)`);
  return { table, data };
}

/** A lock's token after `count` earlier holders released it: a real handover each time. */
async function holders(name: string, count: number): Promise<Lock[]> {
  const held: Lock[] = [];
  for (let i = 0; i < count; i++) {
    const lock = await locks.acquire(name);
    held.push(lock);
    await lock.release();
  }
  return held;
}

async function rows(db: pg.Client, query: string): Promise<unknown[]> {
  return (await db.query<Record<string, unknown>>(query)).rows;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );
}

describe('fenced() on PostgreSQL', () => {
  it("commits each holder's writes with its mark, and refuses the old holder after the handover, committing nothing", async () => {
    const db = await connect();
    await ensureFencingTable(db); // the default table, lockstream_fencing
    await ensureFencingTable(db); // twice: no error
    await db.query('CREATE TABLE invoices (id text PRIMARY KEY, token numeric(20,0) NOT NULL)');
    const write = (tx: pg.Client, id: string, lock: Lock) =>
      tx.query('INSERT INTO invoices (id, token) VALUES ($1, $2)', [id, lock.token.toString()]);

    const first = await locks.acquire('fencing/pg/invoices');
    const firstDb = await connect();
    await fenced(firstDb, { resource: 'invoices', lock: first }, (tx) => write(tx, 'a1', first));
    const result = await fenced(firstDb, { resource: 'invoices', lock: first }, async (tx) => {
      await write(tx, 'a2', first);
      return 'a2 written';
    });
    expect(result).toBe('a2 written');
    await first.release();

    const second = await locks.acquire('fencing/pg/invoices');
    expect(second.token).toBeGreaterThan(first.token);
    await fenced(await connect(), { resource: 'invoices', lock: second }, (tx) => write(tx, 'b1', second));

    // The first holder was paused across the handover and now writes again.
    let ran = false;
    const error = await rejection(
      fenced(firstDb, { resource: 'invoices', lock: first }, async (tx) => {
        ran = true;
        await write(tx, 'a3', first);
      }),
    );
    expect(error).toBeInstanceOf(StaleTokenError);
    expect(error).toMatchObject({
      resource: 'invoices',
      lockName: 'fencing/pg/invoices',
      token: first.token,
      mark: second.token,
    });
    expect((error as Error).message).toBe(
      `stale fencing token for resource "invoices": lock "fencing/pg/invoices" token ${first.token} ` +
        `is below the resource's high-water mark ${second.token}`,
    );
    expect(ran).toBe(false);
    expect(await rows(db, 'SELECT id, token::text FROM invoices ORDER BY id')).toEqual([
      { id: 'a1', token: String(first.token) },
      { id: 'a2', token: String(first.token) },
      { id: 'b1', token: String(second.token) },
    ]);
    expect(await rows(db, 'SELECT resource, lock_name, token::text FROM lockstream_fencing')).toEqual([
      { resource: 'invoices', lock_name: 'fencing/pg/invoices', token: String(second.token) },
    ]);
    // The refused connection is usable again: no transaction left open.
    expect(await rows(firstDb, 'SELECT pg_current_xact_id_if_assigned() AS xid')).toEqual([{ xid: null }]);
    await second.release();
  });

  it('refuses t1 when t2 > t1 took the mark first and committed while t1 waited for the row', async () => {
    const db = await connect();
    const { table, data } = await freshTables(db);
    const [t1, t2] = await holders('fencing/pg/concurrent', 2);
    const [one, two] = [await connect(), await connect()];
    const onePid = (await one.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;

    const twoWrote = withResolvers();
    const twoMayCommit = withResolvers();
    const second = fenced(
      two,
      { resource: 'ledger', lock: t2! },
      async (tx) => {
        await tx.query(`INSERT INTO ${data} VALUES ('t2', $1)`, [t2!.token.toString()]);
        twoWrote.resolve();
        await twoMayCommit.promise;
      },
      { table },
    );
    await twoWrote.promise;
    let oneRan = false;
    const first = fenced(
      one,
      { resource: 'ledger', lock: t1! },
      async (tx) => {
        oneRan = true;
        await tx.query(`INSERT INTO ${data} VALUES ('t1', $1)`, [t1!.token.toString()]);
      },
      { table },
    );
    // t1's check waits on the mark row's lock, held by t2's open transaction.
    await expect
      .poll(async () => rows(db, `SELECT wait_event_type FROM pg_stat_activity WHERE pid = ${onePid}`), {
        timeout: scaled(10_000),
      })
      .toEqual([{ wait_event_type: 'Lock' }]);
    twoMayCommit.resolve();
    await second;
    const error = await rejection(first);
    expect(error).toBeInstanceOf(StaleTokenError);
    expect(error).toMatchObject({ token: t1!.token, mark: t2!.token });
    expect(oneRan).toBe(false);
    expect(await rows(db, `SELECT id FROM ${data}`)).toEqual([{ id: 't2' }]);
    expect(await rows(db, `SELECT token::text FROM ${table}`)).toEqual([{ token: String(t2!.token) }]);
  });

  it('lets t2 wait for t1 when t1 took the mark first: they commit in token order', async () => {
    const db = await connect();
    const { table, data } = await freshTables(db);
    const [t1, t2] = await holders('fencing/pg/in-order', 2);
    const [one, two] = [await connect(), await connect()];
    const twoPid = (await two.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const oneWrote = withResolvers();
    const oneMayCommit = withResolvers();
    const first = fenced(
      one,
      { resource: 'ledger', lock: t1! },
      async (tx) => {
        await tx.query(`INSERT INTO ${data} VALUES ('t1', $1)`, [t1!.token.toString()]);
        oneWrote.resolve();
        await oneMayCommit.promise;
      },
      { table },
    );
    await oneWrote.promise;
    const second = fenced(
      two,
      { resource: 'ledger', lock: t2! },
      async (tx) => {
        // What t2's work sees once its check returns: t1's commit.
        const seen = await tx.query<{ id: string }>(`SELECT id FROM ${data}`);
        await tx.query(`INSERT INTO ${data} VALUES ('t2', $1)`, [t2!.token.toString()]);
        return seen.rows.map((row) => row.id);
      },
      { table },
    );
    await expect
      .poll(async () => rows(db, `SELECT wait_event_type FROM pg_stat_activity WHERE pid = ${twoPid}`), {
        timeout: scaled(10_000),
      })
      .toEqual([{ wait_event_type: 'Lock' }]);
    oneMayCommit.resolve();
    await first;
    expect(await second).toEqual(['t1']);
    expect(await rows(db, `SELECT id FROM ${data} ORDER BY id`)).toEqual([{ id: 't1' }, { id: 't2' }]);
    expect(await rows(db, `SELECT token::text FROM ${table}`)).toEqual([{ token: String(t2!.token) }]);
  });

  it('rolls the mark back with a failing write: the write and the mark are one transaction', async () => {
    const db = await connect();
    const { table, data } = await freshTables(db);
    const [t1, t2] = await holders('fencing/pg/atomic', 2);
    await fenced(db, { resource: 'r', lock: t1! }, (tx) => tx.query(`INSERT INTO ${data} VALUES ('x', 1)`), {
      table,
    });

    // t2's write fails (a duplicate key): the error comes through and t2's mark is not kept.
    const failed = await rejection(
      fenced(db, { resource: 'r', lock: t2! }, (tx) => tx.query(`INSERT INTO ${data} VALUES ('x', 2)`), {
        table,
      }),
    );
    expect(failed).toMatchObject({ code: '23505' });
    expect(await rows(db, `SELECT token::text FROM ${table}`)).toEqual([{ token: String(t1!.token) }]);

    // A callback that catches its failed statement's error: COMMIT rolls back, and fenced says so.
    const swallowed = await rejection(
      fenced(
        db,
        { resource: 'r', lock: t2! },
        async (tx) => {
          await tx.query(`INSERT INTO ${data} VALUES ('y', 2)`);
          await tx.query(`INSERT INTO ${data} VALUES ('x', 2)`).catch(() => undefined);
          return 'done?';
        },
        { table },
      ),
    );
    expect((swallowed as Error).message).toMatch(
      /^fenced: the transaction for resource "r" was rolled back at COMMIT/,
    );
    expect(await rows(db, `SELECT id, token::text FROM ${data}`)).toEqual([{ id: 'x', token: '1' }]);
    expect(await rows(db, `SELECT token::text FROM ${table}`)).toEqual([{ token: String(t1!.token) }]);

    // A thrown error in the callback rolls back too; then t2 writes for real.
    await expect(
      fenced(db, { resource: 'r', lock: t2! }, () => Promise.reject(new Error('caller gave up')), { table }),
    ).rejects.toThrow('caller gave up');
    expect(await rows(db, `SELECT token::text FROM ${table}`)).toEqual([{ token: String(t1!.token) }]);
    await fenced(db, { resource: 'r', lock: t2! }, (tx) => tx.query(`UPDATE ${data} SET token = 2`), {
      table,
    });
    expect(await rows(db, `SELECT token::text FROM ${table}`)).toEqual([{ token: String(t2!.token) }]);
  });

  it('refuses with serialization_failure at REPEATABLE READ when a higher token committed meanwhile; the retry is stale', async () => {
    const db = await connect();
    const { table } = await freshTables(db);
    const [t1, t2] = await holders('fencing/pg/repeatable', 2);
    await fenced(db, { resource: 'r', lock: t1! }, async () => undefined, { table });
    const [one, two] = [await connect(), await connect()];
    const onePid = (await one.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const twoChecked = withResolvers();
    const twoMayCommit = withResolvers();
    const second = fenced(
      two,
      { resource: 'r', lock: t2! },
      async () => {
        twoChecked.resolve();
        await twoMayCommit.promise;
      },
      { table, isolationLevel: 'repeatable read' },
    );
    await twoChecked.promise;
    const first = fenced(one, { resource: 'r', lock: t1! }, async () => undefined, {
      table,
      isolationLevel: 'repeatable read',
    });
    await expect
      .poll(async () => rows(db, `SELECT wait_event_type FROM pg_stat_activity WHERE pid = ${onePid}`), {
        timeout: scaled(10_000),
      })
      .toEqual([{ wait_event_type: 'Lock' }]);
    twoMayCommit.resolve();
    await second;
    expect(await rejection(first)).toMatchObject({ code: '40001' });
    await expect(
      fenced(one, { resource: 'r', lock: t1! }, async () => undefined, {
        table,
        isolationLevel: 'repeatable read',
      }),
    ).rejects.toBeInstanceOf(StaleTokenError);
  });

  it("refuses another lock's token on a fenced resource, keeps uint64 tokens exact, and refuses a pool", async () => {
    const db = await connect();
    const { table } = await freshTables(db);
    const max = (1n << 64n) - 1n;
    await fenced(db, { resource: 'big', lock: { name: 'big-lock', token: max } }, async () => undefined, {
      table,
    });
    expect(await rows(db, `SELECT token::text FROM ${table}`)).toEqual([{ token: String(max) }]);
    const error = await rejection(
      fenced(db, { resource: 'big', lock: { name: 'other-lock', token: max } }, async () => undefined, {
        table,
      }),
    );
    expect(error).toBeInstanceOf(FencingLockMismatchError);
    expect((error as Error).message).toBe(
      `resource "big" is fenced by lock "big-lock" (high-water mark ${max}), not by lock "other-lock" (token ${max})`,
    );

    const pool = new pg.Pool({ connectionString: cluster.url, max: 2 });
    try {
      await expect(
        fenced(pool, { resource: 'big', lock: { name: 'big-lock', token: max } }, async () => undefined, {
          table,
        }),
      ).rejects.toThrow('fenced needs one connection for its transaction');
    } finally {
      await pool.end();
    }
    expect(() => fencingTableSql({ table: 'x; DROP TABLE y' })).toThrow(TypeError);
  });

  it('keeps the marks of a restarted resource with PostgresMarkStore (for the interceptor and the middleware)', async () => {
    const pool = new pg.Pool({ connectionString: cluster.url, max: 2 });
    try {
      const db = await connect();
      const { table } = await freshTables(db);
      const [t1, t2] = await holders('fencing/pg/store', 2);
      const before = new HighWaterMarks({ store: new PostgresMarkStore(pool, { table }) });
      await before.admit('queue', t1!);
      await before.admit('queue', t2!);
      // The resource restarts: new marks over the same table still refuse t1.
      const after = new HighWaterMarks({ store: new PostgresMarkStore(pool, { table }) });
      expect(await after.mark('queue')).toEqual({ lockName: 'fencing/pg/store', token: t2!.token });
      await expect(after.admit('queue', t1!)).rejects.toMatchObject({ token: t1!.token, mark: t2!.token });
      await after.admit('queue', t2!);
    } finally {
      await pool.end();
    }
  });
});
