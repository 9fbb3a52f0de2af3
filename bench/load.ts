/**
 * A load process: runs one workload against one target and reports on stdout (JSON lines):
 * `{"event":"ready"}` once warmed up, then, after reading `go` on stdin,
 * `{"event":"done","result":{...}}` (see WorkloadResult). bench/run.ts drives it, and takes its
 * snapshots of server CPU and ZooKeeper counters between `go` and `done`.
 *
 * Targets:
 * - `grpc --server host:port`: one LockClient (its own HTTP/2 connection) per client, each lock
 *   on its own Acquire stream (`--per-lock`) or each client on its own Session stream;
 * - `sdk-shared --server host:port`: one LockClient for every client: one connection, one
 *   Session stream (as one process with many tasks would use the SDK);
 * - `engine --zookeeper …`: lockstream's lock engine in this process on one ZooKeeper session;
 * - `naive --zookeeper …`: the textbook recipe in this process on one ZooKeeper session;
 * - `etcd --server host:port`: etcd's lock RPC, a lease per client, one channel (mutex only).
 */
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { LockClient } from '../dist/client/index.js';
import { LockEngine } from '../dist/server/engine/lock-engine.js';
import { Withdrawal } from '../dist/server/engine/lock-request.js';
import { ZooKeeperStore } from '../dist/server/stores/zookeeper/zookeeper-store.js';
import { openEtcdLocks } from './etcd/etcd-locks.js';
import { NaiveRecipe } from './naive-recipe.js';
import { clientCount, runWorkload, type LockSession, type WorkloadName } from './workloads.js';

const { values } = parseArgs({
  options: {
    target: { type: 'string' },
    server: { type: 'string' },
    'per-lock': { type: 'boolean', default: false },
    zookeeper: { type: 'string' },
    workload: { type: 'string' },
    prefix: { type: 'string', default: 'bench' },
    'resume-grace-ms': { type: 'string' },
    cycles: { type: 'string', default: '2000' },
    warmup: { type: 'string', default: '200' },
    clients: { type: 'string' },
    readers: { type: 'string', default: '16' },
    writers: { type: 'string', default: '2' },
    'duration-ms': { type: 'string', default: '10000' },
    'warmup-ms': { type: 'string', default: '1000' },
    'fresh-names': { type: 'boolean', default: false },
  },
});

const workload = values.workload as WorkloadName;
const settings = {
  workload,
  prefix: values.prefix,
  cycles: Number(values.cycles),
  warmupCycles: Number(values.warmup),
  clients: Number(values.clients ?? (workload === 'P' ? 64 : 32)),
  readers: Number(values.readers),
  writers: Number(values.writers),
  durationMs: Number(values['duration-ms']),
  warmupMs: Number(values['warmup-ms']),
  freshNames: values['fresh-names'],
};

function say(message: object): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

const stdin = createInterface({ input: process.stdin });
const lines = stdin[Symbol.asyncIterator]();

/** The SDK's resume grace, where the run sets one. */
const resumeGrace =
  values['resume-grace-ms'] === undefined ? {} : { resumeGraceMs: Number(values['resume-grace-ms']) };

async function open(): Promise<{ sessions: LockSession[]; close: () => Promise<void> }> {
  const count = clientCount(settings);
  switch (values.target) {
    case 'grpc': {
      const clients = Array.from(
        { length: count },
        () =>
          // Each client its own connection, as separate client processes would have.
          new LockClient(values.server ?? '', {
            streamPerLock: values['per-lock'],
            ...resumeGrace,
            channelOptions: { 'grpc.use_local_subchannel_pool': 1 },
          }),
      );
      const sessions = clients.map((client) => ({
        async acquire(name: string, mode: 'mutex' | 'read' | 'write') {
          const lock = await client.acquire(name, { mode });
          return () => lock.release();
        },
      }));
      return { sessions, close: async () => clients.forEach((client) => client.close()) };
    }
    case 'sdk-shared': {
      const client = new LockClient(values.server ?? '', resumeGrace);
      const session: LockSession = {
        async acquire(name, mode) {
          const lock = await client.acquire(name, { mode });
          return () => lock.release();
        },
      };
      return { sessions: Array.from({ length: count }, () => session), close: async () => client.close() };
    }
    case 'engine': {
      const logger = pino({ level: 'silent' });
      const store = await ZooKeeperStore.connect({
        connectString: values.zookeeper ?? '',
        sessionTimeoutMs: 10_000,
        connectTimeoutMs: 15_000,
        logger,
      });
      const engine = new LockEngine({ store, replacement: store, rootPath: '/bench-engine', logger });
      const session: LockSession = {
        async acquire(name, mode) {
          const lease = await engine.acquire({ name, mode }, { withdrawal: new Withdrawal() });
          return () => lease.release();
        },
      };
      return { sessions: Array.from({ length: count }, () => session), close: () => store.close() };
    }
    case 'naive': {
      const recipe = await NaiveRecipe.connect(values.zookeeper ?? '', '/bench-naive');
      return {
        sessions: Array.from({ length: count }, () => recipe),
        close: async () => recipe.close(),
      };
    }
    case 'etcd':
      return openEtcdLocks(values.server ?? '', count);
    case undefined:
    default:
      throw new Error(
        `unknown target ${values.target ?? '(none: --target grpc|sdk-shared|engine|naive|etcd)'}`,
      );
  }
}

try {
  const { sessions, close } = await open();
  const result = await runWorkload(settings, sessions, async () => {
    say({ event: 'ready' });
    const line = await lines.next();
    if (line.done || line.value.trim() !== 'go') throw new Error('expected "go" on stdin');
  });
  // Reported before closing: closing a ZooKeeper session is a write the run should not count.
  say({ event: 'done', result });
  await close();
  stdin.close();
} catch (error) {
  say({ event: 'error', message: error instanceof Error ? error.message : String(error) });
  process.exitCode = 1;
  stdin.close();
}
// Native handles (the ZooKeeper client) may keep the loop alive a moment: leave once reported.
process.stdout.write('', () => process.exit());
