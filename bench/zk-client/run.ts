/**
 * ZooKeeper client micro-benchmark (issue 15): CPU per operation of the `zookeeper` addon and
 * of lockstream's protocol client, each in its own process against one private ZooKeeper
 * (fsync on), 1 and 64 requests in flight, rounds alternating the clients; medians.
 * `npm run bench:zk-client [-- --rounds N --cycles N]`.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { parseArgs } from 'node:util';
import { startZooKeeper } from '../../test/setup/zookeeper-process.js';
import { nodeScript } from '../processes.js';

const { values } = parseArgs({
  options: { rounds: { type: 'string', default: '3' }, cycles: { type: 'string', default: '4000' } },
});
const ROUNDS = Number(values.rounds);
const CYCLES = Number(values.cycles);
const CLIENTS = ['addon', 'protocol'] as const;
const IN_FLIGHT = [1, 64] as const;

interface Result {
  client: (typeof CLIENTS)[number];
  inFlight: number;
  createGetDelete: { cpuMicrosPerCycle: number; cyclesPerSecond: number };
  lock: { cpuMicrosPerCycle: number; cyclesPerSecond: number };
}

const run = promisify(execFile);
const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
};

const zookeeper = await startZooKeeper({ production: true });
const results: Result[] = [];
try {
  for (let round = 1; round <= ROUNDS; round += 1) {
    for (const inFlight of IN_FLIGHT) {
      for (const client of round % 2 === 1 ? CLIENTS : [...CLIENTS].reverse()) {
        // Sequential runs do a quarter of the cycles: they are slow and steady.
        const cycles = inFlight === 1 ? Math.ceil(CYCLES / 4) : CYCLES;
        const [command, args] = nodeScript('./zk-client/cycle.ts', [
          zookeeper.connectString,
          client,
          String(inFlight),
          String(cycles),
        ]);
        const { stdout } = await run(command, args, { maxBuffer: 1 << 20 });
        const result = JSON.parse(stdout.trim().split('\n').at(-1)!) as Result;
        results.push(result);
        console.log(
          `  round ${round} ${client} ${inFlight} in flight: create+get+delete ${result.createGetDelete.cpuMicrosPerCycle.toFixed(0)} µs CPU, lock cycle ${result.lock.cpuMicrosPerCycle.toFixed(0)} µs CPU`,
        );
      }
    }
  }
} finally {
  await zookeeper.stop();
}

console.log(`\nClient CPU per cycle, µs (median of ${ROUNDS}; per operation = cycle / ops)`);
console.log(
  '| in flight | client | create+getData+delete (3 ops) | per op | lock cycle | ops | cycles/s (lock) |',
);
console.log('|---:|---|---:|---:|---:|---:|---:|');
for (const inFlight of IN_FLIGHT) {
  for (const client of CLIENTS) {
    const mine = results.filter((r) => r.client === client && r.inFlight === inFlight);
    const cgd = median(mine.map((r) => r.createGetDelete.cpuMicrosPerCycle));
    const lock = median(mine.map((r) => r.lock.cpuMicrosPerCycle));
    const rate = median(mine.map((r) => r.lock.cyclesPerSecond));
    const lockOps = client === 'addon' ? 3 : 2;
    console.log(
      `| ${inFlight} | ${client} | ${cgd.toFixed(0)} | ${(cgd / 3).toFixed(1)} | ${lock.toFixed(0)} | ${lockOps} | ${rate.toFixed(0)} |`,
    );
  }
  const of = (client: string): number =>
    median(
      results
        .filter((r) => r.client === client && r.inFlight === inFlight)
        .map((r) => r.createGetDelete.cpuMicrosPerCycle),
    );
  console.log(`| ${inFlight} | protocol ÷ addon | ${(of('protocol') / of('addon')).toFixed(2)} | | | | |`);
}
