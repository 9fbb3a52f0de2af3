import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { LockClient, LockLostError } from '../../src/client/index.js';
import { loadConfig } from '../../src/server/config.js';
import { startServer } from '../../src/server/main.js';
import { FencedResource } from '../support/fenced-resource.js';
import { deferred } from '../support/lock-caller.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { startServerProcess } from '../support/server-process.js';
import { TcpProxyProcess } from '../support/tcp-proxy-process.js';
import { expireZooKeeperSession } from '../support/zookeeper-faults.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

/**
 * Kleppmann's case against locks without fencing: the old holder is paused or cut off, its lock
 * passes to someone else, and it goes on writing because nobody could tell it. Here server A's
 * ZooKeeper session expires while the link between A and its holder is frozen, so the holder
 * cannot hear that it lost the lock; server B grants the lock to the next caller meanwhile.
 */
describe('fencing tokens across a session expiry the old holder has not heard of', () => {
  const cleanups: Array<() => Promise<unknown> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('let a resource that refuses older tokens reject the old holder once the new one has written', async () => {
    const root = `/fencing-${randomUUID()}`;
    const serverA = await startServer(
      loadConfig({}, ['--port', '0', '--zookeeper', connectString, '--root', root]),
      pino({ level: 'silent' }),
    );
    cleanups.push(() => serverA.stop());
    const serverB = await startServerProcess(['--zookeeper', connectString, '--root', root]);
    cleanups.push(() => serverB.kill('SIGTERM'));
    // The old holder reaches A through a proxy that can freeze the link: nothing passes, nothing
    // is closed, as with a long GC pause or a partition between client and server.
    const clientLink = await TcpProxyProcess.start(`127.0.0.1:${serverA.port}`);
    cleanups.push(() => clientLink.close());
    // A grace longer than the expiry can take on a loaded machine: the old holder must not
    // give its lock up on its own before the successor has it (that is the case under test).
    const oldClient = new LockClient(clientLink.address, { resumeGraceMs: 30_000 });
    const newClient = new LockClient(serverB.address);
    cleanups.push(
      () => oldClient.close(),
      () => newClient.close(),
    );
    const resource = new FencedResource();

    const old = await oldClient.acquire('fenced', { owner: 'old' });
    expect(resource.write('old', old.token)).toBe(true);
    const queued = deferred<number>();
    const next = newClient.acquire('fenced', { owner: 'new', onQueued: queued.resolve });
    expect(await queued.promise).toBe(1);

    await clientLink.freeze();
    await expireZooKeeperSession(serverA.store, connectString);
    const successor = await next;
    // The lock has moved on, and the old holder has not been told: it still believes it holds.
    expect(old.lost.aborted).toBe(false);
    expect(successor.token).toBeGreaterThan(old.token);

    expect(resource.write('new', successor.token)).toBe(true);
    // The old holder's delayed write arrives now, and the token is what stops it.
    expect(resource.write('old', old.token)).toBe(false);
    expect(resource.accepted.map((w) => w.writer)).toEqual(['old', 'new']);
    expect(resource.refused).toEqual([{ writer: 'old', token: old.token }]);

    // Once the link is back, the old holder hears that its lock is gone.
    const lost = new Promise<unknown>((resolve) =>
      old.lost.addEventListener('abort', () => resolve(old.lost.reason), { once: true }),
    );
    await clientLink.thaw();
    expect(await lost).toBeInstanceOf(LockLostError);
    await successor.release();
  });
});
