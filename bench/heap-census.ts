/**
 * `npm run bench:heap`: where a lockstream server's memory per lock goes.
 *
 * Starts ZooKeeper and `lockstream serve` with `--heapsnapshot-signal`, takes a heap snapshot
 * idle, with `--held` locks held, with `--waiting` more requests queued behind the first of them,
 * and after everything was released; then, per held lock and per waiter, counts the objects the
 * snapshots differ by, by class: how many per lock, their own bytes and the bytes they retain,
 * and what the top per-request classes hold. Also the server's RSS, JS heap and external memory
 * at each step, so the heap's share of the RSS is plain.
 *
 * `--rpc session`: every lock a request on one LockClient's Session stream (default, 20,000
 * held). `--rpc acquire`: an Acquire stream per lock over `--connections` clients for the holders
 * and as many for the waiters, as the capacity run does (10,000 held + 10,000 waiting).
 * `--analyze before after --units N` diffs two snapshots already taken.
 */
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { LockClient, type Lock } from '../dist/client/index.js';
import { startZooKeeper } from '../test/setup/zookeeper-process.js';
import { census, largest, ownedBy, perUnit, readHeapSnapshot, type ClassCensus } from './heap-snapshot.js';
import { residentBytes } from './measure.js';
import { BENCH_DIR, startLockstreamServer, type LockstreamServer } from './processes.js';

const { values: flags, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    rpc: { type: 'string', default: 'session' },
    held: { type: 'string' },
    waiting: { type: 'string' },
    connections: { type: 'string', default: '4' },
    'settle-ms': { type: 'string', default: '10000' },
    top: { type: 'string', default: '15' },
    keep: { type: 'boolean', default: false },
    analyze: { type: 'boolean', default: false },
    units: { type: 'string' },
    out: { type: 'string' },
  },
});

const RPC = flags.rpc;
if (RPC !== 'session' && RPC !== 'acquire') throw new Error(`--rpc must be session or acquire, not ${RPC}`);
const count = (flag: string, text: string | undefined, min = 1): number => {
  const value = Number(text);
  if (!Number.isInteger(value) || value < min)
    throw new Error(`${flag} must be a whole number ≥ ${min}, not ${text}`);
  return value;
};
const HELD = count('--held', flags.held ?? (RPC === 'session' ? '20000' : '10000'));
const WAITING = count('--waiting', flags.waiting ?? (RPC === 'session' ? '0' : '10000'), 0);
const CONNECTIONS = count('--connections', flags.connections);
const SETTLE_MS = count('--settle-ms', flags['settle-ms'], 0);
const TOP = count('--top', flags.top);
const FILL_CONCURRENCY = 500;
const PATIENT = { keepaliveTimeMs: 600_000, keepaliveTimeoutMs: 600_000, heartbeatIntervalMs: 600_000 };

interface Step {
  readonly name: 'idle' | 'held' | 'loaded' | 'released';
  readonly snapshot: string;
  readonly rssBytes: number;
  readonly heapUsedBytes: number;
  readonly externalBytes: number;
}

async function gauges(httpPort: number): Promise<{ heapUsedBytes: number; externalBytes: number }> {
  // A snapshot stops the server for a while; a kept-alive connection it closed meanwhile fails
  // the first try (ECONNRESET), so the gauges are read on a connection of their own.
  const read = async (): Promise<string> =>
    (await fetch(`http://127.0.0.1:${httpPort}/metrics`, { headers: { connection: 'close' } })).text();
  const text = await read().catch(read);
  const gauge = (name: string): number =>
    Number(new RegExp(`^lockstream_${name} (\\S+)$`, 'm').exec(text)?.[1]);
  return {
    heapUsedBytes: gauge('nodejs_heap_size_used_bytes'),
    externalBytes: gauge('nodejs_external_memory_bytes'),
  };
}

