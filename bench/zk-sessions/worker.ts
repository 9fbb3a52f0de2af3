/**
 * One client process of `npm run bench:zk-sessions` (bench/zk-sessions.ts), on lockstream's own
 * ZooKeeper client, so that its memory, CPU and descriptors are its own. Speaks JSON lines on
 * stdout and takes commands on stdin (bench/processes.ts). Run with `--expose-gc`:
 *
 *   node --expose-gc --import tsx zk-sessions/worker.ts ROLE CONNECT ROOT COUNT SESSION_TIMEOUT_MS
 *
 * Roles:
 * - `sessions`: COUNT ZooKeeper sessions, each its own connection holding one ephemeral
 *   sequential node (a held lock), as if each client session owned a ZooKeeper session;
 * - `instance`: one ZooKeeper session holding COUNT ephemeral sequential nodes (today's design:
 *   one session per lockstream instance);
 * - `holder`: one session holding COUNT nodes and an ownership record, whose session another
 *   process takes over; it reports what its connection sees and acts when told to.
 *
 * Commands: `sample` (memory after a full GC, CPU, descriptors), `close` (closeSession each
 * session), `act` (holder: a write fenced by the ownership record, then an unfenced one).
 */
import { readdirSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { ZooKeeperConnection } from '../../src/server/stores/zookeeper/protocol/connection.js';
import {
  CreateMode,
  ErrorCode,
  OPEN_ACL_UNSAFE,
} from '../../src/server/stores/zookeeper/protocol/records.js';
import { errorName, ZooKeeperError } from '../../src/server/stores/zookeeper/protocol/zookeeper-error.js';

const [role = '', connect = '', root = '', countArg = '', timeoutArg = ''] = process.argv.slice(2);
const COUNT = Number(countArg);
const SESSION_TIMEOUT_MS = Number(timeoutArg);
if (!['sessions', 'instance', 'holder'].includes(role) || !root.startsWith('/') || !(COUNT >= 1)) {
  throw new Error(`usage: zk-sessions/worker.ts sessions|instance|holder CONNECT ROOT COUNT TIMEOUT_MS`);
}
const servers = connect.split(',');
/** Sessions opened (or creates sent) at once: enough to keep ZooKeeper busy, few enough for its accept queue. */
const IN_FLIGHT = 200;
const EMPTY = new Uint8Array(0);

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run the worker with node --expose-gc');

function say(event: string, fields: Record<string, unknown> = {}): void {
  process.stdout.write(`${JSON.stringify({ event, ...fields })}\n`);
}

function codeOf(error: unknown): string {
  return error instanceof ZooKeeperError ? errorName(error.code) : String(error);
}

/** Runs `task(i)` for i in [0, count) with at most `limit` at once. */
async function pool(count: number, limit: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(limit, count) }, lane));
}

function open(session?: { id: bigint; password: Uint8Array }): Promise<ZooKeeperConnection> {
  return ZooKeeperConnection.connect({
    servers,
    sessionTimeoutMs: SESSION_TIMEOUT_MS,
    ...(session ? { session } : {}),
  });
}

async function ensure(zk: ZooKeeperConnection, path: string): Promise<void> {
  try {
    await zk.create(path, EMPTY, OPEN_ACL_UNSAFE, CreateMode.persistent);
  } catch (error) {
    if (!(error instanceof ZooKeeperError && error.code === ErrorCode.nodeExists)) throw error;
  }
}

const connections: ZooKeeperConnection[] = [];
/** What the sessions' connections went through after they were opened: anything is a failure. */
const seen = { disconnected: 0, reconnected: 0, expired: 0 };

function watchConnection(zk: ZooKeeperConnection): void {
  zk.on('disconnected', () => (seen.disconnected += 1));
  zk.on('connected', () => (seen.reconnected += 1));
  zk.on('expired', () => (seen.expired += 1));
}

