// Fencing that reaches the resource: writes made under a lock carry its fencing token, and the
// resources refuse a token below the highest they have seen. One HTTP resource (run here, in
// process, behind fencingMiddleware) and one PostgreSQL table (written through `fenced`):
//
//   npx tsx examples/typescript/fencing.ts --address 127.0.0.1:50051 --database postgres://127.0.0.1/app
//
// Two holders of one lock write in turn; then the first, as if it had been paused past its
// lock's loss, writes again and both resources refuse it. Prints one line per attempt:
// `holder N: token=T http=200 postgres=committed`, then `stale holder: token=T http=409
// postgres=StaleTokenError mark=M`.
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { LockClient, type Lock } from '@lockstream/client';
import { fencedFetch, fencingMiddleware } from '@lockstream/client/fencing';
import { ensureFencingTable, fenced, StaleTokenError } from '@lockstream/client/fencing/postgres';

const { values: flags } = parseArgs({
  options: {
    address: { type: 'string', default: '127.0.0.1:50051' },
    database: { type: 'string', default: 'postgres://127.0.0.1:5432/postgres' },
    name: { type: 'string', default: 'examples/fencing' },
  },
});

const locks = new LockClient(flags.address);
const pool = new pg.Pool({ connectionString: flags.database });

// [docs:fencing-http]
// The resource's side: the middleware admits a request whose token is not below the highest
// it has seen (per resource: by default the lock's name) and raises that mark to it; a stale
// token gets 409, a malformed header 400, none at all 428.
const checkToken = fencingMiddleware();
const reports = http.createServer((req, res) => {
  checkToken(req, res, () => {
    res.end('stored'); // only admitted requests get here
  });
});

// The writer's side: every request made under the lock carries its token.
async function putReport(lock: Lock, url: string): Promise<number> {
  const response = await fencedFetch(lock, `${url}/reports/daily`, { method: 'PUT', body: 'totals' });
  return response.status; // 409: a later holder has written, this one has lost the lock
}
// [/docs:fencing-http]

// [docs:fencing-postgres]
await ensureFencingTable(pool); // CREATE TABLE IF NOT EXISTS lockstream_fencing (...)
await pool.query('CREATE TABLE IF NOT EXISTS example_invoices (id text PRIMARY KEY, token numeric(20,0))');

async function recordInvoice(lock: Lock, id: string): Promise<void> {
  const client = await pool.connect(); // one connection: fenced runs one transaction on it
  try {
    // Checks the token against the resource's mark and raises it, then runs the writes, all in
    // one transaction. Below the mark: StaleTokenError, rolled back, the writes never run.
    await fenced(client, { resource: 'invoices', lock }, async (tx) => {
      await tx.query('INSERT INTO example_invoices (id, token) VALUES ($1, $2)', [id, String(lock.token)]);
    });
  } finally {
    client.release();
  }
}
// [/docs:fencing-postgres]

async function attempt(label: string, lock: Lock, url: string): Promise<void> {
  const status = await putReport(lock, url);
  let postgres = 'committed';
  try {
    await recordInvoice(lock, `${label.replace(/ /g, '-')}-${lock.token}`);
  } catch (error) {
    if (!(error instanceof StaleTokenError)) throw error;
    postgres = `StaleTokenError mark=${error.mark}`;
  }
  console.log(`${label}: token=${lock.token} http=${status} postgres=${postgres}`);
}

reports.listen(0, '127.0.0.1');
await once(reports, 'listening');
const url = `http://127.0.0.1:${(reports.address() as AddressInfo).port}`;
try {
  const first = await locks.acquire(flags.name);
  await attempt('holder 1', first, url);
  await first.release();
  const second = await locks.acquire(flags.name);
  await attempt('holder 2', second, url);
  // The first holder's lock is long gone, but it does not know: its writes are refused.
  await attempt('stale holder', first, url);
  await second.release();
} finally {
  reports.close();
  locks.close();
  await pool.end();
}