/** Signals the server to write a heap snapshot into `dir`, and waits until it is written. */
async function snapshot(server: LockstreamServer, dir: string, name: Step['name']): Promise<Step> {
  const before = new Set(await readdir(dir));
  // RSS before: writing a snapshot costs memory of its own. The heap gauges after: its GC ran.
  const rssBytes = await residentBytes(server.pid);
  process.kill(server.pid, 'SIGUSR2');
  let file: string | undefined;
  while (file === undefined) {
    await delay(100);
    file = (await readdir(dir)).find((f) => !before.has(f) && f.endsWith('.heapsnapshot'));
  }
  // The snapshot is written on the server's main thread: once it answers, the file is complete.
  const { heapUsedBytes, externalBytes } = await gauges(server.httpPort);
  const full = path.join(dir, file);
  const tail = (await readFile(full)).subarray(-16).toString();
  if (!tail.includes(']}')) throw new Error(`${full} looks cut short`);
  console.log(
    `  ${name}: ${file} (${((await stat(full)).size / 2 ** 20).toFixed(0)} MB), RSS ${(rssBytes / 2 ** 20).toFixed(0)} MB`,
  );
  return { name, snapshot: full, rssBytes, heapUsedBytes, externalBytes };
}

async function inBatches(total: number, task: (i: number) => Promise<void>): Promise<void> {
  for (let start = 0; start < total; start += FILL_CONCURRENCY) {
    await Promise.all(
      Array.from({ length: Math.min(FILL_CONCURRENCY, total - start) }, (_, j) => task(start + j)),
    );
  }
}

