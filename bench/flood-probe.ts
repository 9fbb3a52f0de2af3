/**
 * The probe of the flood run (bench/flood.ts): one client on its own connection that takes and
 * releases its own lock once every `--interval-ms`, in a process of its own, so the flooding
 * client's work never delays its timers. JSON lines on stdout: `{"event":"ready"}`; after `stop`
 * on stdin, `{"event":"done", ...}` with every cycle (wall-clock start, acquire and cycle ms),
 * the cycles that did not complete within `--hang-ms`, other failures, and the lock's state as
 * DescribeLock shows it once the probe has let it go (it must be free: no holder, no waiter).
 */
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { LockClient, LockTimeoutError } from '../dist/client/index.js';

const { values } = parseArgs({
  options: {
    server: { type: 'string' },
    lock: { type: 'string', default: 'flood-probe' },
    'interval-ms': { type: 'string', default: '20' },
    'hang-ms': { type: 'string', default: '30000' },
  },
});
if (values.server === undefined) throw new Error('--server host:port is required');
const intervalMs = Number(values['interval-ms']);
const hangMs = Number(values['hang-ms']);
const lockName = values.lock;

/** One acquire+release: when it started (epoch ms), and how long each part took (ms). */
type Sample = [startedAt: number, acquireMs: number, cycleMs: number];

const client = new LockClient(values.server);
const samples: Sample[] = [];
const hangs: Array<{ startedAt: number; waitedMs: number }> = [];
const failures: Array<{ startedAt: number; message: string }> = [];
let stopping = false;

async function cycle(): Promise<void> {
  const startedAt = Date.now();
  const start = performance.now();
  try {
    const lock = await client.acquire(lockName, { waitTimeout: hangMs, owner: 'flood-probe' });
    const acquired = performance.now();
    await lock.release();
    samples.push([startedAt, acquired - start, performance.now() - start]);
  } catch (error) {
    if (error instanceof LockTimeoutError) {
      hangs.push({ startedAt, waitedMs: performance.now() - start });
    } else {
      failures.push({ startedAt, message: (error as Error).message });
    }
  }
}

async function probe(): Promise<void> {
  let next = performance.now();
  while (!stopping) {
    await cycle();
    next = Math.max(next + intervalMs, performance.now());
    await delay(next - performance.now());
  }
}

// Warm the connection and the session before anyone measures.
for (let i = 0; i < 20; i += 1) await cycle();
samples.length = 0;
console.log(JSON.stringify({ event: 'ready' }));

let running: Promise<void> | undefined;
for await (const line of createInterface({ input: process.stdin })) {
  if (line === 'go') running = probe();
  if (line === 'stop') {
    stopping = true;
    await running;
    const state = await client.describe(lockName);
    console.log(
      JSON.stringify({
        event: 'done',
        samples,
        hangs,
        failures,
        afterwards: { holders: state.holders.length, waiters: state.waiters.length },
      }),
    );
    client.close();
    break;
  }
}
