import { createSequential } from '../../src/server/stores/store.js';
import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { describe, expect, inject, it } from 'vitest';
import { ZOOKEEPER_CLIENTS } from '../../src/server/stores/zookeeper/zookeeper-link.js';
import { ZooKeeperStore } from '../../src/server/stores/zookeeper/zookeeper-store.js';
import { zk } from '../../src/server/stores/zookeeper/zookeeper-client.js';
import { describeStoreContract } from '../contract/store-contract.js';
import { RawZooKeeper } from '../support/raw-zookeeper.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { expireZooKeeperSession } from '../support/zookeeper-faults.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

describeStoreContract('ZooKeeper (protocol client, the lock tree watched)', async (root) => {
  const store = await ZooKeeperStore.connect({
    connectString,
    sessionTimeoutMs: 4000,
    connectTimeoutMs: 5000,
    logger: pino({ level: 'silent' }),
    locksPath: `${root}/locks`,
  });
  return { store, expireSession: () => expireZooKeeperSession(store, connectString) };
});

for (const client of ZOOKEEPER_CLIENTS) {
  describeStoreContract(`ZooKeeper (${client} client)`, async () => {
    const store = await ZooKeeperStore.connect({
      connectString,
      sessionTimeoutMs: 4000,
      connectTimeoutMs: 5000,
      client,
      logger: pino({ level: 'silent' }),
    });
    return {
      store,
      expireSession: () => expireZooKeeperSession(store, connectString),
      replaces: client !== 'addon',
    };
  });
}

/** Resolves once `node` is gone, polling `raw`; rejects if it is still there after `withinMs`. */
async function untilGone(raw: RawZooKeeper, node: string, withinMs: number): Promise<number> {
  const start = performance.now();
  for (;;) {
    const answer = await raw.getData(node);
    const elapsedMs = performance.now() - start;
    if (answer.rc === zk.ZNONODE) return elapsedMs;
    if (elapsedMs > withinMs) throw new Error(`${node} still exists ${Math.round(elapsedMs)} ms later`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe.each(ZOOKEEPER_CLIENTS)('a ZooKeeper session the store gives up (%s client)', (client) => {
  it('is ended whatever its link does: its nodes go within the session timeout, though the link stays connected', async () => {
    // Replies reach the store through a proxy that can make them lag further and further.
    const proxy = await TcpProxy.start(connectString);
    const store = await ZooKeeperStore.connect({
      connectString: proxy.address,
      sessionTimeoutMs: 3000,
      connectTimeoutMs: 10_000,
      client,
      logger: pino({ level: 'silent' }),
    });
    const raw = await RawZooKeeper.connect(connectString);
    const root = `/given-up-${randomUUID()}`;
    try {
      const sessionTimeoutMs = store.negotiatedSessionTimeoutMs;
      const { path, session } = await createSequential(
        store,
        `${root}/lock`,
        `node-${randomUUID()}-`,
        new Uint8Array(),
      );
      const lost = new Promise((resolve) =>
        session.lost.addEventListener('abort', () => resolve(session.lost.reason), { once: true }),
      );

      // The store's newest answered request grows older until the store gives the session up
      // (two thirds of its timeout); the link itself keeps hearing (late) replies meanwhile, so
      // it stays connected and, left alone, would keep the session alive with its pings.
      proxy.lagReplies();
      expect(await lost).toMatchObject({ code: 'LOCK_LOST' });
      expect(session.lost.reason).toMatchObject({
        message: expect.stringMatching(/no reply from ZooKeeper/),
      });
      proxy.endLag();

      // Holders were told their locks are lost: the node must go, and another server may then
      // grant them. A session left alive would keep it until the server stops.
      await untilGone(raw, path, sessionTimeoutMs + 1000);

      // The store goes on, on a new session.
      const again = await createSequential(store, `${root}/lock`, `node-${randomUUID()}-`, new Uint8Array());
      expect(again.session).not.toBe(session);
      await store.delete(again.path);
    } finally {
      await store.close();
      await raw.delete(`${root}/lock`);
      await raw.delete(root);
      raw.close();
      await proxy.close();
    }
  });
});
