/**
 * `npm run bench:flood`: one Session floods a lockstream server on ZooKeeper, and what that costs
 * everyone else.
 *
 * One LockClient (one connection, one Session stream) acquires `--locks` distinct locks with
 * `--concurrency` requests in flight, holds them all, then releases them all, `--repeat` times.
 * Meanwhile a probe (bench/flood-probe.ts: its own process, LockClient and connection) takes and
 * releases its own lock every 20 ms. Measured:
 * - the server's RSS idle, right after the last grant, after every lock was held for `--hold-ms`, and
 *   `--settle-ms` after the release;
 * - the probe's cycle p50/p99 before each flood and during it, and any cycle that did not end
 *   within `--hang-ms` (a request waiting behind its own node never ends);
 * - whether the server kept its ZooKeeper session (its warnings, its session gauge);
 * - one ListLocks page of 1,000 once every name has been used and released.
 *
 * With `--probe-elsewhere` the probe uses an instance of its own on the same ZooKeeper, to tell
 * the flooded server's share of the probe's wait from ZooKeeper's and the machine's.
 *
 * Prints a table and the targets, writes JSON to bench/results/. `--smoke` runs it tiny.
 */
import { execFileSync } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { LockClient, type Lock } from '../dist/client/index.js';
import { startZooKeeper } from '../test/setup/zookeeper-process.js';
import { residentBytes } from './measure.js';
import { BENCH_DIR, nodeScript, spawnLineProcess, startLockstreamServer } from './processes.js';

const { values: flags } = parseArgs({
  options: {
    smoke: { type: 'boolean', default: false },
    locks: { type: 'string' },
    concurrency: { type: 'string', default: '1000' },
    repeat: { type: 'string', default: '1' },
    'idle-ms': { type: 'string' },
    'settle-ms': { type: 'string' },
    'hold-ms': { type: 'string' },
    'hang-ms': { type: 'string', default: '30000' },
    'list-timeout-ms': { type: 'string', default: '120000' },
    'probe-elsewhere': { type: 'boolean', default: false },
    /** Options for the flooded server's Node, space-separated (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`). */
    'server-node-args': { type: 'string', default: '' },
    out: { type: 'string' },
  },
});

const SMOKE = flags.smoke;
const LOCKS = positive('--locks', flags.locks ?? (SMOKE ? '500' : '100000'));
const CONCURRENCY = positive('--concurrency', flags.concurrency);
const REPEAT = positive('--repeat', flags.repeat);
const IDLE_MS = positive('--idle-ms', flags['idle-ms'] ?? (SMOKE ? '1000' : '10000'));
const SETTLE_MS = positive('--settle-ms', flags['settle-ms'] ?? (SMOKE ? '1000' : '30000'));
/** How long every lock is held before the RSS with them held is read (the RSS right after the last grant is read too). */
const HOLD_MS = positive('--hold-ms', flags['hold-ms'] ?? (SMOKE ? '1000' : '15000'));
const HANG_MS = positive('--hang-ms', flags['hang-ms']);
const LIST_TIMEOUT_MS = positive('--list-timeout-ms', flags['list-timeout-ms']);
const PROBE_INTERVAL_MS = 20;
const LIST_PAGE = 1_000;
const MB = 2 ** 20;

function positive(flag: string, text: string | undefined): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value <= 0)
    throw new Error(`${flag} must be a whole number > 0, not ${text}`);
  return value;
}

interface Latency {
  readonly cycles: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

interface FloodRound {
  readonly round: number;
  readonly acquireMs: number;
  readonly releaseMs: number;
  readonly acquireFailures: number;
  readonly lostWhileHeld: number;
  readonly rssBeforeBytes: number;
  /** Right after the last grant. */
  readonly rssFilledBytes: number;
  /** After every lock was held for --hold-ms. */
  readonly rssHeldBytes: number;
  readonly rssSettledBytes: number;
  /** The server's V8 heap (used: live and not yet collected; total: what V8 has taken) and external memory. */
  readonly heapHeld: HeapGauges;
  readonly heapSettled: HeapGauges;
  readonly probeIdle: Latency;
  readonly probeFlood: Latency;
  /** Lowest lockstream_store_session_confirmed seen while flooding (1: never in doubt). */
  readonly sessionConfirmedMin: number;
}

interface HeapGauges {
  readonly usedBytes: number;
  readonly totalBytes: number;
  readonly externalBytes: number;
}

const heapGauges = (gauges: Record<string, number>): HeapGauges => ({
  usedBytes: gauges['nodejs_heap_size_used_bytes'] ?? NaN,
  totalBytes: gauges['nodejs_heap_size_total_bytes'] ?? NaN,
  externalBytes: gauges['nodejs_external_memory_bytes'] ?? NaN,
});

/** Scrapes a few of the server's own gauges off /metrics. */
async function serverGauges(httpPort: number): Promise<Record<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
  const gauges: Record<string, number> = {};
  for (const name of [
    'nodejs_heap_size_used_bytes',
    'nodejs_heap_size_total_bytes',
    'nodejs_external_memory_bytes',
  ]) {
    const value = new RegExp(`^lockstream_${name} (\\S+)$`, 'm').exec(text)?.[1];
    if (value !== undefined) gauges[name] = Number(value);
  }
  const confirmed = /^lockstream_store_session_confirmed\{[^}]*\} (\S+)$/m.exec(text)?.[1];
  if (confirmed !== undefined) gauges['session_confirmed'] = Number(confirmed);
  return gauges;
}

