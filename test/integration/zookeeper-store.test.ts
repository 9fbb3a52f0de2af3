import { pino } from 'pino';
import { inject } from 'vitest';
import { ZooKeeperStore } from '../../src/server/stores/zookeeper/zookeeper-store.js';
import { describeStoreContract } from '../contract/store-contract.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { expireZooKeeperSession } from '../support/zookeeper-faults.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

describeStoreContract('ZooKeeper', async () => {
  const store = await ZooKeeperStore.connect({
    connectString,
    sessionTimeoutMs: 4000,
    connectTimeoutMs: 5000,
    logger: pino({ level: 'silent' }),
  });
  return { store, expireSession: () => expireZooKeeperSession(store, connectString) };
});
