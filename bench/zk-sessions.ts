/**
 * `npm run bench:zk-sessions` (issue 27): what a ZooKeeper session per client session costs
 * against one per lockstream instance, and how fast a ZooKeeper session moves between
 * processes. On lockstream's own ZooKeeper client, with lockstream's default session timeout,
 * against a private ZooKeeper (fsync on, ZooKeeper's default 2 s tick); every client in a
 * process of its own (bench/zk-sessions/worker.ts).
 *
 * 1. Cost (zk-sessions/cost.ts): N ZooKeeper sessions from one process, each its own connection
 *    holding one ephemeral sequential node (a held lock), against one session holding N nodes:
 *    time to open, client RSS and heap per session, CPU while idle (each session pings every
 *    third of its timeout), ZooKeeper's RSS, heap, CPU, packets and descriptors meanwhile.
 * 2. Takeover (zk-sessions/takeover.ts): a process holding K nodes is killed (SIGKILL) or paused
 *    (SIGSTOP); this process attaches to its session with its id and password and writes
 *    through it (a `multi` with a `check`): time from the signal, against the time ZooKeeper
 *    takes to expire the session. A paused holder is then continued: what its connection sees,
 *    whether it moves the session back, whether a write fenced on the ownership record fails
 *    and a bare one does not, and what its closeSession does to the taker. On the standalone
 *    server, then on a three-member ensemble with the holder and the taker on different members.
 * 3. ZooKeeper's default per-address connection limit (maxClientCnxns=60) against one process
 *    that opens more sessions.
 *
 * Prints tables, writes JSON to bench/results/. `--counts 1000,5000,10000 --holds 1,100,10000
 * --window-ms 10000 --no-ensemble`.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ZooKeeperConnection } from '../src/server/stores/zookeeper/protocol/connection.js';
import { startZooKeeperEnsemble } from '../test/setup/zookeeper-ensemble.js';
import { startZooKeeper } from '../test/setup/zookeeper-process.js';
import { BENCH_DIR } from './processes.js';
import { measureCost, type CostResult } from './zk-sessions/cost.js';
import {
  CONTEST_WINDOW_MS,
  expiry,
  takeover,
  type Contest,
  type TakeoverResult,
} from './zk-sessions/takeover.js';
import { SESSION_TIMEOUT_MS } from './zk-sessions/worker-process.js';

const { values: flags } = parseArgs({
  options: {
    counts: { type: 'string', default: '1000,5000,10000' },
    holds: { type: 'string', default: '1,100,10000' },
    'window-ms': { type: 'string', default: '10000' },
    'no-ensemble': { type: 'boolean', default: false },
    out: { type: 'string' },
  },
});

function positiveIntegers(flag: string, text: string): number[] {
  const values = text.split(',').map(Number);
  if (values.some((v) => !Number.isInteger(v) || v < 1)) {
    throw new Error(`--${flag}: expected positive integers separated by commas, got "${text}"`);
  }
  return values;
}
const COUNTS = positiveIntegers('counts', flags.counts);
const HOLDS = positiveIntegers('holds', flags.holds);
const WINDOW_MS = positiveIntegers('window-ms', flags['window-ms'])[0] ?? 10_000;
/** ZooKeeper's default tick: a session expires on a tick, up to one tick after its timeout. */
const TICK_TIME_MS = 2_000;
/** Held nodes in the ensemble's takeover runs. */
const ENSEMBLE_HELD = 100;

/** Opens sessions from this process until ZooKeeper refuses one: its default per-address limit. */
async function connectionLimit(): Promise<{
  limit: number;
  opened: number;
  refusal: string;
  logLine: string;
}> {
  const limit = 60; // ZooKeeper's default maxClientCnxns
  const lines: string[] = [];
  const zookeeper = await startZooKeeper({ maxClientCnxns: limit, logger: (line) => lines.push(line) });
  const connections: ZooKeeperConnection[] = [];
  try {
    let refusal = '';
    while (refusal === '' && connections.length <= limit) {
      try {
        connections.push(
          await ZooKeeperConnection.connect({
            servers: [zookeeper.connectString],
            sessionTimeoutMs: SESSION_TIMEOUT_MS,
          }),
        );
      } catch (error) {
        refusal = (error as Error).message;
      }
    }
    const logLine = /Too many connections.*/.exec(lines.join('\n'))?.[0] ?? '';
    return { limit, opened: connections.length, refusal, logLine };
  } finally {
    await Promise.all(connections.map((connection) => connection.close()));
    await zookeeper.stop();
  }
}

