/**
 * `npm run bench`: lockstream against its floors and the alternatives, in one run, on one
 * ZooKeeper (standalone, fsync on, loopback).
 *
 * Targets, each driven by a separate load process (bench/load.ts, or the Java program for
 * Curator) through the same workloads (bench/workloads.ts):
 * - naive: the textbook recipe in-process (the baseline of the targets);
 * - engine: lockstream's lock engine in-process, no gRPC (floor 1);
 * - curator: Apache Curator's InterProcessMutex / InterProcessReadWriteLock in-process (Java);
 * - etcd: etcd 3.4's lock RPC (its own server, fsync on), a lease per client over one gRPC
 *   channel from Node (U, H and P: it has no read/write locks);
 * - grpc-floor: a gRPC server that grants at once, no store (floor 2);
 * - zk-floor: a gRPC server that does one create and one delete per lock on ZooKeeper and
 *   nothing else (bench/zk-floor.ts; floor 3: what the design allows before lockstream's work),
 *   through the SDK's session; zk-floor-acquire: the same, an Acquire stream per lock;
 *   zk-floor-fenced-acquire: that, with each create and delete in a multi behind a check of a
 *   record the floor owns, as lockstream fences its writes so that sessions can move between
 *   instances (what lockstream's failover costs ZooKeeper and the server, before its own work);
 * - lockstream-zk: `lockstream serve` on ZooKeeper through the SDK as one process uses it: one
 *   shared LockClient, every lock a request on its Session stream;
 * - lockstream-zk-acquire: the same server, a LockClient (connection) per client and an Acquire
 *   stream per lock, as before the Session RPC;
 * - lockstream-memory: `lockstream serve` on its embedded store, one shared LockClient.
 *
 * Prints one table per workload and the targets, writes JSON to bench/results/, then runs the
 * capacity run (bench/capacity.ts). `--smoke` runs everything briefly, for CI.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startZooKeeper, type ZooKeeperProcess } from '../test/setup/zookeeper-process.js';
import { runCapacity, type CapacityResult } from './capacity.js';
import { ETCD_BINARY, startEtcd } from './etcd/etcd-process.js';
import { lockstreamCpuMicros, processCpuMicros, zooKeeperCounters, zooKeeperDelta } from './measure.js';
import { BENCH_DIR, nodeScript, spawnLineProcess, startLockstreamServer } from './processes.js';
import type { WorkloadName, WorkloadResult } from './workloads.js';

const { values: flags } = parseArgs({
  options: {
    smoke: { type: 'boolean', default: false },
    rounds: { type: 'string' },
    targets: { type: 'string' },
    workloads: { type: 'string' },
    capacity: { type: 'boolean', default: true },
    'no-capacity': { type: 'boolean', default: false },
    /** Options for the lock servers' Node, lockstream's and the floors' (e.g. `--cpu-prof --cpu-prof-dir=…`). */
    'server-node-args': { type: 'string', default: '' },
    /** The SDK clients' resumeGraceMs (default the SDK's, 5 s): 0 asks for no resumable session. */
    'resume-grace-ms': { type: 'string' },
    out: { type: 'string' },
  },
});

const SMOKE = flags.smoke;
const ROUNDS = Number(flags.rounds ?? (SMOKE ? 1 : 3));
const WORKLOADS = (flags.workloads?.split(',') ?? ['U', 'H', 'P', 'RW']) as WorkloadName[];
// U warms up for 2000 cycles: V8 (the recipe's, the SDK's, the server's) optimizes a function
// only after many calls, and at 200 cycles a fresh lockstream server measured half its speed.
const WORKLOAD_ARGS = SMOKE
  ? ['--cycles', '100', '--warmup', '20', '--duration-ms', '500', '--warmup-ms', '100']
  : ['--cycles', '2000', '--warmup', '2000', '--duration-ms', '10000', '--warmup-ms', '1000'];
if (flags['resume-grace-ms'] !== undefined) WORKLOAD_ARGS.push('--resume-grace-ms', flags['resume-grace-ms']);

type TargetId =
  | 'naive'
  | 'engine'
  | 'curator'
  | 'etcd'
  | 'grpc-floor'
  | 'grpc-floor-acquire'
  | 'zk-floor'
  | 'zk-floor-acquire'
  | 'zk-floor-fenced-acquire'
  | 'lockstream-zk'
  | 'lockstream-zk-addon'
  | 'lockstream-zk-acquire'
  | 'lockstream-memory';
