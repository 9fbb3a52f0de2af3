/**
 * Two lockstream builds side by side: A, another checkout (`--base`, built with `npm run build`),
 * and B, this one; each its own `lockstream serve` with its own lock tree on one ZooKeeper,
 * driven by the same load process, in the order A B B A in every round.
 *
 * The order matters at the size of the changes it is meant to judge. Run A then B, the same
 * build measured 1–5 % slower as B than as A on this machine kind (H 900/858, 968/937,
 * 959/938 handoffs/s; U through Acquire streams 426/420, 457/434 ops/s), for reasons not
 * pinned down (ZooKeeper's state grows with every run; the runs share two CPUs). A B B A
 * cancels a drift that grows steadily through a round; what is left is noise, about ±3 % for
 * one round of the same build (U 0.98×, H 0.97×), so judge a change over several rounds.
 *
 *   npm run bench:side-by-side -- --base ../other-checkout [--workloads U,H,P] [--rpc session|acquire]
 *     [--rounds 2] [--cycles 2000] [--duration-ms 5000] [--capacity] [--server-node-args=...]
 *
 * With `--capacity`, also the capacity run (bench/capacity.ts: 10,000 held + 10,000 waiting, the
 * server's RSS) of each build, through one SDK session and over Acquire streams, A B B A, each
 * on a fresh server of its own.
 *
 * Each server first runs every workload once, unrecorded (a fresh server keeps getting faster
 * for a while). Prints every run, then per workload each build's mean ops/s, p50 and server
 * CPU µs per acquisition, and B ÷ A.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { startZooKeeper } from '../test/setup/zookeeper-process.js';
import { runCapacity } from './capacity.js';
import { lockstreamCpuMicros } from './measure.js';
import { nodeScript, spawnLineProcess, startLockstreamServer, type LockstreamServer } from './processes.js';
import type { WorkloadName, WorkloadResult } from './workloads.js';

const { values: flags } = parseArgs({
  options: {
    base: { type: 'string' },
    workloads: { type: 'string', default: 'U,H,P' },
    rpc: { type: 'string', default: 'session' },
    rounds: { type: 'string', default: '2' },
    cycles: { type: 'string', default: '2000' },
    'duration-ms': { type: 'string', default: '5000' },
    capacity: { type: 'boolean', default: false },
    'server-node-args': { type: 'string', default: '' },
  },
});
/** Options for both lock servers' Node (e.g. `--server-node-args=--cpu-prof`). */
const SERVER_NODE_ARGS = flags['server-node-args'].split(' ').filter((arg) => arg !== '');

const baseCli = flags.base === undefined ? undefined : resolve(flags.base, 'dist/cli.js');
if (baseCli === undefined || !existsSync(baseCli)) {
  console.error(
    baseCli === undefined
      ? 'usage: npm run bench:side-by-side -- --base <another lockstream checkout, built>'
      : `${baseCli} does not exist: run npm run build in ${flags.base}`,
  );
  process.exit(2);
}
if (flags.rpc !== 'session' && flags.rpc !== 'acquire') {
  console.error(`--rpc must be session or acquire, not ${flags.rpc}`);
  process.exit(2);
}
const WORKLOADS = flags.workloads.split(',') as WorkloadName[];
const ROUNDS = Number(flags.rounds);
const CLIENT = flags.rpc === 'acquire' ? ['--target', 'grpc', '--per-lock'] : ['--target', 'sdk-shared'];

interface Run {
  readonly opsPerSec: number;
  readonly p50: number;
  readonly serverCpuMicrosPerOp: number;
}

async function measure(server: LockstreamServer, workload: WorkloadName, prefix: string): Promise<Run> {
  const load = spawnLineProcess(
    ...nodeScript('./load.ts', [
      ...CLIENT,
      '--server',
      server.address,
      '--workload',
      workload,
      '--prefix',
      prefix,
      '--cycles',
      flags.cycles,
      // As `npm run bench`: V8 optimizes the server's path only after many calls.
      '--warmup',
      '2000',
      '--duration-ms',
      flags['duration-ms'],
    ]),
  );
  try {
    await load.next('ready');
    const before = await lockstreamCpuMicros(server.httpPort);
    load.send('go');
    const { result } = (await load.next('done')) as { result: WorkloadResult };
    const after = await lockstreamCpuMicros(server.httpPort);
    return {
      opsPerSec: (result.acquisitions * 1000) / result.durationMs,
      p50: result.latencyMs.p50,
      serverCpuMicrosPerOp: (after - before) / Math.max(1, result.allAcquisitions),
    };
  } finally {
    await load.exited;
  }
}

