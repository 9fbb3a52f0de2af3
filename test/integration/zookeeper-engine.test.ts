import { pino } from 'pino';
import { inject } from 'vitest';
import { LockEngine } from '../../src/server/engine/lock-engine.js';
import { ZooKeeperStore } from '../../src/server/stores/zookeeper/zookeeper-store.js';
import { describeEngineContract } from '../contract/engine-contract.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { expireZooKeeperSession } from '../support/zookeeper-faults.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

// On lockstream's own ZooKeeper client, the default: the addon client has no `multi`, so it
// cannot take multi-locks (the gRPC conformance suite covers what it answers instead).
describeEngineContract('ZooKeeper', async (rootPath) => {
  const store = await ZooKeeperStore.connect({
    connectString,
    sessionTimeoutMs: 4000,
    connectTimeoutMs: 5000,
    client: 'protocol',
    logger: pino({ level: 'silent' }),
  });
  return {
    engine: new LockEngine({ store, replacement: store, rootPath, logger: pino({ level: 'silent' }) }),
    store,
    expireSession: () => expireZooKeeperSession(store, connectString),
    close: () => store.close(),
  };
});