const contest = (when: string, c: Contest): string =>
  `${when} the holder re-attached the session ${c.holderAttaches}×, the taker lost it ${c.takerDisconnects}× and re-attached it ${c.takerAttaches}×, ZooKeeper then had ${c.connectionsAtEnd} connection(s) for it`;
const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(0);
const kib = (bytes: number): string => (bytes / 1024).toFixed(1);
const percent = (share: number): string => `${(share * 100).toFixed(1)} %`;
const ms = (value: number): string => value.toFixed(value < 100 ? 1 : 0);

const startedAt = new Date();
const costs: CostResult[] = [];
const takeovers: TakeoverResult[] = [];
const expiries: Array<{ held: number; expiredMs: number }> = [];
console.log(
  `zk-sessions: session timeout ${SESSION_TIMEOUT_MS} ms, ZooKeeper tick ${TICK_TIME_MS} ms (fsync on), idle window ${WINDOW_MS} ms`,
);
const zookeeper = await startZooKeeper({
  production: true,
  tickTimeMs: TICK_TIME_MS,
  minSessionTimeoutMs: 2 * TICK_TIME_MS,
});
try {
  for (const count of COUNTS) {
    for (const role of ['instance', 'sessions'] as const) {
      const cost = await measureCost(zookeeper, role, count, WINDOW_MS);
      costs.push(cost);
      console.log(
        `  ${cost.design}, ${count}: opened in ${ms(cost.openMs)} ms (${cost.openFailures} failed), client ${mib(cost.client.rssBytes)} MB RSS, ZooKeeper ${mib(cost.zookeeper.rssBytes)} MB RSS`,
      );
    }
  }
  const standalone = {
    label: 'standalone',
    holderConnect: zookeeper.connectString,
    takerConnect: zookeeper.connectString,
    clientPorts: [zookeeper.port],
  };
  for (const held of HOLDS) {
    for (const signal of ['SIGKILL', 'SIGSTOP'] as const) {
      const closeFromHolder = signal === 'SIGSTOP' && held === HOLDS.at(-1);
      const result = await takeover(standalone, held, signal, closeFromHolder);
      takeovers.push(result);
      console.log(
        `  takeover after ${signal}, ${held} nodes: attached in ${ms(result.attachedMs)} ms, wrote in ${ms(result.wroteMs)} ms`,
      );
    }
    const expiredMs = await expiry(zookeeper.connectString, held);
    expiries.push({ held, expiredMs });
    console.log(`  expiry after SIGKILL, ${held} nodes: ${ms(expiredMs)} ms`);
  }
} finally {
  await zookeeper.stop();
}
if (!flags['no-ensemble']) {
  const ensemble = await startZooKeeperEnsemble({ size: 3, production: true, tickTimeMs: TICK_TIME_MS });
  try {
    const [one, two] = ensemble.members;
    if (one === undefined || two === undefined)
      throw new Error('INVARIANT: an ensemble of 3 without 2 members');
    const members = {
      label: 'ensemble of 3, holder and taker on different members',
      holderConnect: one.connectString,
      takerConnect: two.connectString,
      clientPorts: ensemble.members.map((member) => member.clientPort),
    };
    for (const signal of ['SIGKILL', 'SIGSTOP'] as const) {
      const result = await takeover(members, ENSEMBLE_HELD, signal, signal === 'SIGSTOP');
      takeovers.push(result);
      console.log(
        `  ensemble: takeover after ${signal}, ${ENSEMBLE_HELD} nodes: attached in ${ms(result.attachedMs)} ms, wrote in ${ms(result.wroteMs)} ms`,
      );
    }
  } finally {
    await ensemble.stop();
  }
}
const limit = await connectionLimit();