/** Runs `task(i)` for i in [0, count) with at most `limit` running at once. */
async function pool(count: number, limit: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(limit, count) }, worker));
}

function latency(
  samples: ReadonlyArray<readonly [number, number, number]>,
  from: number,
  to: number,
): Latency {
  const cycles = samples
    .filter(([startedAt]) => startedAt >= from && startedAt < to)
    .map(([, , cycleMs]) => cycleMs)
    .sort((a, b) => a - b);
  const at = (q: number): number => cycles[Math.min(cycles.length - 1, Math.floor(q * cycles.length))] ?? NaN;
  return { cycles: cycles.length, p50: at(0.5), p99: at(0.99), max: cycles.at(-1) ?? NaN };
}

const startedAt = new Date();
execFileSync('npm', ['run', '--silent', 'build'], { stdio: 'inherit' });
const zookeeper = await startZooKeeper({ production: true });
const SERVER_NODE_ARGS = flags['server-node-args'].split(' ').filter((arg) => arg !== '');
const server = await startLockstreamServer(zookeeper.connectString, [], SERVER_NODE_ARGS);
// --probe-elsewhere: the probe on an instance of its own, on the same ZooKeeper. What the probe
// then still suffers is ZooKeeper's and the machine's share, not the flooded server's.
const probeServer = flags['probe-elsewhere'] ? await startLockstreamServer(zookeeper.connectString) : server;
const probe = spawnLineProcess(
  ...nodeScript('./flood-probe.ts', [
    '--server',
    probeServer.address,
    '--interval-ms',
    String(PROBE_INTERVAL_MS),
    '--hang-ms',
    String(HANG_MS),
  ]),
);
const flooder = new LockClient(server.address);
const rounds: FloodRound[] = [];
const phases: Array<{
  round: number;
  idleFrom: number;
  floodFrom: number;
  holdFrom: number;
  releaseFrom: number;
  floodTo: number;
}> = [];
let rssIdleBytes = 0;
let list: { ms: number; locks: number; timedOut: boolean } | undefined;
let leftover: number | undefined;
let probeReport!: {
  samples: Array<[number, number, number]>;
  hangs: Array<{ startedAt: number; waitedMs: number }>;
  failures: Array<{ startedAt: number; message: string }>;
  afterwards: { holders: number; waiters: number };
};
console.log(
  `lockstream flood${SMOKE ? ' (smoke)' : ''}: ${LOCKS} locks on one Session, ${CONCURRENCY} in flight, ${REPEAT} round(s); ZooKeeper ${zookeeper.connectString} (fsync on)`,
);
try {
  await probe.next('ready');
  probe.send('go');
  for (let round = 1; round <= REPEAT; round += 1) {
    const idleFrom = Date.now();
    await delay(IDLE_MS);
    const rssBeforeBytes = await residentBytes(server.pid);
    if (round === 1) rssIdleBytes = rssBeforeBytes;
    let sessionConfirmedMin = 1;
    let flooding = true;
    const watchSession = (async () => {
      while (flooding) {
        const confirmed = (await serverGauges(server.httpPort))['session_confirmed'] ?? 1;
        sessionConfirmedMin = Math.min(sessionConfirmedMin, confirmed);
        await delay(500);
      }
    })();
    const floodFrom = Date.now();
    const held: Lock[] = [];
    let acquireFailures = 0;
    await pool(LOCKS, CONCURRENCY, async (i) => {
      try {
        held.push(await flooder.acquire(`flood/${i}`, { owner: 'flooder' }));
      } catch {
        acquireFailures += 1;
      }
    });
    const acquireMs = Date.now() - floodFrom;
    const rssFilledBytes = await residentBytes(server.pid);
    await delay(HOLD_MS);
    const rssHeldBytes = await residentBytes(server.pid);
    const heldGauges = await serverGauges(server.httpPort);
    const lostWhileHeld = held.filter((lock) => lock.lost.aborted).length;
    const releaseFrom = Date.now();
    await pool(held.length, CONCURRENCY, async (i) => {
      await held[i]?.release().catch(() => {});
    });
    const floodTo = Date.now();
    flooding = false;
    await watchSession;
    held.length = 0;
    await delay(SETTLE_MS);
    const rssSettledBytes = await residentBytes(server.pid);
    const settledGauges = await serverGauges(server.httpPort);
    phases.push({ round, idleFrom, floodFrom, floodTo, holdFrom: floodFrom + acquireMs, releaseFrom });
    rounds.push({
      round,
      acquireMs,
      releaseMs: floodTo - releaseFrom,
      acquireFailures,
      lostWhileHeld,
      rssBeforeBytes,
      rssFilledBytes,
      rssHeldBytes,
      rssSettledBytes,
      heapHeld: heapGauges(heldGauges),
      heapSettled: heapGauges(settledGauges),
      probeIdle: { cycles: 0, p50: NaN, p99: NaN, max: NaN },
      probeFlood: { cycles: 0, p50: NaN, p99: NaN, max: NaN },
      sessionConfirmedMin,
    });
    console.log(
      `  round ${round}: acquired ${LOCKS - acquireFailures} in ${acquireMs} ms, released in ${floodTo - releaseFrom} ms; RSS ${(rssBeforeBytes / MB).toFixed(0)} → ${(rssFilledBytes / MB).toFixed(0)} (filled) → ${(rssHeldBytes / MB).toFixed(0)} (held ${HOLD_MS} ms) → ${(rssSettledBytes / MB).toFixed(0)} MB`,
    );
    if (round === 1) {
      // Every name has now been used and released: ListLocks must skip them all.
      const listFrom = performance.now();
      const page = await Promise.race([
        flooder.list({ pageSize: LIST_PAGE }),
        delay(LIST_TIMEOUT_MS).then(() => undefined),
      ]);
      list = {
        ms: performance.now() - listFrom,
        locks: page?.locks.length ?? 0,
        timedOut: page === undefined,
      };
      leftover = page?.locks.filter((lock) => lock.name.startsWith('flood/')).length;
      console.log(
        `  ListLocks page of ${LIST_PAGE}: ${list.ms.toFixed(0)} ms${list.timedOut ? ' (timed out)' : ''}`,
      );
    }
  }
  probe.send('stop');
  probeReport = (await probe.next('done')) as typeof probeReport;
} finally {
  flooder.close();
  await probe.kill();
  await server.stop();
  if (probeServer !== server) await probeServer.stop();
  await zookeeper.stop();
}

