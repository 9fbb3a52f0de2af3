// Soak test: random acquire / cancel / timeout / release on a few locks, from clients of two
// lockstream servers on one real ZooKeeper, while servers are killed (SIGKILL) and restarted.
// At the end the whole history is checked (exclusion, read/write rules, growing tokens) and
// nothing may be left queued. Not part of CI; run it for as long as you like:
//
//   npm run soak -- --minutes 5
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { LockClient, LockClientError, type LockMode } from '../src/client/index.js';
import { ZooKeeperStore } from '../src/server/stores/zookeeper/zookeeper-store.js';
import { startZooKeeper } from '../test/setup/zookeeper-process.js';
import { LockHistory } from '../test/support/lock-history.js';
import { startServerProcess, type ServerProcess } from '../test/support/server-process.js';

const { values } = parseArgs({
  options: { minutes: { type: 'string', default: '1' }, clients: { type: 'string', default: '12' } },
});
const durationMs = Number(values.minutes) * 60_000;
const LOCKS = ['soak/a', 'soak/b', 'soak/c'];
const MODES: LockMode[] = ['mutex', 'read', 'write'];
const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)]!;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

// Ctrl-C or a timeout ends the run through process.exit, whose hooks kill the ZooKeeper and
// lockstream processes it started.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));
const zookeeper = await startZooKeeper();
const root = `/soak-${randomUUID()}`;
const serverArgs = ['--zookeeper', zookeeper.connectString, '--root', root, '--session-timeout', '2s'];
interface Node {
  process: ServerProcess;
  client: LockClient;
}
const start = async (): Promise<Node> => {
  const process = await startServerProcess(serverArgs);
  return { process, client: new LockClient(process.address) };
};
const nodes: Node[] = [await start(), await start()];
const history = new LockHistory();
const counts = { granted: 0, timedOut: 0, cancelled: 0, failed: 0, restarts: 0 };
const deadline = performance.now() + durationMs;

const worker = async (id: number): Promise<void> => {
  for (let round = 0; performance.now() < deadline; round += 1) {
    const node = pick(nodes);
    const controller = new AbortController();
    const cancelAfter =
      Math.random() < 0.1
        ? setTimeout(() => controller.abort(new Error('cancel')), Math.random() * 50)
        : undefined;
    try {
      const waitTimeout = Math.random() < 0.2 ? Math.floor(Math.random() * 100) : undefined;
      const lock = await node.client.acquire(pick(LOCKS), {
        mode: pick(MODES),
        signal: controller.signal,
        ...(waitTimeout === undefined ? {} : { waitTimeout }),
      });
      history.held(`client-${id}#${round}`, lock);
      counts.granted += 1;
      await sleep(Math.random() * 20);
      await history.release(lock);
    } catch (error) {
      if (controller.signal.aborted) counts.cancelled += 1;
      else if (error instanceof LockClientError && error.name === 'LockTimeoutError') counts.timedOut += 1;
      else if (error instanceof LockClientError) counts.failed += 1;
      else throw error;
    } finally {
      clearTimeout(cancelAfter);
    }
  }
};

const chaos = async (): Promise<void> => {
  while (performance.now() < deadline - 5_000) {
    await sleep(3_000 + Math.random() * 4_000);
    const victim = Math.floor(Math.random() * nodes.length);
    const old = nodes[victim]!;
    await old.process.kill('SIGKILL');
    nodes[victim] = await start();
    // Workers that picked the old server a moment ago finish with it first.
    setTimeout(() => old.client.close(), 1_000);
    counts.restarts += 1;
  }
};

await Promise.all([chaos(), ...Array.from({ length: Number(values.clients) }, (_, id) => worker(id))]);
history.verify();
const store = await ZooKeeperStore.connect({
  connectString: zookeeper.connectString,
  sessionTimeoutMs: 4_000,
  connectTimeoutMs: 10_000,
  logger: pino({ level: 'silent' }),
});
for (const node of nodes) {
  node.client.close();
  await node.process.kill('SIGTERM');
}
const leftovers: string[] = [];
for (const dir of await store.children(`${root}/locks`)) {
  leftovers.push(...(await store.children(`${root}/locks/${dir}`)).map((n) => `${dir}/${n}`));
}
await store.close();
await zookeeper.stop();
console.log(
  JSON.stringify({ minutes: Number(values.minutes), ...counts, events: history.events.length, leftovers }),
);
if (leftovers.length > 0) {
  console.error('soak: nodes left behind after every server stopped');
  process.exit(1);
}
console.log('soak: history verified, nothing left behind');
