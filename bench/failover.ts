/**
 * `npm run bench:failover` (issue 27): how long a client's locks stay in doubt when the
 * lockstream instance serving it dies or restarts, with sessions taken over by another instance.
 *
 * Three instances (built JavaScript) on a private ZooKeeper (fsync on); `--clients` SDK clients
 * (one LockClient each, every endpoint known, its own instance first) hold `--locks` locks each.
 * 1. Kill: the instance serving a third of the clients is killed (SIGKILL); for each of its
 *    clients' locks, the time from the signal to `confirmed` (resumed on another instance,
 *    which took the dead instance's ZooKeeper session over). Then it is started again.
 * 2. Rolling restart: each instance in turn is stopped (SIGTERM: it hands its sessions over)
 *    and started again on its port; for each lock of the clients it served, the time from the
 *    signal to `confirmed`.
 * p50/p99/max per scenario over `--rounds` rounds, locks lost (must be 0), and the takeover's own
 * time as the taking instance logs it. Prints a table; writes JSON to bench/results/.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { LockClient, type Lock } from '../dist/client/index.js';
import { startZooKeeper } from '../test/setup/zookeeper-process.js';
import { BENCH_DIR, spawnLineProcess, type LineProcess } from './processes.js';

const { values: flags } = parseArgs({
  options: {
    clients: { type: 'string', default: '30' },
    locks: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '3' },
    out: { type: 'string' },
  },
});
const CLIENTS = Number(flags.clients);
const LOCKS = Number(flags.locks);
const ROUNDS = Number(flags.rounds);
const INSTANCES = 3;
const ROOT = '/bench-failover';

interface Instance {
  process: LineProcess;
  readonly port: number;
  /** Milliseconds each takeover took, as this instance logged them. */
  readonly takeovers: number[];
}

async function startInstance(zookeeper: string, port: number, takeovers: number[]): Promise<Instance> {
  const process_ = spawnLineProcess(
    process.execPath,
    [
      fileURLToPath(new URL('../dist/cli.js', import.meta.url)),
      'serve',
      '--port',
      String(port),
      '--zookeeper',
      zookeeper,
      '--root',
      ROOT,
    ],
    (line) => {
      if (
        String(line['msg']).startsWith('took over the store session') &&
        typeof line['tookMs'] === 'number'
      ) {
        takeovers.push(line['tookMs']);
      }
    },
  );
  const listening = await process_.next((m) => String(m['msg']).startsWith('lockstream listening'));
  return { process: process_, port: Number(listening['port']), takeovers };
}

interface HeldLock {
  readonly lock: Lock;
  /** performance.now() of the last `in doubt` and the last `confirmed`. */
  inDoubtAt: number;
  confirmedAt: number;
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

function summary(samples: readonly number[]): { n: number; p50: number; p99: number; max: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  const round = (ms: number): number => Math.round(ms * 10) / 10;
  return {
    n: sorted.length,
    p50: round(percentile(sorted, 50)),
    p99: round(percentile(sorted, 99)),
    max: round(sorted.at(-1) ?? Number.NaN),
  };
}

const zookeeper = await startZooKeeper({ production: true });
const instances: Instance[] = [];
const clients: LockClient[] = [];
try {
  for (let i = 0; i < INSTANCES; i += 1) instances.push(await startInstance(zookeeper.connectString, 0, []));
  const addresses = instances.map((instance) => `127.0.0.1:${instance.port}`);
  const held: HeldLock[] = [];
  let lost = 0;
  for (let c = 0; c < CLIENTS; c += 1) {
    // Client c starts on instance c % 3.
    const first = c % INSTANCES;
    const client = new LockClient([...addresses.slice(first), ...addresses.slice(0, first)]);
    clients.push(client);
    for (let l = 0; l < LOCKS; l += 1) {
      const entry = { inDoubtAt: 0, confirmedAt: 0 } as HeldLock & { lock: Lock };
      entry.lock = await client.acquire(`c${c}-l${l}`, {
        onInDoubt: () => (entry.inDoubtAt = performance.now()),
        onConfirmed: () => (entry.confirmedAt = performance.now()),
      });
      entry.lock.lost.addEventListener('abort', () => (lost += 1), { once: true });
      held.push(entry);
    }
  }

  /**
   * Signals instance `i`, and times the locks that went in doubt back to confirmed (those of the
   * clients it served); then starts it again on its port.
   */
  async function disrupt(i: number, signal: 'SIGKILL' | 'SIGTERM'): Promise<number[]> {
    const old = instances[i]!;
    const signalledAt = performance.now();
    process.kill(old.process.pid, signal);
    await old.process.exited;
    // Settled: a broken stream is noticed at once, so no lock newly in doubt for a second (an
    // instance may serve nobody: its clients moved on at an earlier disruption) and every lock
    // that went in doubt confirmed (or lost) again.
    for (;;) {
      const now = performance.now();
      const moved = held.filter((entry) => entry.inDoubtAt > signalledAt);
      const latest = Math.max(signalledAt, ...moved.map((entry) => entry.inDoubtAt));
      const back = moved.every((entry) => entry.confirmedAt > entry.inDoubtAt || entry.lock.lost.aborted);
      if (now - latest > 1_000 && back) break;
      if (now - signalledAt > 60_000) throw new Error(`locks still in doubt 60 s after ${signal}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const times = held
      .filter((entry) => entry.inDoubtAt > signalledAt && !entry.lock.lost.aborted)
      .map((entry) => entry.confirmedAt - signalledAt);
    instances[i] = await startInstance(zookeeper.connectString, old.port, old.takeovers);
    return times;
  }

  const kill: number[] = [];
  const rolling: number[] = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    kill.push(...(await disrupt(round % INSTANCES, 'SIGKILL')));
    for (let i = 0; i < INSTANCES; i += 1) rolling.push(...(await disrupt(i, 'SIGTERM')));
  }
  const takeovers = instances.flatMap((instance) => instance.takeovers);
  const result = {
    machine: { cpus: os.cpus().length, node: process.version },
    clients: CLIENTS,
    locksPerClient: LOCKS,
    rounds: ROUNDS,
    lost,
    killToConfirmedMs: summary(kill),
    rollingRestartToConfirmedMs: summary(rolling),
    takeoverMs: summary(takeovers),
  };
  console.log(
    `\nFailover: ${CLIENTS} clients x ${LOCKS} locks on 3 instances, ${ROUNDS} rounds; locks lost: ${lost}`,
  );
  console.table({
    'SIGKILL -> confirmed (ms)': result.killToConfirmedMs,
    'SIGTERM (rolling) -> confirmed (ms)': result.rollingRestartToConfirmedMs,
    'takeover, as logged (ms)': result.takeoverMs,
  });
  const out =
    flags.out ??
    path.join(BENCH_DIR, 'results', `failover-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  await mkdir(path.dirname(out), { recursive: true });
  await writeFile(out, `${JSON.stringify(result, null, 2)}\n`);
  console.log(`written to ${out}`);
} finally {
  for (const client of clients) client.close();
  for (const instance of instances) await instance.process.kill();
  await zookeeper.stop();
}
