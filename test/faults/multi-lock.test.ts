import { randomUUID } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import { LockLostError, type Lock } from '../../src/client/index.js';
import { deferred } from '../support/lock-caller.js';
import { LockHistory } from '../support/lock-history.js';
import { RawZooKeeper } from '../support/raw-zookeeper.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { faultFixture } from '../support/fault-fixture.js';
import type { ServerProcess } from '../support/server-process.js';
import { TcpProxyProcess } from '../support/tcp-proxy-process.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));
const SESSION_TIMEOUT_MS = 3_000;

/**
 * Multi-locks when their server dies or loses its ZooKeeper session, with one set holding and
 * another waiting: every node of both sets goes together (nothing of a set outlives the rest),
 * the locks pass to waiters elsewhere, and nothing is left in ZooKeeper.
 */
describe('multi-locks through server death and session expiry', () => {
  const fixture = faultFixture();
  const { client, later } = fixture;
  const serve = (root: string, zookeeper = connectString): Promise<ServerProcess> =>
    fixture.serve(['--zookeeper', zookeeper, '--root', root, '--session-timeout', `${SESSION_TIMEOUT_MS}ms`]);

  /** Starts acquiring and resolves once the request is queued, with its pending grant (wrapped: not awaited). */
  async function queued(
    start: (onQueued: (ahead: number) => void) => Promise<Lock>,
  ): Promise<{ readonly lock: Promise<Lock> }> {
    const told = deferred<number>();
    const lock = start(told.resolve);
    lock.catch(() => {});
    await told.promise;
    return { lock };
  }

  /** Every request node left under `root`'s lock parents. */
  async function requestNodes(root: string): Promise<string[]> {
    const zk = await RawZooKeeper.connect(connectString);
    try {
      const parents = (await zk.children(`${root}/locks`)).value ?? [];
      const nodes = await Promise.all(
        parents.map(async (parent) =>
          ((await zk.children(`${root}/locks/${parent}`)).value ?? []).map((n) => `${parent}/${n}`),
        ),
      );
      return nodes.flat();
    } finally {
      zk.close();
    }
  }

  it('a server killed with SIGKILL, one set holding and one waiting: all their locks pass to waiters on another server, nothing left behind', async () => {
    const root = `/multi-kill9-${randomUUID()}`;
    const doomedServer = await serve(root);
    const survivorServer = await serve(root);
    const doomed = client(doomedServer.address);
    const survivor = client(survivorServer.address);
    const holding = await doomed.acquireAll(['k/a', 'k/b', 'k/c']);
    // Waits behind `holding` on k/c; k/d is free, and reserved for it meanwhile.
    const waitingSet = await queued((onQueued) => doomed.acquireAll(['k/c', 'k/d'], { onQueued }));
    const waiters = await Promise.all(
      ['k/a', 'k/b', 'k/c', 'k/d'].map((name) => queued((onQueued) => survivor.acquire(name, { onQueued }))),
    );

    await doomedServer.kill('SIGKILL');
    const granted = await Promise.all(waiters.map((waiter) => waiter.lock));
    for (const lock of granted) {
      for (const { token } of holding.tokens) expect(lock.token).toBeGreaterThan(token);
    }
    await Promise.all(granted.map((lock) => lock.release()));
    await expect(waitingSet.lock).rejects.toThrow();
    expect(await requestNodes(root)).toEqual([]);
  });

  it('a session expiry ends a holding set as one loss and re-queues a waiting set on the new session; the locks go to another server meanwhile', async () => {
    const root = `/multi-expiry-${randomUUID()}`;
    const proxy = await TcpProxyProcess.start(connectString);
    later(() => proxy.close());
    const cutOff = client((await serve(root, proxy.address)).address);
    const other = client((await serve(root)).address);
    const history = new LockHistory();
    const holding = history.held('set@A', await cutOff.acquireAll(['e/a', { name: 'e/b', mode: 'write' }]));
    const waitingSet = await queued((onQueued) => cutOff.acquireAll(['e/b', 'e/c'], { onQueued }));
    const waiterA = await queued((onQueued) => other.acquire('e/a', { onQueued }));

    await proxy.freeze();
    const lost = await new Promise<unknown>((resolve) =>
      holding.lost.addEventListener('abort', () => resolve(holding.lost.reason), { once: true }),
    );
    expect(lost).toBeInstanceOf(LockLostError);
    const next = history.held('single@B', await waiterA.lock);
    expect(history.when({ holder: 'set@A', kind: 'ended' })).toBeLessThan(
      history.when({ holder: 'single@B', kind: 'granted' }),
    );
    // While A is cut off, B takes e/c: the waiting set, queued again once A is back, comes after.
    const onC = history.held('c@B', await other.acquire('e/c'));
    await proxy.thaw();
    await history.release(onC);
    const set = history.held('set2@A', await waitingSet.lock);
    expect(set.tokens.map((t) => t.name)).toEqual(['e/b', 'e/c']);
    await history.release(next);
    await history.release(set);
    history.verify();
    await expect(holding.release()).rejects.toBeInstanceOf(LockLostError);
    expect(await requestNodes(root)).toEqual([]);
  });
});
