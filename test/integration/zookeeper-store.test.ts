import { pino } from 'pino';
import { inject } from 'vitest';
import { ZOOKEEPER_CLIENTS } from '../../src/server/stores/zookeeper/zookeeper-link.js';
import { ZooKeeperStore } from '../../src/server/stores/zookeeper/zookeeper-store.js';
import { describeStoreContract } from '../contract/store-contract.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { expireZooKeeperSession } from '../support/zookeeper-faults.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

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