const ALL_TARGETS: TargetId[] = [
  'naive',
  'engine',
  'curator',
  'etcd',
  'grpc-floor',
  'grpc-floor-acquire',
  'zk-floor',
  'zk-floor-acquire',
  'zk-floor-fenced-acquire',
  'lockstream-zk',
  'lockstream-zk-addon',
  'lockstream-zk-acquire',
  'lockstream-memory',
];
const TARGETS = (flags.targets?.split(',') ?? ALL_TARGETS) as TargetId[];
const SERVER_NODE_ARGS = flags['server-node-args'].split(' ').filter((arg) => arg !== '');

const LABELS: Record<TargetId, string> = {
  naive: 'textbook recipe, in-process',
  engine: 'lockstream engine, in-process (floor)',
  curator: 'Apache Curator 5.4, in-process',
  etcd: 'etcd 3.4 lock RPC (Go server), one gRPC channel',
  'grpc-floor': 'gRPC floor (grants at once), SDK session',
  'grpc-floor-acquire': 'gRPC floor (grants at once), Acquire stream per lock',
  'zk-floor': 'ZooKeeper floor (a create and a delete, nothing else), SDK session',
  'zk-floor-acquire': 'ZooKeeper floor (a create and a delete, nothing else), Acquire stream per lock',
  'zk-floor-fenced-acquire':
    "ZooKeeper floor, each create and delete fenced as lockstream's (--fenced), Acquire stream per lock",
  'lockstream-zk': 'lockstream on ZooKeeper, SDK session (one LockClient)',
  'lockstream-zk-addon': 'lockstream on ZooKeeper through the zookeeper addon, SDK session',
  'lockstream-zk-acquire': 'lockstream on ZooKeeper, Acquire stream per lock',
  'lockstream-memory': 'lockstream, embedded store, SDK session',
};

/** A target while it runs: how to start a load process against it, and its server's CPU. */
interface RunningTarget {
  loadCommand(workloadArgs: string[]): [string, string[]];
  /** CPU µs of the lock server so far; undefined when the recipe runs inside the load process. */
  serverCpuMicros(): Promise<number | undefined>;
  stop(): Promise<void>;
}

interface Measurement {
  readonly target: TargetId;
  readonly workload: WorkloadName;
  readonly round: number;
  readonly result: WorkloadResult;
  /** Grants per second in the window (H: handoffs/s). */
  readonly opsPerSec: number;
  readonly readsPerSec?: number;
  readonly writesPerSec?: number;
  /** Per grant (every grant after `go`): lock-server CPU, load-process CPU, ZooKeeper's work. */
  readonly serverCpuMicrosPerOp?: number;
  readonly loadCpuMicrosPerOp: number;
  readonly zkWritesPerOp: number;
  readonly zkReadsPerOp: number;
  readonly zkCpuMicrosPerOp: number;
}

async function startTarget(
  id: TargetId,
  zookeeper: ZooKeeperProcess,
  curatorClasspath?: string,
): Promise<RunningTarget> {
  const load = (extra: string[]) => (workloadArgs: string[]) =>
    nodeScript('./load.ts', [...extra, ...workloadArgs]);
  switch (id) {
    case 'naive':
    case 'engine':
      return {
        loadCommand: load(['--target', id, '--zookeeper', zookeeper.connectString]),
        serverCpuMicros: async () => undefined,
        stop: async () => {},
      };
    case 'curator':
      return {
        loadCommand: (workloadArgs) => [
          'java',
          [
            '-Xmx512m',
            '-cp',
            curatorClasspath ?? '',
            'CuratorBench',
            '--zookeeper',
            zookeeper.connectString,
            ...workloadArgs,
          ],
        ],
        serverCpuMicros: async () => undefined,
        stop: async () => {},
      };
    case 'etcd': {
      const etcd = await startEtcd();
      return {
        loadCommand: load(['--target', 'etcd', '--server', etcd.address]),
        serverCpuMicros: () => processCpuMicros(etcd.pid),
        stop: () => etcd.stop(),
      };
    }
    case 'grpc-floor':
    case 'grpc-floor-acquire':
    case 'zk-floor':
    case 'zk-floor-acquire':
    case 'zk-floor-fenced-acquire': {
      const [node, args] = id.startsWith('zk-floor')
        ? nodeScript('./zk-floor.ts', [
            zookeeper.connectString,
            ...(id === 'zk-floor-fenced-acquire' ? ['--fenced'] : []),
          ])
        : nodeScript('./grpc-floor.ts', []);
      const floor = spawnLineProcess(node, [...SERVER_NODE_ARGS, ...args]);
      const { port } = (await floor.next('listening')) as { port: number };
      const client = id.endsWith('-acquire')
        ? ['--target', 'grpc', '--per-lock']
        : ['--target', 'sdk-shared'];
      return {
        loadCommand: load([...client, '--server', `127.0.0.1:${port}`]),
        serverCpuMicros: async () => {
          floor.send('cpu');
          return ((await floor.next('cpu')) as { micros: number }).micros;
        },
        stop: async () => void (await floor.kill()),
      };
    }
    case 'lockstream-zk':
    case 'lockstream-zk-addon':
    case 'lockstream-zk-acquire':
    case 'lockstream-memory': {
      const server = await startLockstreamServer(
        id === 'lockstream-memory' ? undefined : zookeeper.connectString,
        id === 'lockstream-zk-addon' ? ['--zookeeper-client', 'addon'] : [],
        SERVER_NODE_ARGS,
      );
      const client =
        id === 'lockstream-zk-acquire' ? ['--target', 'grpc', '--per-lock'] : ['--target', 'sdk-shared'];
      return {
        loadCommand: load([...client, '--server', server.address]),
        serverCpuMicros: () => lockstreamCpuMicros(server.httpPort),
        stop: () => server.stop(),
      };
    }
  }
}

