import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startZooKeeper, type ZooKeeperProcess } from '../setup/zookeeper-process.js';
import { isAlive } from '../support/is-alive.js';

describe('startZooKeeper (a second, private server)', () => {
  let zookeeper: ZooKeeperProcess;

  beforeAll(async () => {
    zookeeper = await startZooKeeper();
  });

  afterAll(async () => {
    await zookeeper?.stop();
  });

  it('serves four-letter words on a loopback port of its own', async () => {
    expect(zookeeper.connectString).toBe(`127.0.0.1:${zookeeper.port}`);
    expect(zookeeper.connectString).not.toBe(inject('zookeeperConnectString'));
    expect(isAlive(zookeeper.pid)).toBe(true);
    expect(existsSync(zookeeper.dataDir)).toBe(true);

    expect(await zookeeper.fourLetterWord('ruok')).toBe('imok');
    const mntr = await zookeeper.fourLetterWord('mntr');
    expect(mntr).toContain('zk_version');
    expect(mntr).toMatch(/zk_server_state\s+standalone/);
  });

  it('applies the short-session configuration', async () => {
    const conf = await zookeeper.fourLetterWord('conf');
    expect(conf).toMatch(/^tickTime=200$/m);
    expect(conf).toMatch(/^minSessionTimeout=400$/m);
    expect(conf).toMatch(/^maxSessionTimeout=60000$/m);
  });

  it('stop() kills exactly its JVM and removes its directory, and is idempotent', async () => {
    const { pid, dir, dataDir } = zookeeper;
    await zookeeper.stop();

    expect(zookeeper.exited).toBe(true);
    expect(isAlive(pid)).toBe(false);
    expect(existsSync(dataDir)).toBe(false);
    expect(existsSync(dir)).toBe(false);
    await expect(zookeeper.fourLetterWord('ruok', 1_000)).rejects.toThrow(/ECONNREFUSED/);
    await expect(zookeeper.stop()).resolves.toBeUndefined();

    // The shared server from globalSetup is untouched.
    const sharedPid = inject('zookeeperPid');
    if (sharedPid !== null) expect(isAlive(sharedPid)).toBe(true);
  });
});
