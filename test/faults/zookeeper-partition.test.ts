import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { LockClient, LockLostError, Status, type Lock } from '../../src/client/index.js';
import { deferred } from '../support/lock-caller.js';
import { LockHistory } from '../support/lock-history.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { TcpProxyProcess } from '../support/tcp-proxy-process.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));
/** Short, so a partition outlasts it quickly; ZooKeeper's test server grants from 400 ms. */
const SESSION_TIMEOUT_MS = 3_000;

/**
 * Server A reaches ZooKeeper through a proxy that can freeze the link (a partition: nothing
 * passes, nothing is closed); server B reaches it directly. Clients of both queue for one lock.
 */
describe('a lockstream server cut off from ZooKeeper', () => {
  const cleanups: Array<() => Promise<unknown> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setUp(): Promise<{
    proxy: TcpProxyProcess;
    a: LockClient;
    b: LockClient;
    servers: ServerProcess[];
  }> {
    const root = `/partition-${randomUUID()}`;
    const proxy = await TcpProxyProcess.start(connectString);
    cleanups.push(() => proxy.close());
    const timeout = ['--session-timeout', `${SESSION_TIMEOUT_MS}ms`, '--root', root];
    const servers = await Promise.all([
      startServerProcess(['--zookeeper', proxy.address, ...timeout]),
      startServerProcess(['--zookeeper', connectString, ...timeout]),
    ]);
    cleanups.push(() => Promise.all(servers.map((s) => s.kill('SIGTERM'))));
    const [a, b] = servers.map((server) => new LockClient(server.address));
    cleanups.push(
      () => a!.close(),
      () => b!.close(),
    );
    return { proxy, a: a!, b: b!, servers };
  }

  it('ends its holders with ABORTED before ZooKeeper can expire its session and another server grant the lock', async () => {
    const { proxy, a, b, servers } = await setUp();
    const history = new LockHistory();
    const inDoubt = deferred<number>();
    const holder = history.held(
      'holder@A',
      await a.acquire('partition', { mode: 'write', onInDoubt: () => inDoubt.resolve(performance.now()) }),
    );
    const queued = deferred<number>();
    const waiting = b.acquire('partition', { mode: 'write', onQueued: queued.resolve });
    expect(await queued.promise).toBe(1);

    await proxy.freeze();
    const frozenAt = performance.now();
    const lost = await new Promise<unknown>((resolve) =>
      holder.lost.addEventListener('abort', () => resolve(holder.lost.reason), { once: true }),
    );
    expect(lost).toBeInstanceOf(LockLostError);
    expect(lost).toMatchObject({
      code: Status.ABORTED,
      message: expect.stringMatching(/no reply from ZooKeeper/),
    });
    const next = history.held('waiter@B', await waiting);

    const lostAt = history.when({ holder: 'holder@A', kind: 'ended' });
    const grantedAt = history.when({ holder: 'waiter@B', kind: 'granted' });
    expect(await inDoubt.promise).toBeLessThan(lostAt);
    expect(lostAt).toBeLessThan(grantedAt);
    history.verify();
    console.info(
      `partition: in doubt after ${Math.round((await inDoubt.promise) - frozenAt)} ms, holder told lost after ` +
        `${Math.round(lostAt - frozenAt)} ms, other server granted after ${Math.round(grantedAt - frozenAt)} ms ` +
        `(session timeout ${SESSION_TIMEOUT_MS} ms)`,
    );

    // The link comes back: server A recovers by itself, on a new session, behind B's holder.
    await proxy.thaw();
    const again = deferred<number>();
    const retry = a.acquire('partition', { mode: 'write', onQueued: again.resolve });
    expect(await again.promise).toBe(1);
    await history.release(next);
    const recovered = history.held('holder@A-again', await retry);
    await history.release(recovered);
    history.verify();
    // Through all of that, stdout carried JSON log lines only (the native client prints nothing).
    for (const server of servers) expect(server.logs.filter((line) => 'notJson' in line)).toEqual([]);
  });

  it('keeps the lock through a short cut, in doubt and then confirmed, and grants nothing meanwhile', async () => {
    const { proxy, a, b } = await setUp();
    const history = new LockHistory();
    const events: string[] = [];
    const inDoubt = deferred();
    const confirmed = deferred();
    const holder: Lock = history.held(
      'holder@A',
      await a.acquire('blip', {
        onInDoubt: () => {
          events.push('in doubt');
          inDoubt.resolve();
        },
        onConfirmed: () => {
          events.push('confirmed');
          confirmed.resolve();
        },
      }),
    );
    const queued = deferred<number>();
    const waiting = b.acquire('blip', { onQueued: queued.resolve });
    await queued.promise;

    await proxy.freeze();
    await inDoubt.promise;
    await proxy.thaw();
    await confirmed.promise;
    expect(holder.lost.aborted).toBe(false);
    expect(events).toEqual(['in doubt', 'confirmed']);

    await history.release(holder);
    const next = history.held('waiter@B', await waiting);
    expect(next.token).toBeGreaterThan(holder.token);
    await history.release(next);
    history.verify();
  });
});