const finished = rounds.map((round, i) => {
  const phase = phases[i];
  if (!phase) return round;
  return {
    ...round,
    probeIdle: latency(probeReport.samples, phase.idleFrom, phase.floodFrom),
    probeFlood: latency(probeReport.samples, phase.floodFrom, phase.floodTo),
  };
});
const warnings = server.warnings().map((line) => String(line['msg']));
const sessionLost = warnings.filter((msg) => /given up|opening a new session|expired/.test(msg));

const fixed = (value: number | undefined, digits = 0): string =>
  value === undefined || !Number.isFinite(value) ? '–' : value.toFixed(digits);
console.log(
  '\n| round | acquire s | release s | failed | lost | RSS before MB | RSS filled MB | RSS held MB | RSS +settle MB | heap used/total MB held | heap used/total MB settled | probe idle p50/p99 ms | probe flood p50/p99/max ms | session confirmed |',
);
console.log('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const r of finished) {
  console.log(
    `| ${r.round} | ${fixed(r.acquireMs / 1000, 1)} | ${fixed(r.releaseMs / 1000, 1)} | ${r.acquireFailures} | ${r.lostWhileHeld} | ${fixed(r.rssBeforeBytes / MB)} | ${fixed(r.rssFilledBytes / MB)} | ${fixed(r.rssHeldBytes / MB)} | ${fixed(r.rssSettledBytes / MB)} | ${fixed(r.heapHeld.usedBytes / MB)} / ${fixed(r.heapHeld.totalBytes / MB)} | ${fixed(r.heapSettled.usedBytes / MB)} / ${fixed(r.heapSettled.totalBytes / MB)} | ${fixed(r.probeIdle.p50, 1)} / ${fixed(r.probeIdle.p99, 1)} | ${fixed(r.probeFlood.p50, 1)} / ${fixed(r.probeFlood.p99, 1)} / ${fixed(r.probeFlood.max)} | ${r.sessionConfirmedMin === 1 ? 'always' : 'not always'} |`,
  );
}

