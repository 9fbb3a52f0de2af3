/**
 * ListLocks after many lock names were used (issue 25): a lockstream server on ZooKeeper (its
 * own process, fsync on, ZooKeeper's default container check), `names` distinct names each
 * acquired and released once through the SDK (`in-flight` at a time), then ListLocks timed
 * right after, while the empty lock parents are all still there:
 *
 * - empty: nobody holds anything; the first page (page_size 1000) and the whole listing by pages;
 * - held: `held` locks spread over the names, held through a second lockstream server on the
 *   same root; the first page and the whole listing again, through the first server.
 *
 * Each listing is checked (nothing when empty, exactly the held locks otherwise) and timed
 * `repeat` times; prints each time and the median. `--client addon` runs both servers on the
 * `zookeeper` addon client. `npm run bench:list-locks [-- --names N --held N --client addon]`.
 */
import { execFileSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import type { LockClient, Lock } from '../dist/client/index.js';
import { startZooKeeper } from '../test/setup/zookeeper-process.js';
import { startLockstreamServer } from './processes.js';

const { values } = parseArgs({
  options: {
    names: { type: 'string', default: '100000' },
    'in-flight': { type: 'string', default: '300' },
    held: { type: 'string', default: '5' },
    repeat: { type: 'string', default: '3' },
    client: { type: 'string', default: 'protocol' },
  },
});
const NAMES = Number(values.names);
const IN_FLIGHT = Number(values['in-flight']);
const HELD = Number(values.held);
const REPEAT = Number(values.repeat);
const SERVER_ARGS = ['--zookeeper-client', values.client];
const PAGE_SIZE = 1000;

const lockName = (i: number): string => `list-bench/${String(i).padStart(7, '0')}`;
const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};

/** Acquires and releases every name once, `IN_FLIGHT` at a time. */
async function useNames(client: LockClient): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < NAMES) {
      const lock = await client.acquire(lockName(next++));
      await lock.release();
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
}

/** The first page's names and the time it took. */
async function firstPage(client: LockClient): Promise<{ ms: number; names: string[] }> {
  const startedAt = performance.now();
  const page = await client.list({ pageSize: PAGE_SIZE });
  return { ms: performance.now() - startedAt, names: page.locks.map((lock) => lock.name) };
}

/** Every page, one after the other, as `lockstream ls` reads them. */
async function wholeListing(client: LockClient): Promise<{ ms: number; names: string[]; pages: number }> {
  const startedAt = performance.now();
  const names: string[] = [];
  let pages = 0;
  let pageToken = '';
  do {
    const page = await client.list({ pageSize: PAGE_SIZE, pageToken });
    names.push(...page.locks.map((lock) => lock.name));
    pageToken = page.nextPageToken;
    pages += 1;
  } while (pageToken !== '');
  return { ms: performance.now() - startedAt, names, pages };
}

async function timed(
  label: string,
  expected: readonly string[],
  list: () => Promise<{ ms: number; names: string[]; pages?: number }>,
): Promise<void> {
  const times: number[] = [];
  let pages = 1;
  for (let run = 0; run < REPEAT; run += 1) {
    const listed = await list();
    if (JSON.stringify(listed.names) !== JSON.stringify(expected.slice(0, listed.names.length)))
      throw new Error(
        `${label}: listed ${JSON.stringify(listed.names)}, expected ${JSON.stringify(expected)}`,
      );
    if (listed.pages !== undefined && listed.names.length !== expected.length)
      throw new Error(`${label}: listed ${listed.names.length} locks in all, expected ${expected.length}`);
    times.push(listed.ms);
    pages = listed.pages ?? 1;
  }
  const each = times.map((ms) => ms.toFixed(0)).join(', ');
  console.log(
    `${label.padEnd(50)} median ${median(times).toFixed(0).padStart(6)} ms  (${each}; ${pages} page(s))`,
  );
}

execFileSync('npm', ['run', '--silent', 'build'], { stdio: 'inherit' });
// Imported once built: the SDK as users run it.
const { LockClient: Client } = await import('../dist/client/index.js');
const zookeeper = await startZooKeeper({ production: true });
try {
  const lister = await startLockstreamServer(zookeeper.connectString, SERVER_ARGS);
  const holder = await startLockstreamServer(zookeeper.connectString, SERVER_ARGS);
  const listing = new Client(lister.address);
  const holding = new Client(holder.address);
  const held: Lock[] = [];
  try {
    console.log(
      `list-locks bench: ${NAMES} names used and released (${IN_FLIGHT} in flight), ${values.client} client, ZooKeeper ${zookeeper.connectString} (fsync on)`,
    );
    const usedAt = performance.now();
    await useNames(listing);
    console.log(`names used in ${((performance.now() - usedAt) / 1000).toFixed(1)} s`);

    await timed('empty parents only: first page of 1000', [], () => firstPage(listing));
    await timed('empty parents only: every page', [], () => wholeListing(listing));

    const heldNames = Array.from({ length: HELD }, (_, k) =>
      lockName(Math.floor(((k + 0.5) * NAMES) / HELD)),
    );
    for (const name of heldNames) held.push(await holding.acquire(name));
    const label = `${HELD} held on another instance`;
    await timed(`${label}: first page of 1000`, heldNames, () => firstPage(listing));
    await timed(`${label}: every page`, heldNames, () => wholeListing(listing));
  } finally {
    await Promise.all(held.map((lock) => lock.release()));
    listing.close();
    holding.close();
    await Promise.all([lister.stop(), holder.stop()]);
  }
} finally {
  await zookeeper.stop();
}
