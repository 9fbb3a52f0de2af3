import { inject } from 'vitest';
import { describeLockConformance } from '../contract/lock-conformance.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { expireZooKeeperSession } from '../support/zookeeper-faults.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

describeLockConformance('ZooKeeper', {
  serveArgs: () => ['--zookeeper', connectString, '--session-timeout', '4s'],
  expireSession: (server) => expireZooKeeperSession(server.store, connectString),
});