async function measure(
  id: TargetId,
  target: RunningTarget,
  workload: WorkloadName,
  round: number,
  zookeeper: ZooKeeperProcess,
): Promise<Measurement> {
  const prefix = `r${round}-${workload.toLowerCase()}-${Date.now().toString(36)}`;
  const load = spawnLineProcess(
    ...target.loadCommand(['--workload', workload, '--prefix', prefix, ...WORKLOAD_ARGS]),
  );
  try {
    await load.next('ready');
    const zkBefore = await zooKeeperCounters(zookeeper.port, zookeeper.pid);
    const serverBefore = await target.serverCpuMicros();
    load.send('go');
    const { result } = (await load.next('done')) as { result: WorkloadResult };
    if (result.acquisitions === 0) throw new Error(`${id} ${workload}: no lock was acquired in the window`);
    const serverAfter = await target.serverCpuMicros();
    const zk = zooKeeperDelta(zkBefore, await zooKeeperCounters(zookeeper.port, zookeeper.pid));
    const ops = Math.max(1, result.allAcquisitions);
    const perSecond = (count: number): number => (count * 1000) / result.durationMs;
    return {
      target: id,
      workload,
      round,
      result,
      opsPerSec: perSecond(result.acquisitions),
      ...(result.reads === undefined ? {} : { readsPerSec: perSecond(result.reads) }),
      ...(result.writes === undefined ? {} : { writesPerSec: perSecond(result.writes) }),
      ...(serverBefore === undefined || serverAfter === undefined
        ? {}
        : { serverCpuMicrosPerOp: (serverAfter - serverBefore) / ops }),
      loadCpuMicrosPerOp: result.cpuMicros / ops,
      zkWritesPerOp: zk.writes / ops,
      zkReadsPerOp: zk.reads / ops,
      zkCpuMicrosPerOp: zk.cpuMicros / ops,
    };
  } finally {
    await load.exited;
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

type Summary = Omit<Measurement, 'round' | 'result'> & {
  p50: number;
  p99: number;
  perClient?: { min: number; max: number };
};

/** Per target and workload, the median of each figure over the rounds. */
function summarize(measurements: Measurement[]): Summary[] {
  const summaries: Summary[] = [];
  for (const workload of WORKLOADS) {
    for (const target of TARGETS) {
      const runs = measurements.filter((m) => m.target === target && m.workload === workload);
      if (runs.length === 0) continue;
      const of = (pick: (m: Measurement) => number | undefined): number | undefined => {
        const picked = runs.map(pick).filter((v): v is number => v !== undefined);
        return picked.length === 0 ? undefined : median(picked);
      };
      const optional = <K extends string>(key: K, value: number | undefined): Partial<Record<K, number>> =>
        value === undefined ? {} : ({ [key]: value } as Record<K, number>);
      const perClient = runs[Math.floor(runs.length / 2)]?.result.perClient;
      summaries.push({
        target,
        workload,
        opsPerSec: of((m) => m.opsPerSec) ?? 0,
        ...optional(
          'readsPerSec',
          of((m) => m.readsPerSec),
        ),
        ...optional(
          'writesPerSec',
          of((m) => m.writesPerSec),
        ),
        p50: of((m) => m.result.latencyMs.p50) ?? 0,
        p99: of((m) => m.result.latencyMs.p99) ?? 0,
        ...(perClient ? { perClient } : {}),
        ...optional(
          'serverCpuMicrosPerOp',
          of((m) => m.serverCpuMicrosPerOp),
        ),
        loadCpuMicrosPerOp: of((m) => m.loadCpuMicrosPerOp) ?? 0,
        zkWritesPerOp: of((m) => m.zkWritesPerOp) ?? 0,
        zkReadsPerOp: of((m) => m.zkReadsPerOp) ?? 0,
        zkCpuMicrosPerOp: of((m) => m.zkCpuMicrosPerOp) ?? 0,
      });
    }
  }
  return summaries;
}

const fixed = (value: number | undefined, digits = 0): string =>
  value === undefined || !Number.isFinite(value) ? '–' : value.toFixed(digits);

/** The gRPC floor a lockstream target is measured against: the same RPC, granting at once. */
function floorOf(target: TargetId): TargetId {
  return target === 'lockstream-zk-acquire' ? 'grpc-floor-acquire' : 'grpc-floor';
}

/** The ZooKeeper floor of a lockstream target on ZooKeeper: the same RPC, a create and a delete. */
function zkFloorOf(target: TargetId): TargetId | undefined {
  if (target === 'lockstream-zk' || target === 'lockstream-zk-addon') return 'zk-floor';
  return target === 'lockstream-zk-acquire' ? 'zk-floor-acquire' : undefined;
}

function table(summaries: Summary[]): string {
  const lines: string[] = [];
  const find = (target: TargetId, workload: WorkloadName): Summary | undefined =>
    summaries.find((s) => s.target === target && s.workload === workload);
  const heading: Record<WorkloadName, string> = {
    U: 'U: 1 client, 1 mutex (ops/s; cycle latency)',
    H: 'H: 32 clients, 1 mutex (handoffs/s; wait latency)',
    P: 'P: 64 clients, 64 mutexes (ops/s; cycle latency)',
    RW: 'RW: 16 readers + 2 writers, 1 lock (reads/s + writes/s; writer wait)',
  };
  for (const workload of WORKLOADS) {
    lines.push('', heading[workload]);
    lines.push(
      '| target | ops/s | p50 ms | p99 ms | ÷ naive | ÷ engine | ÷ gRPC floor | ÷ ZK floor | ÷ Curator | ÷ etcd | server CPU µs/op | load CPU µs/op | ZK writes/op | ZK reads/op |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    );
    const ratio = (s: Summary, base: TargetId | undefined): string => {
      const of = base === undefined ? undefined : find(base, workload);
      return of && of.opsPerSec > 0 && s.target !== base ? `${(s.opsPerSec / of.opsPerSec).toFixed(2)}×` : '';
    };
    for (const target of TARGETS) {
      const s = find(target, workload);
      if (!s) continue;
      const ops =
        workload !== 'RW' || s.readsPerSec === undefined
          ? fixed(s.opsPerSec)
          : `${fixed(s.opsPerSec)} (${fixed(s.readsPerSec)} + ${fixed(s.writesPerSec)})`;
      lines.push(
        `| ${LABELS[target]} | ${ops} | ${fixed(s.p50, 3)} | ${fixed(s.p99, 3)} | ${ratio(s, 'naive')} | ${ratio(s, 'engine')} | ${
          target.startsWith('lockstream') ? ratio(s, floorOf(target)) : ''
        } | ${ratio(s, zkFloorOf(target))} | ${ratio(s, 'curator')} | ${ratio(s, 'etcd')} | ${fixed(s.serverCpuMicrosPerOp)} | ${fixed(s.loadCpuMicrosPerOp)} | ${
          // etcd keeps its locks in itself: ZooKeeper's counters say nothing about it.
          target === 'etcd' ? '– | –' : `${fixed(s.zkWritesPerOp, 2)} | ${fixed(s.zkReadsPerOp, 2)}`
        } |`,
      );
    }
  }
  return lines.join('\n');
}

interface Verdict {
  readonly target: string;
  readonly measured: string;
  readonly met: boolean | undefined;
  /** The same ratio for the ZooKeeper floor: what the design allows before lockstream's work. */
  readonly zkFloor?: string;
}

function verdicts(summaries: Summary[], capacities: readonly CapacityResult[]): Verdict[] {
  const find = (target: TargetId, workload: WorkloadName): Summary | undefined =>
    summaries.find((s) => s.target === target && s.workload === workload);
  const out: Verdict[] = [];
  const ratio = (
    target: TargetId,
    workload: WorkloadName,
    base: TargetId,
    floor: number,
    label: string,
  ): void => {
    const ours = find(target, workload);
    const theirs = find(base, workload);
    if (!ours || !theirs) return;
    const r = ours.opsPerSec / theirs.opsPerSec;
    const floorId = zkFloorOf(target);
    const zkFloor = floorId === undefined ? undefined : find(floorId, workload);
    out.push({
      target: `${label} ≥ ${floor}×`,
      measured: `${r.toFixed(2)}×`,
      met: r >= floor,
      ...(zkFloor ? { zkFloor: `${(zkFloor.opsPerSec / theirs.opsPerSec).toFixed(2)}×` } : {}),
    });
  };
  ratio('lockstream-zk', 'U', 'naive', 1.0, 'SDK session U ops/s ÷ textbook recipe');
  ratio('lockstream-zk', 'H', 'naive', 1.0, 'SDK session H handoffs/s ÷ textbook recipe');
  ratio('lockstream-zk', 'RW', 'naive', 1.0, 'SDK session RW acquisitions/s ÷ textbook recipe');
  ratio('lockstream-zk', 'P', 'curator', 0.6, 'SDK session P ops/s ÷ Curator');
  ratio('lockstream-zk', 'P', 'etcd', 1.5, "SDK session P ops/s ÷ etcd's lock RPC");
  ratio('lockstream-zk', 'U', 'etcd', 1.5, "SDK session U ops/s ÷ etcd's lock RPC");
  const p = find('lockstream-zk', 'P');
  if (p?.serverCpuMicrosPerOp !== undefined) {
    out.push({
      target: 'SDK session P: server CPU ≤ 200 µs per cycle',
      measured: `${p.serverCpuMicrosPerOp.toFixed(0)} µs`,
      met: p.serverCpuMicrosPerOp <= 200,
    });
  }
  if (p) {
    out.push({
      target: 'SDK session P: SDK (load process) CPU ≤ 80 µs per cycle',
      measured: `${p.loadCpuMicrosPerOp.toFixed(0)} µs`,
      met: p.loadCpuMicrosPerOp <= 80,
    });
  }
  const addonP = find('lockstream-zk-addon', 'P');
  if (p?.serverCpuMicrosPerOp !== undefined && addonP?.serverCpuMicrosPerOp !== undefined) {
    out.push({
      target: 'SDK session P: ZooKeeper writes per cycle with the protocol client = 2, no read for the token',
      measured: `${p.zkWritesPerOp.toFixed(2)} writes, ${p.zkReadsPerOp.toFixed(2)} reads (addon: ${addonP.zkWritesPerOp.toFixed(2)} writes, ${addonP.zkReadsPerOp.toFixed(2)} reads)`,
      met: Math.abs(p.zkWritesPerOp - 2) < 0.05,
    });
  }
  ratio('lockstream-zk-acquire', 'U', 'naive', 0.6, 'Acquire per lock U ops/s ÷ textbook recipe');
  ratio(
    'lockstream-memory',
    'U',
    'naive',
    2.5,
    'embedded store (SDK session) U ops/s ÷ textbook recipe on ZooKeeper',
  );
  for (const capacity of capacities) {
    const mb = capacity.rssLoadedBytes / 2 ** 20;
    const bound = capacity.rpc === 'session' ? 150 : 400;
    out.push({
      target: `${capacity.held} held + ${capacity.waiting} waiting ${capacity.rpc === 'session' ? 'through one SDK session' : 'over Acquire streams'} < ${bound} MB RSS`,
      measured: `${mb.toFixed(0)} MB`,
      met: mb < bound,
    });
    const slowdown = capacity.uLoaded.p50 / capacity.uIdle.p50;
    out.push({
      target: `U p50 under that load (${capacity.rpc}) ≤ 1.5 × idle`,
      measured: `${slowdown.toFixed(2)} ×`,
      met: slowdown <= 1.5,
    });
  }
  return out;
}

function gitCommit(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

function curatorClasspath(): string | undefined {
  try {
    const out = path.join(BENCH_DIR, '..', '.tmp', 'bench', 'curator');
    return execFileSync('bash', [path.join(BENCH_DIR, 'curator', 'build.sh'), out], {
      encoding: 'utf8',
    }).trim();
  } catch (error) {
    console.error(`Curator is not benchmarked: ${(error as Error).message}`);
    return undefined;
  }
}

const startedAt = new Date();
// Servers, SDK and engine run as built JavaScript, as users run them (tsx adds per-closure work).
execFileSync('npm', ['run', '--silent', 'build'], { stdio: 'inherit' });
const zookeeper = await startZooKeeper({ production: true });
const measurements: Measurement[] = [];
const capacities: CapacityResult[] = [];
try {
  const classpath = TARGETS.includes('curator') ? curatorClasspath() : undefined;
  if (TARGETS.includes('etcd') && !existsSync(ETCD_BINARY)) {
    console.error(`etcd is not benchmarked: ${ETCD_BINARY} is missing (apt-get install etcd-server)`);
  }
  const targets = TARGETS.filter(
    (t) => (t !== 'curator' || classpath !== undefined) && (t !== 'etcd' || existsSync(ETCD_BINARY)),
  );
  console.log(
    `lockstream bench${SMOKE ? ' (smoke)' : ''}: ${ROUNDS} round(s) of ${WORKLOADS.join(', ')} against ${targets.join(', ')}; ZooKeeper ${zookeeper.connectString} (fsync on)`,
  );
  for (let round = 1; round <= ROUNDS; round += 1) {
    for (const id of targets) {
      const target = await startTarget(id, zookeeper, classpath);
      try {
        for (const workload of WORKLOADS) {
          if (id === 'etcd' && workload === 'RW') continue;
          const m = await measure(id, target, workload, round, zookeeper);
          measurements.push(m);
          console.log(
            `  round ${round} ${id} ${workload}: ${m.opsPerSec.toFixed(0)} ops/s, p50 ${m.result.latencyMs.p50} ms, p99 ${m.result.latencyMs.p99} ms`,
          );
        }
      } finally {
        await target.stop();
      }
    }
  }
  if (flags.capacity && !flags['no-capacity']) {
    for (const rpc of ['acquire', 'session'] as const) {
      const size = SMOKE ? { held: 500, waiting: 500, cycles: 200 } : {};
      capacities.push(await runCapacity(zookeeper, { ...size, rpc }));
    }
  }
} finally {
  await zookeeper.stop();
}

const summaries = summarize(measurements);
const checks = verdicts(summaries, capacities);
console.log(table(summaries));
for (const capacity of capacities) {
  console.log(
    `\nCapacity (${capacity.rpc === 'session' ? 'one SDK session' : 'an Acquire stream per lock'}): ${capacity.held} locks held + ${capacity.waiting} waiting over ${capacity.connections} connection(s): server RSS ${(capacity.rssIdleBytes / 2 ** 20).toFixed(0)} MB idle → ${(capacity.rssHeldBytes / 2 ** 20).toFixed(0)} MB held → ${(capacity.rssLoadedBytes / 2 ** 20).toFixed(0)} MB with waiters; ${(capacity.bytesPerHeld / 1024).toFixed(1)} KiB per held lock, ${(capacity.bytesPerWaiter / 1024).toFixed(1)} KiB per waiter; U p50 ${capacity.uIdle.p50} ms idle, ${capacity.uLoaded.p50} ms loaded (p99 ${capacity.uIdle.p99} → ${capacity.uLoaded.p99} ms)`,
  );
}
if (SMOKE) {
  console.log('\nA smoke run is too short to judge the targets: run `npm run bench`.');
} else {
  console.log('\nTargets (lockstream on ZooKeeper unless named):');
  for (const check of checks) {
    const floor = check.zkFloor === undefined ? '' : ` (the ZooKeeper floor: ${check.zkFloor})`;
    console.log(`  ${check.met ? '✓' : '✗'} ${check.target}: ${check.measured}${floor}`);
  }
}

const report = {
  commit: gitCommit(),
  startedAt: startedAt.toISOString(),
  smoke: SMOKE,
  rounds: ROUNDS,
  machine: {
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    memoryBytes: os.totalmem(),
    node: process.version,
    zookeeper: 'standalone, fsync on, loopback',
  },
  summaries,
  capacities,
  targets: checks,
  measurements,
};
const out =
  flags.out ??
  path.join(BENCH_DIR, 'results', `${startedAt.toISOString().replace(/[:.]/g, '-')}-${report.commit}.json`);
await mkdir(path.dirname(out), { recursive: true });
await writeFile(out, `${JSON.stringify(report, null, 2)}\n`);
console.log(`\nJSON: ${path.relative(process.cwd(), out)}`);
