/**
 * `npm run bench:zk-requests`: what one uncontended lock cycle (U: acquire, release, one client
 * through the SDK's session) costs ZooKeeper, on a lock used before and on a fresh name every
 * cycle, with the tree's watch (the default) and with a watch per node (`--zookeeper-watch
 * nodes`, the path ZooKeeper 3.5 and the addon take).
 *
 * Counted by ZooKeeper itself: `mntr`'s zk_cnt_prep_process_time counts every request its
 * request processor handled (pings included), `srvr`'s zxid every write. What the server sends
 * when idle (pings, its ownership heartbeat) is measured over an idle window as long as the
 * cycles took, and subtracted.
 *
 * Flags: --cycles N (default 2000), --smoke (200 cycles).
 */
import { execFileSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { startZooKeeper } from '../test/setup/zookeeper-process.js';
import { zooKeeperCounters, zooKeeperDelta } from './measure.js';
import { nodeScript, spawnLineProcess, startLockstreamServer } from './processes.js';
import type { WorkloadResult } from './workloads.js';

const { values: flags } = parseArgs({
  options: {
    cycles: { type: 'string' },
    smoke: { type: 'boolean', default: false },
  },
});
const CYCLES = Number(flags.cycles ?? (flags.smoke ? 200 : 2000));

interface Row {
  readonly watch: 'tree' | 'nodes';
  readonly names: 'used before' | 'fresh';
  readonly cycles: number;
  readonly writesPerCycle: number;
  readonly readsPerCycle: number;
  readonly requestsPerCycle: number;
  readonly backgroundPerCycle: number;
}

execFileSync('npm', ['run', '--silent', 'build'], { stdio: 'inherit' });
const zookeeper = await startZooKeeper({ production: true });
const rows: Row[] = [];
try {
  for (const watch of ['tree', 'nodes'] as const) {
    const server = await startLockstreamServer(zookeeper.connectString, ['--zookeeper-watch', watch]);
    try {
      for (const names of ['used before', 'fresh'] as const) {
        const load = spawnLineProcess(
          ...nodeScript('./load.ts', [
            '--target',
            'sdk-shared',
            '--server',
            server.address,
            '--workload',
            'U',
            '--prefix',
            `zk-requests-${watch}-${names === 'fresh' ? 'fresh' : 'used'}-${Date.now().toString(36)}`,
            '--cycles',
            String(CYCLES),
            '--warmup',
            '200',
            ...(names === 'fresh' ? ['--fresh-names'] : []),
          ]),
        );
        try {
          await load.next('ready');
          const before = await zooKeeperCounters(zookeeper.port, zookeeper.pid);
          load.send('go');
          const { result } = (await load.next('done')) as { result: WorkloadResult };
          const cycled = zooKeeperDelta(before, await zooKeeperCounters(zookeeper.port, zookeeper.pid));
          await load.exited;
          // The background over a window as long as the cycles took, the server alone and idle.
          const idleFrom = await zooKeeperCounters(zookeeper.port, zookeeper.pid);
          await sleep(result.durationMs);
          const idle = zooKeeperDelta(idleFrom, await zooKeeperCounters(zookeeper.port, zookeeper.pid));
          const cycles = result.allAcquisitions;
          const writes = cycled.writes - idle.writes;
          const requests = cycled.writes + cycled.reads - (idle.writes + idle.reads);
          rows.push({
            watch,
            names,
            cycles,
            writesPerCycle: writes / cycles,
            readsPerCycle: (requests - writes) / cycles,
            requestsPerCycle: requests / cycles,
            backgroundPerCycle: (idle.writes + idle.reads) / cycles,
          });
        } finally {
          await load.exited;
        }
      }
    } finally {
      await server.stop();
    }
  }
} finally {
  await zookeeper.stop();
}

console.log('\nZooKeeper requests per uncontended lock cycle (U, SDK session), background subtracted');
console.log('| watch | lock names | cycles | writes | reads | requests | background subtracted |');
console.log('|---|---|---:|---:|---:|---:|---:|');
for (const row of rows) {
  console.log(
    `| ${row.watch} | ${row.names} | ${row.cycles} | ${row.writesPerCycle.toFixed(2)} | ${row.readsPerCycle.toFixed(2)} | ${row.requestsPerCycle.toFixed(2)} | ${row.backgroundPerCycle.toFixed(3)} |`,
  );
}
const tree = rows.filter((row) => row.watch === 'tree');
const worst = Math.max(...tree.map((row) => row.requestsPerCycle));
console.log(
  `\ntarget: ≤ 2.1 requests per uncontended cycle with the tree's watch: ${worst.toFixed(2)} ${worst <= 2.1 ? '✓' : '✗'}`,
);