async function takeSnapshots(dir: string): Promise<{ steps: Step[]; lost: number }> {
  // Writing a snapshot stops the server for a while (a minute for 10,000 Acquire streams on a busy
  // machine): session timeout, keepalives and heartbeats long enough that no lock is lost
  // meanwhile (their timers exist all the same).
  const zookeeper = await startZooKeeper({ production: true, maxSessionTimeoutMs: 600_000 });
  const server = await startLockstreamServer(
    zookeeper.connectString,
    ['--session-timeout', '600s', '--keepalive-time', '600s', '--keepalive-timeout', '600s'],
    ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${dir}`],
  );
  const clients = (n: number): LockClient[] =>
    Array.from(
      { length: n },
      () =>
        new LockClient(server.address, {
          ...PATIENT,
          streamPerLock: true,
          channelOptions: { 'grpc.use_local_subchannel_pool': 1 },
        }),
    );
  const shared = RPC === 'session' ? [new LockClient(server.address, PATIENT)] : undefined;
  const holders = shared ?? clients(CONNECTIONS);
  const waiters = shared ?? clients(CONNECTIONS);
  const steps: Step[] = [];
  const held: Lock[] = [];
  const waiting: Array<Promise<unknown>> = [];
  const withdraw = new AbortController();
  try {
    // Every connection (and the code paths) in use once before the baseline.
    for (const [i, client] of [...new Set([...holders, ...waiters])].entries()) {
      await (await client.acquire(`heap-warm/${i}`)).release();
    }
    steps.push(await snapshot(server, dir, 'idle'));
    await inBatches(HELD, async (i) => {
      held.push(await (holders[i % holders.length] as LockClient).acquire(`heap/${i}`));
    });
    steps.push(await snapshot(server, dir, 'held'));
    if (WAITING > 0) {
      await inBatches(WAITING, (i) => {
        const client = waiters[i % waiters.length] as LockClient;
        return new Promise<void>((queued, failed) => {
          const request = client.acquire(`heap/${i % HELD}`, {
            signal: withdraw.signal,
            onQueued: () => queued(),
          });
          waiting.push(request.catch(() => {}));
          request.then(() => failed(new Error(`waiter ${i} was granted a held lock`)), failed);
        });
      });
      steps.push(await snapshot(server, dir, 'loaded'));
    }
    const lost = held.filter((lock) => lock.lost.aborted).length;
    withdraw.abort();
    await Promise.all(waiting);
    await Promise.all(held.map((lock) => lock.release().catch(() => {})));
    await delay(SETTLE_MS);
    steps.push(await snapshot(server, dir, 'released'));
    const warnings = server.warnings().map((line) => String(line['msg']));
    for (const warning of new Set(warnings)) console.log(`  server warning: ${warning}`);
    return { steps, lost };
  } finally {
    withdraw.abort();
    for (const client of new Set([...holders, ...waiters])) client.close();
    await server.stop();
    await zookeeper.stop();
  }
}

type Row = { name: string } & ClassCensus;
const kb = (bytes: number): string => bytes.toFixed(0);

function table(title: string, rows: Row[], total: { self: number }): string {
  const lines = [
    '',
    title,
    '| class | count per unit | own B per unit | retained B per unit |',
    '|---|---:|---:|---:|',
    ...rows.map((r) => `| ${r.name} | ${r.count.toFixed(2)} | ${kb(r.selfBytes)} | ${kb(r.retainedBytes)} |`),
    `| (all classes) | | ${kb(total.self)} | |`,
  ];
  return lines.join('\n');
}

/** Classes too general to say whose objects they hold (built-ins, V8 internals). */
const GENERIC =
  /^(\(|system \/ |Object$|Array$|Map$|Set$|Promise$|Function$|Buffer$|ArrayBuffer$|Uint8Array$)/;

/** The diff of two snapshots per unit, with what the leading per-unit classes hold. */
async function explain(beforeFile: string, afterFile: string, units: number, label: string) {
  const beforeSnapshot = await readHeapSnapshot(beforeFile);
  const before = census(beforeSnapshot);
  const afterSnapshot = await readHeapSnapshot(afterFile);
  const after = census(afterSnapshot);
  const rows = perUnit(before, after, units);
  const selfTotal = rows.reduce((sum, r) => sum + r.selfBytes, 0);
  const byRetained = rows
    .filter((r) => r.retainedBytes > 0)
    .sort((a, b) => b.retainedBytes - a.retainedBytes)
    .slice(0, TOP);
  const bySelf = [...rows].sort((a, b) => b.selfBytes - a.selfBytes).slice(0, TOP);
  // V8 names an AbortSignal "EventTarget"; "system / Context" is a closure's captured scope.
  const objectCounts = Object.fromEntries(
    ['Promise', 'AbortController', 'EventTarget', 'Map', 'Set', 'system / Context', 'Timeout'].map((name) => [
      name,
      rows.find((r) => r.name === name)?.count ?? 0,
    ]),
  );
  const closures = rows.filter((r) => r.name.includes('() closure')).reduce((sum, r) => sum + r.count, 0);
  // The classes that come about once per unit and retain the most: the request's own objects.
  const owners = rows
    .filter((r) => !GENERIC.test(r.name) && r.count >= 0.9 && r.retainedBytes > 200)
    .sort((a, b) => b.retainedBytes - a.retainedBytes)
    .slice(0, 8)
    .map((r) => r.name);
  const owned = ownedBy(afterSnapshot, owners);
  const ownedBefore = ownedBy(beforeSnapshot, owners);
  console.log(table(`${label}: by retained bytes (top ${TOP})`, byRetained, { self: selfTotal }));
  console.log(
    table(`${label}: by own bytes (top ${TOP}; own bytes add up to the heap per unit)`, bySelf, {
      self: selfTotal,
    }),
  );
  console.log(
    `\n${label}: per unit ${closures.toFixed(2)} closures, ${Object.entries(objectCounts)
      .map(([n, c]) => `${c.toFixed(2)} ${n}`)
      .join(', ')}`,
  );
  const holdings: Record<string, Row[]> = {};
  for (const owner of owners) {
    const empty = new Map<string, ClassCensus>();
    const held = perUnit(ownedBefore.get(owner) ?? empty, owned.get(owner) ?? empty, units)
      .filter((r) => r.count !== 0 || r.selfBytes !== 0)
      .sort((a, b) => b.selfBytes - a.selfBytes);
    holdings[owner] = held;
    console.log(
      `\n${label}: what ${owner} holds per unit (${kb(held.reduce((s, r) => s + r.selfBytes, 0))} B): ${held
        .slice(0, 12)
        .map((r) => `${r.count.toFixed(2)} × ${r.name} ${kb(r.selfBytes)} B`)
        .join('; ')}`,
    );
  }
  // Collections keyed by request or by lock grow by an entry per unit; the others (gRPC's
  // handlers, protobuf descriptors) are as large idle.
  const collections = largest(afterSnapshot, ['Map', 'Set', 'Array', '(array) (object elements)'], 8).map(
    (c) => ({ ...c, retainedBytesPerUnit: c.retainedBytes / units }),
  );
  console.log(
    `\n${label}: the largest collections afterwards (all they retain, and that divided by the units): ${collections
      .map(
        (c) =>
          `${c.name} at ${c.heldAt} ${(c.retainedBytes / 2 ** 20).toFixed(1)} MB = ${kb(c.retainedBytesPerUnit)} B per unit`,
      )
      .join('; ')}`,
  );
  return {
    label,
    units,
    heapBytesPerUnit: selfTotal,
    byRetained,
    bySelf,
    objectCounts,
    closures,
    holdings,
    collections,
  };
}

if (flags.analyze) {
  const [before, after] = positionals;
  if (before === undefined || after === undefined)
    throw new Error('--analyze needs two snapshots: before after');
  await explain(before, after, count('--units', flags.units), 'after vs before');
} else {
  execFileSync('npm', ['run', '--silent', 'build'], { stdio: 'inherit' });
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lockstream-heap-'));
  console.log(
    `lockstream heap census: ${HELD} held${WAITING ? ` + ${WAITING} waiting` : ''} (${RPC === 'session' ? 'one SDK session' : `Acquire streams over ${CONNECTIONS} + ${CONNECTIONS} connections`}); snapshots in ${dir}`,
  );
  const { steps, lost } = await takeSnapshots(dir);
  const step = (name: Step['name']): Step | undefined => steps.find((s) => s.name === name);
  const [idle, heldStep, loaded, released] = [step('idle'), step('held'), step('loaded'), step('released')];
  if (!idle || !heldStep || !released) throw new Error('a snapshot is missing');
  const memory = (from: Step, to: Step, units: number) => ({
    rssBytesPerUnit: (to.rssBytes - from.rssBytes) / units,
    heapUsedBytesPerUnit: (to.heapUsedBytes - from.heapUsedBytes) / units,
    externalBytesPerUnit: (to.externalBytes - from.externalBytes) / units,
  });
  console.log('\n| step | RSS MB | JS heap used MB | external MB |\n|---|---:|---:|---:|');
  for (const s of steps)
    console.log(
      `| ${s.name} | ${(s.rssBytes / 2 ** 20).toFixed(0)} | ${(s.heapUsedBytes / 2 ** 20).toFixed(0)} | ${(s.externalBytes / 2 ** 20).toFixed(1)} |`,
    );
  if (lost > 0)
    console.log(`\n${lost} held locks were lost while snapshots were taken: the later steps are suspect.`);
  const report = {
    rpc: RPC,
    held: HELD,
    waiting: WAITING,
    lostDuringSnapshots: lost,
    steps: steps.map(({ snapshot: _file, ...rest }) => rest),
    perHeld: {
      memory: memory(idle, heldStep, HELD),
      ...(await explain(idle.snapshot, heldStep.snapshot, HELD, 'per held lock')),
    },
    ...(loaded
      ? {
          perWaiter: {
            memory: memory(heldStep, loaded, WAITING),
            ...(await explain(heldStep.snapshot, loaded.snapshot, WAITING, 'per waiter')),
          },
        }
      : {}),
    leftPerHeld: {
      memory: memory(idle, released, HELD),
      ...(await explain(idle.snapshot, released.snapshot, HELD, 'left per lock after release')),
    },
  };
  for (const [label, m] of [
    ['per held lock', report.perHeld.memory],
    ['per waiter', report.perWaiter?.memory],
  ] as const) {
    if (m)
      console.log(
        `\n${label}: RSS ${kb(m.rssBytesPerUnit)} B, JS heap ${kb(m.heapUsedBytesPerUnit)} B, external ${kb(m.externalBytesPerUnit)} B`,
      );
  }
  const out =
    flags.out ??
    path.join(BENCH_DIR, 'results', `heap-${RPC}-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  await mkdir(path.dirname(out), { recursive: true });
  await writeFile(out, `${JSON.stringify(report, null, 2)}\n`);
  console.log(`\nJSON: ${path.relative(process.cwd(), out)}`);
  if (flags.keep) console.log(`Snapshots kept in ${dir}`);
  else await rm(dir, { recursive: true, force: true });
}