function sample(): Record<string, unknown> {
  // CPU before the collection, so that a window between two samples does not count one.
  const cpu = process.cpuUsage();
  gc!();
  const memory = process.memoryUsage();
  return {
    rssBytes: memory.rss,
    heapUsedBytes: memory.heapUsed,
    externalBytes: memory.external,
    cpuMicros: cpu.user + cpu.system,
    fds: readdirSync('/proc/self/fd').length,
    connected: connections.filter((zk) => zk.connected).length,
    ...seen,
  };
}

async function closeAll(): Promise<number> {
  const startedAt = performance.now();
  await pool(connections.length, IN_FLIGHT, (i) => connections[i]!.close());
  return performance.now() - startedAt;
}

const setup = await open();
const dir = `${root}/locks`;
await ensure(setup, root);
await ensure(setup, dir);
await setup.close();
say('baseline', sample());

const startedAt = performance.now();
let holder: { zk: ZooKeeperConnection; first: string; last: string; ownerVersion: number } | undefined;
switch (role) {
  case 'sessions': {
    let failures = 0;
    await pool(COUNT, IN_FLIGHT, async () => {
      try {
        const zk = await open();
        connections.push(zk);
        watchConnection(zk);
        await zk.create(`${dir}/lock-`, EMPTY, OPEN_ACL_UNSAFE, CreateMode.ephemeralSequential);
      } catch (error) {
        failures += 1;
        if (failures === 1) say('failure', { message: codeOf(error) });
      }
    });
    say('opened', { ms: performance.now() - startedAt, failures });
    break;
  }
  case 'instance':
  case 'holder': {
    const zk = await open();
    connections.push(zk);
    const paths: string[] = [];
    await pool(COUNT, IN_FLIGHT, async (i) => {
      paths[i] = (
        await zk.create(`${dir}/lock-`, EMPTY, OPEN_ACL_UNSAFE, CreateMode.ephemeralSequential)
      ).path;
    });
    if (role === 'instance') {
      watchConnection(zk);
      say('opened', { ms: performance.now() - startedAt, failures: 0 });
      break;
    }
    // The record whose version a taker bumps: a write fenced on it fails once the session moved.
    const owner = await zk.create(`${root}/owner`, Buffer.from('A'), OPEN_ACL_UNSAFE, CreateMode.persistent);
    holder = { zk, first: paths[0]!, last: paths.at(-1)!, ownerVersion: owner.stat.version };
    // Wall-clock times: the benchmark compares them with its own.
    zk.on('disconnected', () => say('disconnected', { at: Date.now() }));
    zk.on('connected', () => say('connected', { at: Date.now() }));
    zk.on('expired', () => say('expired', { at: Date.now() }));
    say('opened', {
      ms: performance.now() - startedAt,
      failures: 0,
      sessionId: zk.sessionId.toString(16),
      password: Buffer.from(zk.sessionPassword).toString('hex'),
      first: holder.first,
      last: holder.last,
      ownerPath: `${root}/owner`,
      ownerVersion: holder.ownerVersion,
    });
    break;
  }
}

/** The holder, after its session may have moved: a write fenced on the ownership record, then a bare one. */
async function act(): Promise<Record<string, unknown>> {
  if (holder === undefined) throw new Error('act: not a holder');
  const { zk, first, ownerVersion } = holder;
  const result = async (attempt: () => Promise<unknown>): Promise<string> => {
    try {
      await attempt();
      return 'ok';
    } catch (error) {
      return codeOf(error);
    }
  };
  const fenced = await result(() =>
    zk.multi([
      { op: 'check', path: `${root}/owner`, version: ownerVersion },
      { op: 'setData', path: first, data: Buffer.from('A (fenced)'), version: -1 },
    ]),
  );
  const unfenced = await result(() => zk.setData(first, Buffer.from('A (unfenced)')));
  return { fenced, unfenced, connected: zk.connected };
}

const commands = createInterface({ input: process.stdin });
for await (const command of commands) {
  switch (command) {
    case 'sample':
      say('sample', sample());
      break;
    case 'act':
      say('acted', await act());
      break;
    case 'close':
      say('closed', { ms: await closeAll() });
      commands.close();
      process.stdin.destroy();
      break;
    default:
      say('error', { message: `unknown command ${command}` });
  }
}
