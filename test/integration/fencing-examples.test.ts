import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type PostgresCluster } from '../setup/postgres-process.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { scaled } from '../support/timing.js';

/**
 * examples/typescript/fencing.ts against a real lockstream server and a real PostgreSQL, run as
 * a user runs it (it imports @lockstream/client/fencing, which tsconfig.json's paths map to src/).
 * docs/fencing.md shows its [docs:fencing-http] and [docs:fencing-postgres] regions
 * (test/integration/docs-code-blocks.test.ts).
 */

const repo = fileURLToPath(new URL('../../', import.meta.url));
const EXAMPLE = 'examples/typescript/fencing.ts';

describe('the fencing example', () => {
  let cluster: PostgresCluster;
  let server: ServerProcess;

  beforeAll(async () => {
    [cluster, server] = await Promise.all([startPostgres(), startServerProcess([])]);
  }, scaled(60_000));

  afterAll(async () => {
    await Promise.all([server?.kill('SIGTERM'), cluster?.stop()]);
  });

  it("writes through both resources as two holders in turn, and both refuse the first holder's late write", async () => {
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', join(repo, EXAMPLE), '--address', server.address, '--database', cluster.url],
      { cwd: repo, timeout: scaled(30_000) },
    );
    expect(stderr).toBe('');
    const match =
      /^holder 1: token=(\d+) http=200 postgres=committed\nholder 2: token=(\d+) http=200 postgres=committed\nstale holder: token=(\d+) http=409 postgres=StaleTokenError mark=(\d+)\n$/.exec(
        stdout,
      );
    expect(match, stdout).not.toBeNull();
    const [, first, second, stale, mark] = match!.map((text) => (/^\d+$/.test(text) ? BigInt(text) : 0n));
    expect(second).toBeGreaterThan(first!);
    expect(stale).toBe(first);
    expect(mark).toBe(second);

    const db = new pg.Client(cluster.url);
    await db.connect();
    try {
      const invoices = await db.query('SELECT id FROM example_invoices ORDER BY token');
      expect(invoices.rows).toEqual([{ id: `holder-1-${first}` }, { id: `holder-2-${second}` }]);
      const marks = await db.query('SELECT resource, lock_name, token::text FROM lockstream_fencing');
      expect(marks.rows).toEqual([
        { resource: 'invoices', lock_name: 'examples/fencing', token: String(second) },
      ]);
    } finally {
      await db.end();
    }
  });
});
