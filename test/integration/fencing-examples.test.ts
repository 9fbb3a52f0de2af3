import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
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
 * a user runs it (it imports lockstream/fencing through the package's exports, from dist/), and
 * the README's fencing snippets kept the example's own marked excerpts.
 */

const repo = fileURLToPath(new URL('../../', import.meta.url));
const EXAMPLE = 'examples/typescript/fencing.ts';

/** The lines between `// [readme:<mark>]` and `// [/readme:<mark>]` in the example, dedented. */
function excerpt(mark: string): string {
  const lines = readFileSync(join(repo, EXAMPLE), 'utf8').split('\n');
  const start = lines.findIndex((line) => line.trim() === `// [readme:${mark}]`);
  const end = lines.findIndex((line) => line.trim() === `// [/readme:${mark}]`);
  expect(start, `${EXAMPLE} marks its [readme:${mark}] excerpt`).toBeGreaterThanOrEqual(0);
  expect(end).toBeGreaterThan(start + 1);
  const body = lines.slice(start + 1, end);
  const indent = Math.min(...body.filter((line) => line.trim()).map((line) => /^\s*/.exec(line)![0].length));
  return body.map((line) => line.slice(indent)).join('\n');
}

/** The bodies of the ```ts blocks in the README's "### Fencing tokens" section. */
function readmeBlocks(): string[] {
  const readme = readFileSync(join(repo, 'README.md'), 'utf8');
  const from = readme.indexOf('\n### Fencing tokens\n');
  expect(from, 'README.md has a section "### Fencing tokens"').toBeGreaterThanOrEqual(0);
  const next = readme.slice(from + 1).search(/\n#{2,3} /);
  const section = readme.slice(from, next === -1 ? undefined : from + 1 + next);
  return [...section.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
}

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

  it.each(['fencing-http', 'fencing-postgres'])(
    "README.md's Fencing tokens section shows the example's [readme:%s] excerpt verbatim",
    (mark) => {
      const snippet = excerpt(mark);
      expect(
        readmeBlocks().some((block) => block.includes(snippet)),
        `a \`\`\`ts block of "### Fencing tokens" holds ${EXAMPLE}'s [readme:${mark}] excerpt`,
      ).toBe(true);
    },
  );
});