const first = finished[0];
const checks: Array<{ target: string; measured: string; met: boolean }> = [];
if (first) {
  checks.push({
    target: `${LOCKS} locks held on one Session: server RSS ≤ 400 MB`,
    measured: `${fixed(first.rssHeldBytes / MB)} MB after holding them ${HOLD_MS} ms, ${fixed(first.rssFilledBytes / MB)} MB right after the last grant (idle ${fixed(rssIdleBytes / MB)} MB; ${fixed((first.rssHeldBytes - rssIdleBytes) / LOCKS / 1024, 1)} KiB per lock)`,
    met: first.rssHeldBytes / MB <= 400,
  });
}
for (const r of finished) {
  checks.push({
    target: `round ${r.round}: RSS ${SETTLE_MS / 1000} s after the release within 100 MB of idle`,
    measured: `${fixed(r.rssSettledBytes / MB)} MB (+${fixed((r.rssSettledBytes - rssIdleBytes) / MB)} MB)`,
    met: r.rssSettledBytes - rssIdleBytes <= 100 * MB,
  });
}
for (const r of finished) {
  const bound = 4 * r.probeIdle.p99;
  checks.push({
    target: `round ${r.round}: probe p99 during the flood ≤ 4 × idle p99 (${fixed(bound, 1)} ms)`,
    measured: `${fixed(r.probeFlood.p99, 1)} ms (max ${fixed(r.probeFlood.max)} ms, ${r.probeFlood.cycles} cycles)`,
    met: r.probeFlood.p99 <= bound,
  });
}
checks.push({
  target: 'the server kept its ZooKeeper session (no session given up or replaced, never in doubt)',
  measured:
    sessionLost.length === 0 && finished.every((r) => r.sessionConfirmedMin === 1)
      ? 'kept'
      : `${sessionLost.length} session warning(s); confirmed min ${Math.min(...finished.map((r) => r.sessionConfirmedMin))}`,
  met: sessionLost.length === 0 && finished.every((r) => r.sessionConfirmedMin === 1),
});
checks.push({
  target: `no probe cycle hung (each within ${HANG_MS} ms), none failed, its lock free afterwards`,
  measured: `${probeReport.hangs.length} hung, ${probeReport.failures.length} failed; afterwards ${probeReport.afterwards.holders} holder(s), ${probeReport.afterwards.waiters} waiter(s)`,
  met:
    probeReport.hangs.length === 0 &&
    probeReport.failures.length === 0 &&
    probeReport.afterwards.holders === 0 &&
    probeReport.afterwards.waiters === 0,
});
if (list) {
  checks.push({
    target: `ListLocks page of ${LIST_PAGE} after ${LOCKS} names were used and released < 1 s`,
    measured: `${list.timedOut ? '> ' : ''}${fixed(list.ms)} ms (${list.locks} locks listed, ${leftover ?? '?'} flood locks left)`,
    met: !list.timedOut && list.ms < 1000 && leftover === 0,
  });
}
console.log(`\nTargets${SMOKE ? ' (a smoke run is too small to judge them)' : ''}:`);
for (const check of checks) console.log(`  ${check.met ? '✓' : '✗'} ${check.target}: ${check.measured}`);
if (warnings.length > 0) {
  console.log(`\nServer warnings (${warnings.length}):`);
  for (const msg of [...new Set(warnings)].slice(0, 10)) console.log(`  ${msg}`);
}

const report = {
  startedAt: startedAt.toISOString(),
  smoke: SMOKE,
  options: {
    locks: LOCKS,
    concurrency: CONCURRENCY,
    repeat: REPEAT,
    idleMs: IDLE_MS,
    settleMs: SETTLE_MS,
    hangMs: HANG_MS,
  },
  machine: { cpus: os.cpus().length, memoryBytes: os.totalmem(), node: process.version },
  rssIdleBytes,
  rounds: finished,
  /** Each round's phases (epoch ms): idle, acquiring, holding, releasing. */
  phases,
  listLocks: list,
  probe: {
    hangs: probeReport.hangs,
    failures: probeReport.failures,
    afterwards: probeReport.afterwards,
    /** Every cycle: [started at (epoch ms), acquire ms, cycle ms]. */
    samples: probeReport.samples,
  },
  serverWarnings: warnings,
  targets: checks,
};
const out =
  flags.out ?? path.join(BENCH_DIR, 'results', `flood-${startedAt.toISOString().replace(/[:.]/g, '-')}.json`);
await mkdir(path.dirname(out), { recursive: true });
await writeFile(out, `${JSON.stringify(report, null, 2)}\n`);
console.log(`\nJSON: ${path.relative(process.cwd(), out)}`);
// Done: a client's channel or the probe's pipes can keep the loop alive a while after the last
// await, and nothing is left to wait for.
process.exit(0);
