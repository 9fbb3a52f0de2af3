import { startZooKeeper } from '../test/setup/zookeeper-process.js';
const zookeeper = await startZooKeeper({ production: true });
console.log('ZK', zookeeper.connectString, zookeeper.pid);
process.stdin.resume();
process.stdin.on('end', async () => { await zookeeper.stop(); process.exit(0); });
process.on('SIGTERM', async () => { await zookeeper.stop(); process.exit(0); });