const mean = (values: readonly number[]): number => values.reduce((sum, v) => sum + v, 0) / values.length;
const cell = (value: number, digits: number, width: number): string => value.toFixed(digits).padStart(width);

const zookeeper = await startZooKeeper({ production: true });
const servers = {
  A: await startLockstreamServer(zookeeper.connectString, [], SERVER_NODE_ARGS, {
    cli: baseCli,
    root: '/side-a',
  }),
  B: await startLockstreamServer(zookeeper.connectString, [], SERVER_NODE_ARGS, { root: '/side-b' }),
};
try {
  console.log(`A: ${baseCli}\nB: this checkout\n${flags.rpc} RPC, ${ROUNDS} rounds of A B B A`);
  // A fresh server keeps speeding up for several runs (V8, ZooKeeper's JIT): one unrecorded
  // run of each workload on each first.
  for (const workload of WORKLOADS) {
    for (const side of ['A', 'B'] as const)
      await measure(servers[side], workload, `${workload.toLowerCase()}-warm`);
  }
  const runs = new Map<string, Run[]>();
  for (let round = 1; round <= ROUNDS; round += 1) {
    for (const workload of WORKLOADS) {
      for (const [turn, side] of (['A', 'B', 'B', 'A'] as const).entries()) {
        const run = await measure(servers[side], workload, `${workload.toLowerCase()}-${round}-${turn}`);
        const key = `${workload} ${side}`;
        runs.set(key, [...(runs.get(key) ?? []), run]);
        console.log(
          `  round ${round} ${workload} ${side}: ${run.opsPerSec.toFixed(0)} ops/s, ` +
            `p50 ${run.p50} ms, server ${run.serverCpuMicrosPerOp.toFixed(0)} µs/op`,
        );
      }
    }
  }
  console.log('\nworkload  A ops/s  B ops/s  B ÷ A   A p50   B p50   A µs/op  B µs/op');
  for (const workload of WORKLOADS) {
    const of = (side: 'A' | 'B', pick: (run: Run) => number): number =>
      mean((runs.get(`${workload} ${side}`) ?? []).map(pick));
    const ops = (side: 'A' | 'B'): number => of(side, (run) => run.opsPerSec);
    const p50 = (side: 'A' | 'B'): number => of(side, (run) => run.p50);
    const cpu = (side: 'A' | 'B'): number => of(side, (run) => run.serverCpuMicrosPerOp);
    const cells = [
      cell(ops('A'), 0, 7),
      cell(ops('B'), 0, 8),
      cell(ops('B') / ops('A'), 3, 7),
      cell(p50('A'), 3, 7),
      cell(p50('B'), 3, 7),
      cell(cpu('A'), 0, 8),
      cell(cpu('B'), 0, 8),
    ];
    console.log(`${workload.padEnd(8)}  ${cells.join(' ')}`);
  }
  if (flags.capacity) await capacities();
} finally {
  await Promise.all([servers.A.stop(), servers.B.stop()]);
  await zookeeper.stop();
}

/** The capacity run of each build (its RSS with 10,000 held + 10,000 waiting), A B B A per RPC. */
async function capacities(): Promise<void> {
  const builds = { A: { cli: baseCli!, root: '/side-capacity-a' }, B: { root: '/side-capacity-b' } };
  const mb = (bytes: number): string => (bytes / 2 ** 20).toFixed(0);
  for (const rpc of ['session', 'acquire'] as const) {
    for (const side of ['A', 'B', 'B', 'A'] as const) {
      const result = await runCapacity(zookeeper, { rpc, build: builds[side] });
      console.log(
        `  capacity ${rpc} ${side}: ${result.held} held + ${result.waiting} waiting: RSS ${mb(result.rssIdleBytes)} MB idle, ` +
          `${mb(result.rssHeldBytes)} MB held, ${mb(result.rssLoadedBytes)} MB with waiters`,
      );
    }
  }
}
