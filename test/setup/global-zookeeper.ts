/**
 * Vitest globalSetup: one real ZooKeeper server shared by the whole test run.
 *
 * Tests read it with `inject('zookeeperConnectString')` (null when ZooKeeper is not installed and
 * this is not CI; integration tests decide themselves whether that means skip or fail). The
 * four-letter-word interface is on the same client port, so the connect string is all a test
 * needs to reach it. Set LOCKSTREAM_ZK_LOG=1 to see the server's log on stderr.
 */
import type { TestProject } from 'vitest/node';
import {
  findZooKeeperInstallation,
  startZooKeeper,
  type StartZooKeeperOptions,
} from './zookeeper-process.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** "127.0.0.1:PORT" of the shared server, or null when ZooKeeper is not installed. */
    zookeeperConnectString: string | null;
    /** The shared server's JVM pid, or null when ZooKeeper is not installed. */
    zookeeperPid: number | null;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (findZooKeeperInstallation() === null) {
    const problem =
      'ZooKeeper is not installed (need java and /usr/share/java/zookeeper.jar from the Debian ' +
      '"zookeeper" package). Run scripts/install-test-deps.sh.';
    if (process.env['CI'] === 'true') throw new Error(`${problem} Refusing to run on CI without it.`);
    const bar = '!'.repeat(100);
    console.warn(`\n${bar}\n!! ${problem}\n!! Integration tests that need ZooKeeper will not run.\n${bar}\n`);
    project.provide('zookeeperConnectString', null);
    project.provide('zookeeperPid', null);
    return async () => {};
  }

  const options: StartZooKeeperOptions = {};
  if (process.env['LOCKSTREAM_ZK_LOG'] === '1') {
    options.logger = (line) => process.stderr.write(`[zookeeper] ${line}\n`);
  }
  const zookeeper = await startZooKeeper(options);
  project.provide('zookeeperConnectString', zookeeper.connectString);
  project.provide('zookeeperPid', zookeeper.pid);

  return async () => {
    await zookeeper.stop();
  };
}
