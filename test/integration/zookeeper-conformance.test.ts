import { afterAll, beforeAll, inject } from 'vitest';
import type { StoreSession } from '../../src/server/stores/store.js';
import { ZOOKEEPER_CLIENTS } from '../../src/server/stores/zookeeper/zookeeper-link.js';
import { describeLockConformance } from '../contract/lock-conformance.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { TcpProxyProcess } from '../support/tcp-proxy-process.js';
import { expireZooKeeperSession } from '../support/zookeeper-faults.js';
import { watchesUnder } from '../support/zookeeper-watches.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

/** Resolves once the session's `confirmed` is `value`. */
function untilConfirmed(session: StoreSession, value: boolean): Promise<void> {
  return new Promise((resolve) => {
    if (session.confirmed === value) return resolve();
    const unsubscribe = session.onConfirmedChange((confirmed) => {
      if (confirmed !== value) return;
      unsubscribe();
      resolve();
    });
  });
}

// The servers reach ZooKeeper through a proxy that can freeze the link, as a network partition
// does; otherwise it forwards every byte untouched.
let proxy: TcpProxyProcess;
beforeAll(async () => {
  proxy = await TcpProxyProcess.start(connectString);
});
afterAll(async () => {
  await proxy.close();
});

// On each ZooKeeper client the store can run on: lockstream's own (the default) and the addon.
for (const client of ZOOKEEPER_CLIENTS) {
  describeLockConformance(`ZooKeeper (${client} client)`, {
    // 6 s: in doubt after 2 s without a reply, given up after 4 s; a frozen link is thawed long
    // before that.
    serveArgs: () => ['--zookeeper', proxy.address, '--zookeeper-client', client, '--session-timeout', '6s'],
    expireSession: (server) => expireZooKeeperSession(server.store, connectString),
    setSessionConfirmed: async (server, confirmed) => {
      await (confirmed ? proxy.thaw() : proxy.freeze());
      await untilConfirmed(server.store.session, confirmed);
    },
    watchedPaths: async (rootPath) => [
      ...(await watchesUnder(Number(connectString.split(':')[1]), rootPath)).keys(),
    ],
    replaces: client !== 'addon',
    rearmsChildrenWatch: client === 'addon',
  });
}
