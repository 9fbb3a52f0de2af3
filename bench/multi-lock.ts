/**
 * Multi-lock throughput (issue 16): `clients` SDK clients, each taking a random set of `size`
 * of `locks` lock names again and again (acquire the set, release it, no hold time) against one
 * lockstream server on ZooKeeper (fsync on), for `duration` ms, two ways in one run:
 *
 * - atomic: `acquireAll(set)`, one multi-lock (one ZooKeeper transaction for the set);
 * - ordered: the classic deadlock-free way without one, each lock of the set acquired in
 *   name order, one after the other (what Curator's InterProcessMultiLock does with sorted
 *   locks), then all released.
 *
 * Rounds alternate the two; medians. Prints sets/s, the wait for a whole set (p50, p99) and the
 * server's CPU per set. `npm run bench:multi-lock [-- --rounds N --duration MS --warmup MS --clients N]`.
 */
import { execFileSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import type { LockClient, Lock } from '../dist/client/index.js';
import { startZooKeeper } from '../test/setup/zookeeper-process.js';
import { lockstreamCpuMicros } from './measure.js';
import { startLockstreamServer } from './processes.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    duration: { type: 'string', default: '10000' },
    warmup: { type: 'string', default: '3000' },
    clients: { type: 'string', default: '32' },
    locks: { type: 'string', default: '16' },
    size: { type: 'string', default: '3' },
  },
});
const ROUNDS = Number(values.rounds);
const DURATION_MS = Number(values.duration);
/** Before each measured window: the server's JIT and ZooKeeper settle (a first window without it ran at half speed). */
const WARMUP_MS = Number(values.warmup);
const CLIENTS = Number(values.clients);
const LOCKS = Number(values.locks);
const SET_SIZE = Number(values.size);
const WAYS = ['atomic', 'ordered'] as const;
type Way = (typeof WAYS)[number];

interface Run {
  readonly way: Way;
  readonly setsPerSec: number;
  readonly p50: number;
  readonly p99: number;
  readonly serverCpuMicrosPerSet: number;
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};
const percentile = (sorted: number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? Number.NaN;

/** A random set of SET_SIZE distinct names (xorshift: the same sets for both ways). */
function setMaker(seed: number): () => string[] {
  let state = seed || 1;
  const next = (): number => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 2 ** 32;
  };
  return () => {
    const chosen = new Set<number>();
    while (chosen.size < SET_SIZE) chosen.add(Math.floor(next() * LOCKS));
    return [...chosen].map((i) => `multi/${String(i).padStart(2, '0')}`);
  };
}

async function takeSet(client: LockClient, way: Way, names: string[]): Promise<() => Promise<void>> {
  if (way === 'atomic') {
    const set = await client.acquireAll(names);
    return () => set.release();
  }
  const held: Lock[] = [];
  for (const name of [...names].sort()) held.push(await client.acquire(name));
  return async () => {
    await Promise.all(held.map((lock) => lock.release()));
  };
}

async function runOnce(address: string, httpPort: number, way: Way, round: number): Promise<Run> {
  const clients = Array.from({ length: CLIENTS }, () => new Client(address));
  const waits: number[] = [];
  let sets = 0;
  let measuring = false;
  let stopped = false;
  const loop = async (client: LockClient, id: number): Promise<void> => {
    const nextSet = setMaker(round * 1000 + id + 1);
    while (!stopped) {
      const asked = performance.now();
      const release = await takeSet(client, way, nextSet());
      if (measuring) {
        waits.push(performance.now() - asked);
        sets += 1;
      }
      await release();
    }
  };
  const running = clients.map((client, id) => loop(client, id));
  await new Promise((resolve) => setTimeout(resolve, WARMUP_MS));
  const cpuBefore = await lockstreamCpuMicros(httpPort);
  measuring = true;
  const startedAt = performance.now();
  await new Promise((resolve) => setTimeout(resolve, DURATION_MS));
  measuring = false;
  const elapsed = performance.now() - startedAt;
  const cpuAfter = await lockstreamCpuMicros(httpPort);
  stopped = true;
  await Promise.all(running);
  for (const client of clients) client.close();
  const sorted = waits.sort((a, b) => a - b);
  return {
    way,
    setsPerSec: (sets * 1000) / elapsed,
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    serverCpuMicrosPerSet: (cpuAfter - cpuBefore) / sets,
  };
}

execFileSync('npm', ['run', '--silent', 'build'], { stdio: 'inherit' });
// Imported once built: the SDK as users run it.
const { LockClient: Client } = await import('../dist/client/index.js');
const zookeeper = await startZooKeeper({ production: true });
const runs: Run[] = [];
try {
  const server = await startLockstreamServer(zookeeper.connectString);
  try {
    console.log(
      `multi-lock bench: ${CLIENTS} clients, random sets of ${SET_SIZE} of ${LOCKS} locks, ${DURATION_MS} ms per run, ${ROUNDS} round(s); ZooKeeper ${zookeeper.connectString} (fsync on)`,
    );
    for (let round = 1; round <= ROUNDS; round += 1) {
      for (const way of round % 2 === 1 ? WAYS : [...WAYS].reverse()) {
        const run = await runOnce(server.address, server.httpPort, way, round);
        runs.push(run);
        console.log(
          `  round ${round} ${way}: ${run.setsPerSec.toFixed(0)} sets/s, wait p50 ${run.p50.toFixed(1)} ms, p99 ${run.p99.toFixed(1)} ms, server CPU ${run.serverCpuMicrosPerSet.toFixed(0)} µs/set`,
        );
      }
    }
  } finally {
    await server.stop();
  }
} finally {
  await zookeeper.stop();
}

const summary = WAYS.map((way) => {
  const of = runs.filter((run) => run.way === way);
  return {
    way,
    setsPerSec: median(of.map((run) => run.setsPerSec)),
    p50: median(of.map((run) => run.p50)),
    p99: median(of.map((run) => run.p99)),
    serverCpuMicrosPerSet: median(of.map((run) => run.serverCpuMicrosPerSet)),
  };
});
console.log('\n| way | sets/s | wait p50 | wait p99 | server CPU per set |\n|---|---:|---:|---:|---:|');
for (const s of summary) {
  console.log(
    `| ${s.way} | ${s.setsPerSec.toFixed(0)} | ${s.p50.toFixed(1)} ms | ${s.p99.toFixed(1)} ms | ${s.serverCpuMicrosPerSet.toFixed(0)} µs |`,
  );
}
const [atomic, ordered] = summary as [(typeof summary)[0], (typeof summary)[0]];
console.log(
  `\natomic / ordered: ${(atomic.setsPerSec / ordered.setsPerSec).toFixed(2)}× the sets/s, ${(atomic.p99 / ordered.p99).toFixed(2)}× the p99 wait`,
);
