/**
 * One client's side of the ZooKeeper client micro-benchmark, in its own process so its CPU is
 * its own: `node --import tsx cycle.ts CONNECT addon|protocol IN_FLIGHT CYCLES`. Two cycles:
 * the create(EPHEMERAL_SEQUENTIAL) + getData + delete, and a lock's uncontended cycle
 * as each client can do it: the addon needs create + getData (for the czxid) + delete; the
 * protocol client gets the czxid from create2, so create2 + delete. Prints one JSON line.
 */
import { ZooKeeper, type ZooKeeperHandle } from '../../src/server/stores/zookeeper/zookeeper-client.js';
import { ZooKeeperConnection } from '../../src/server/stores/zookeeper/protocol/connection.js';
import { CreateMode, OPEN_ACL_UNSAFE } from '../../src/server/stores/zookeeper/protocol/records.js';

interface Client {
  /** Creates an ephemeral sequential node; its czxid only if the create gives it. */
  create(prefix: string): Promise<{ path: string; czxid?: bigint }>;
  getCzxid(path: string): Promise<bigint>;
  delete(path: string): Promise<void>;
  ensure(path: string): Promise<void>;
  close(): void;
}

const [connect = '', which = 'protocol', inFlightArg = '64', cyclesArg = '4000'] = process.argv.slice(2);
const IN_FLIGHT = Number(inFlightArg);
const CYCLES = Number(cyclesArg);

async function addonClient(): Promise<Client> {
  const handle: ZooKeeperHandle = new ZooKeeper({
    connect,
    timeout: 10_000,
    debug_level: 0,
    host_order_deterministic: true,
    data_as_buffer: true,
  });
  await new Promise<void>((resolve) => {
    handle.once('connect', () => resolve());
    handle.init({
      connect,
      timeout: 10_000,
      debug_level: 0,
      host_order_deterministic: true,
      data_as_buffer: true,
    });
  });
  const native = handle.native;
  const call = <T>(run: (done: (rc: number, error: string, value: T) => void) => void): Promise<T> =>
    new Promise((resolve, reject) =>
      run((rc, error, value) => (rc === 0 ? resolve(value) : reject(new Error(`${error} (${rc})`)))),
    );
  return {
    create: async (prefix) => ({
      path: await call<string>((done) =>
        native.a_create(prefix, '', ZooKeeper.constants['ZOO_EPHEMERAL_SEQUENTIAL']!, done),
      ),
    }),
    getCzxid: async (path) =>
      BigInt(
        (
          await call<{ czxid: number }>((done) =>
            native.a_get(path, false, (rc, error, stat) => done(rc, error, stat as { czxid: number })),
          )
        ).czxid,
      ),
    delete: (path) =>
      call<void>((done) => native.a_delete_(path, -1, (rc, error) => done(rc, error, undefined))),
    ensure: (path) => new Promise((resolve) => native.a_create(path, '', 0, () => resolve())),
    close: () => handle.close(),
  };
}

async function protocolClient(): Promise<Client> {
  const zk = await ZooKeeperConnection.connect({ servers: connect.split(','), sessionTimeoutMs: 10_000 });
  const empty = Buffer.alloc(0);
  return {
    create: async (prefix) => {
      const created = await zk.create(prefix, empty, OPEN_ACL_UNSAFE, CreateMode.ephemeralSequential);
      return { path: created.path, czxid: created.stat.czxid };
    },
    getCzxid: async (path) => (await zk.getData(path)).stat.czxid,
    delete: async (path) => {
      await zk.delete(path);
    },
    ensure: (path) =>
      zk.create(path, empty, OPEN_ACL_UNSAFE, CreateMode.persistent).then(
        () => undefined,
        () => undefined,
      ),
    close: () => void zk.close(),
  };
}

function cpuMicros(): number {
  const usage = process.cpuUsage();
  return usage.user + usage.system;
}

/** Runs `cycle` CYCLES times with IN_FLIGHT workers; CPU µs per cycle and cycles per second. */
async function measure(
  cycle: () => Promise<void>,
): Promise<{ cpuMicrosPerCycle: number; cyclesPerSecond: number }> {
  let started = 0;
  const startedAt = performance.now();
  const cpuAt = cpuMicros();
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (started < CYCLES) {
        started += 1;
        await cycle();
      }
    }),
  );
  const seconds = (performance.now() - startedAt) / 1000;
  return { cpuMicrosPerCycle: (cpuMicros() - cpuAt) / CYCLES, cyclesPerSecond: CYCLES / seconds };
}

const client = which === 'addon' ? await addonClient() : await protocolClient();
await client.ensure('/zk-client-bench');
const prefix = '/zk-client-bench/n-';
const readCycle = async (): Promise<void> => {
  const { path } = await client.create(prefix);
  await client.getCzxid(path);
  await client.delete(path);
};
const lockCycle = async (): Promise<void> => {
  const created = await client.create(prefix);
  if (created.czxid === undefined) await client.getCzxid(created.path);
  await client.delete(created.path);
};
// Warm up both paths (JIT, connection buffers).
for (let i = 0; i < 300; i += 1) await readCycle();
const createGetDelete = await measure(readCycle);
const lock = await measure(lockCycle);
console.log(JSON.stringify({ client: which, inFlight: IN_FLIGHT, createGetDelete, lock }));
client.close();
setTimeout(() => process.exit(0), 200).unref();
