import { randomUUID } from 'node:crypto';
import v8 from 'node:v8';
import vm from 'node:vm';
import { pino } from 'pino';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { LockClient, LockTimeoutError } from '../../src/client/index.js';
import { loadConfig } from '../../src/server/config.js';
import { startServer, type RunningServer } from '../../src/server/main.js';
import { SessionState } from '../../src/server/stores/session-state.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { scaled } from '../support/timing.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

v8.setFlagsFromString('--expose-gc');
const collectGarbage = vm.runInNewContext('gc') as () => void;

/** Heap in use after a full collection. */
function settledHeap(): number {
  collectGarbage();
  collectGarbage();
  return process.memoryUsage().heapUsed;
}

const NAMES = ['leak/mutex', 'leak/shared', 'leak/contended'];

/**
 * One round of everything a client does to a server: acquire and release, share, queue and
 * give up, try-lock a held lock, time out, and resume-capable requests released cleanly.
 */
async function round(client: LockClient): Promise<void> {
  const mutex = await client.acquire('leak/mutex', { owner: 'leak-test' });
  await mutex.release();
  const readers = await Promise.all([1, 2, 3].map(() => client.acquire('leak/shared', { mode: 'read' })));
  await Promise.all(readers.map((reader) => reader.release()));
  const holder = await client.acquire('leak/contended', { mode: 'write' });
  // Plain checks, not expect(): the test framework keeps what its assertions see.
  if ((await client.tryAcquire('leak/contended')) !== null)
    throw new Error('try-lock on a held lock succeeded');
  const timedOut = await client
    .acquire('leak/contended', { waitTimeout: 1 })
    .catch((error: unknown) => error);
  if (!(timedOut instanceof LockTimeoutError)) throw new Error(`expected a timeout, got ${String(timedOut)}`);
  const giveUp = new AbortController();
  const waiter = client.acquire('leak/contended', { signal: giveUp.signal, onQueued: () => giveUp.abort() });
  if ((await waiter.catch((error: unknown) => error)) !== giveUp.signal.reason)
    throw new Error('abort did not reject');
  await holder.release();
}

describe.each([
  ['memory', (): string[] => []],
  ['ZooKeeper', (): string[] => ['--zookeeper', connectString, '--root', `/leaks-${randomUUID()}`]],
])('a server after thousands of lock requests on the %s back end', (_backend, serveArgs) => {
  let server: RunningServer | undefined;
  let client: LockClient | undefined;
  afterEach(async () => {
    client?.close();
    await server?.stop();
  });

  it(
    'is back at its baseline: no lock node, no resumable request, no session listener, heap near where it started',
    async () => {
      server = await startServer(loadConfig({}, ['--port', '0', ...serveArgs()]), pino({ level: 'silent' }));
      client = new LockClient(`127.0.0.1:${server.port}`);
      const session = server.store.session;
      if (!(session instanceof SessionState)) throw new Error('INVARIANT: store sessions are SessionStates');
      // Warm-up: code gets compiled and pools fill; what grows after that is kept per request.
      for (let i = 0; i < 150; i += 1) await round(client);
      await server.whenIdle();
      const baseline = settledHeap();
      // Health checking follows the session: that listener is the baseline.
      const listenersAtBaseline = session.listenerCount;

      for (let i = 0; i < 300; i += 1) await round(client);
      await server.whenIdle();
      const grown = settledHeap() - baseline;

      for (const name of NAMES) expect(await server.store.children(server.engine.lockPath(name))).toEqual([]);
      expect(server.sessions.size).toBe(0);
      expect(session.listenerCount).toBe(listenersAtBaseline);
      // 300 rounds are 2,700 requests; a few hundred bytes kept per request would show here.
      console.info(`heap after 2,700 more requests: ${(grown / 1024).toFixed(0)} KiB above the baseline`);
      expect(grown).toBeLessThan(1024 * 1024);
    },
    scaled(60_000),
  );
});