console.log(`\nCost at rest (session timeout ${SESSION_TIMEOUT_MS} ms; idle over ${WINDOW_MS / 1000} s)`);
console.log(
  '| design | N | open s | client RSS MB | client KiB per (RSS, heap) | client CPU idle | client fds | ZK RSS MB (+added) | ZK heap KiB per | ZK CPU idle | ZK packets/s | ZK fds |',
);
console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const c of costs) {
  console.log(
    `| ${c.design} | ${c.count} | ${(c.openMs / 1000).toFixed(1)} | ${mib(c.client.rssBytes)} | ${kib(c.client.rssBytesPer)}, ${kib(c.client.heapBytesPer)} | ${percent(c.client.idleCpuShare)} | ${c.client.fds} | ${mib(c.zookeeper.rssBytes)} (+${mib(c.zookeeper.rssBytesAdded)}) | ${kib(c.zookeeper.heapBytesPer)} | ${percent(c.zookeeper.idleCpuShare)} | ${c.zookeeper.packetsPerSecond.toFixed(0)} | ${c.zookeeper.fds} |`,
  );
}
for (const c of costs.filter((c) => c.openFailures > 0 || c.client.connectionsLost > 0)) {
  console.log(
    `  ✗ ${c.design}, ${c.count}: ${c.openFailures} failed to open, ${c.client.connectionsLost} connections lost by the end of the window`,
  );
}

console.log(
  '\nTakeover: a process holding K nodes gets a signal; another attaches to its session (id + password)',
);
console.log(
  '| ZooKeeper | K | signal | attached ms | check + setData multi applied ms | connections of the session after | expired after ms (no takeover) |',
);
console.log('|---|---:|---|---:|---:|---:|---:|');
for (const t of takeovers) {
  const expired = t.cluster === 'standalone' ? expiries.find((e) => e.held === t.held) : undefined;
  console.log(
    `| ${t.cluster} | ${t.held} | ${t.signal} | ${ms(t.attachedMs)} | ${ms(t.wroteMs)} | ${t.connectionsAfterMove} | ${t.signal === 'SIGKILL' && expired ? ms(expired.expiredMs) : ''} |`,
  );
}
for (const t of takeovers) {
  const c = t.continued;
  if (c === undefined) continue;
  console.log(
    `\n${t.cluster}: the paused holder of ${t.held} nodes, continued after its session moved, first hears "${c.firstEvent}"; ${contest(`in ${CONTEST_WINDOW_MS / 1000} s after SIGCONT`, c.afterContinue)}; the holder's write fenced on the ownership record: ${c.fencedWrite}; its bare write: ${c.bareWrite}; the taker's write then: ${c.takerWrite}; ${contest(`from these writes to ${CONTEST_WINDOW_MS / 1000} s after them`, c.afterWrites)}` +
      (c.afterHolderClose === undefined
        ? ''
        : `; after the holder's close() (closeSession) the taker's session is ${c.afterHolderClose.taker}, ${c.afterHolderClose.nodesLeft} of ${t.held} nodes left`),
  );
}
console.log(
  `\nZooKeeper's default maxClientCnxns=${limit.limit}: ${limit.opened} sessions opened from one address, the next refused ("${limit.refusal}"; ZooKeeper logs "${limit.logLine}")`,
);

const report = {
  startedAt: startedAt.toISOString(),
  machine: {
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model,
    memoryBytes: os.totalmem(),
    node: process.version,
    zookeeper: `standalone and an ensemble of 3, fsync on, loopback, tick ${TICK_TIME_MS} ms`,
  },
  sessionTimeoutMs: SESSION_TIMEOUT_MS,
  windowMs: WINDOW_MS,
  costs,
  takeovers,
  expiries,
  connectionLimit: limit,
};
const out =
  flags.out ??
  path.join(BENCH_DIR, 'results', `zk-sessions-${startedAt.toISOString().replace(/[:.]/g, '-')}.json`);
await mkdir(path.dirname(out), { recursive: true });
await writeFile(out, `${JSON.stringify(report, null, 2)}\n`);
console.log(`\nJSON: ${path.relative(process.cwd(), out)}`);
