import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  ZooKeeper,
  zk,
  type ZooKeeperHandle,
  type ZooKeeperStat,
} from '../../src/server/stores/zookeeper/zookeeper-client.js';
import {
  startZooKeeperEnsemble,
  type EnsembleMember,
  type MemberMode,
  type ZooKeeperEnsemble,
} from '../setup/zookeeper-ensemble.js';
import { sendFourLetterWord } from '../setup/zookeeper-process.js';
import { isAlive } from '../support/is-alive.js';
import { scaled } from '../support/timing.js';

/** A client session on `connectString`, resolved once connected. */
async function connect(connectString: string): Promise<ZooKeeperHandle> {
  // debug_level 0: the C client would otherwise print to stdout.
  const config = { connect: connectString, timeout: 10_000, debug_level: 0, host_order_deterministic: true };
  const handle = new ZooKeeper(config);
  await new Promise<void>((resolve, reject) => {
    handle.once('connect', () => resolve());
    handle.once('close', () => reject(new Error(`could not connect to ${connectString}`)));
    handle.init(config);
  });
  return handle;
}

function create(handle: ZooKeeperHandle, path: string, data: string): Promise<string> {
  return new Promise((resolve, reject) => {
    handle.native.a_create(path, data, zk.ZOO_PERSISTENT, (rc, error, created) => {
      if (rc === zk.ZOK) resolve(created);
      else reject(new Error(`create ${path}: ${error} (${rc})`));
    });
  });
}

function exists(handle: ZooKeeperHandle, path: string): Promise<ZooKeeperStat | null> {
  return new Promise((resolve, reject) => {
    handle.native.a_exists(path, false, (rc, error, stat) => {
      if (rc === zk.ZOK) resolve(stat);
      else if (rc === zk.ZNONODE) resolve(null);
      else reject(new Error(`exists ${path}: ${error} (${rc})`));
    });
  });
}

function children(handle: ZooKeeperHandle, path: string): Promise<string[]> {
  return new Promise((resolve, reject) => {
    handle.native.a_get_children(path, false, (rc, error, names) => {
      if (rc === zk.ZOK) resolve(names ?? []);
      else reject(new Error(`getChildren ${path}: ${error} (${rc})`));
    });
  });
}

async function modes(ensemble: ZooKeeperEnsemble): Promise<MemberMode[]> {
  return Promise.all(ensemble.members.map((member) => member.mode()));
}

/** The leader's count of followers that are connected and synced with it. */
async function syncedFollowers(leader: EnsembleMember): Promise<number> {
  const mntr = await sendFourLetterWord(leader.clientPort, 'mntr', 2_000);
  const count = /^zk_synced_followers\s+(\d+)$/m.exec(mntr)?.[1];
  if (count === undefined) throw new Error(`no zk_synced_followers in mntr: ${mntr}`);
  return Number(count);
}

describe('startZooKeeperEnsemble (three servers on loopback)', () => {
  let ensemble: ZooKeeperEnsemble;

  beforeAll(async () => {
    ensemble = await startZooKeeperEnsemble();
  }, scaled(100_000));

  afterAll(async () => {
    await ensemble?.stop();
  });

  it('elects exactly one leader; the other two follow', async () => {
    expect(ensemble.members.map((member) => member.id)).toEqual([1, 2, 3]);
    expect(ensemble.connectString).toBe(ensemble.members.map((member) => member.connectString).join(','));
    for (const member of ensemble.members) {
      expect(member.connectString).toBe(`127.0.0.1:${member.clientPort}`);
      expect(member.pid).not.toBeNull();
      expect(existsSync(member.dataDir)).toBe(true);
    }
    expect(new Set(ensemble.members.map((member) => member.clientPort)).size).toBe(3);

    const all = await modes(ensemble);
    expect(all.filter((mode) => mode === 'leader')).toHaveLength(1);
    expect(all.filter((mode) => mode === 'follower')).toHaveLength(2);
    const leader = await ensemble.leader();
    expect(all[ensemble.members.indexOf(leader)]).toBe('leader');
    expect(await syncedFollowers(leader)).toBe(2);
  });

  it('replicates: a znode written through one member is read through another', async () => {
    const [first, second] = ensemble.members;
    if (first === undefined || second === undefined) throw new Error('INVARIANT: three members');
    const writer = await connect(first.connectString);
    const reader = await connect(second.connectString);
    try {
      const path = `/ensemble-harness-${randomUUID()}`;
      expect(await create(writer, path, 'hello')).toBe(path);
      // The write is committed by a quorum, which need not include the reader's member yet.
      const stat = await vi.waitFor(
        async () => {
          const found = await exists(reader, path);
          if (found === null) throw new Error(`${path} not replicated yet`);
          return found;
        },
        { timeout: scaled(5_000), interval: 50 },
      );
      expect(stat.czxid).toBeGreaterThan(0);
      expect(await children(reader, '/')).toContain(path.slice(1));
    } finally {
      writer.close();
      reader.close();
    }
  });

  it(
    'kill() of the leader: another member is elected and a quorum serves',
    async () => {
      const old = await ensemble.leader();
      const oldPid = old.pid;
      if (oldPid === null) throw new Error('INVARIANT: the leader is running');
      await old.kill();
      expect(old.pid).toBeNull();
      expect(isAlive(oldPid)).toBe(false);
      expect(await old.mode()).toBe('down');

      await ensemble.waitForQuorum(20_000);
      const next = await ensemble.leader();
      expect(next.id).not.toBe(old.id);
    },
    scaled(30_000),
  );

  it(
    'restart() brings the killed member back, as a follower of the new leader',
    async () => {
      const down = ensemble.members.find((member) => member.pid === null);
      if (down === undefined) throw new Error('INVARIANT: the previous test killed a member');
      const leader = await ensemble.leader();
      await down.restart();
      expect(down.pid).not.toBeNull();
      expect(await down.mode()).toBe('follower');
      // No new election: the member joined the running leader.
      expect((await ensemble.leader()).id).toBe(leader.id);
      await vi.waitFor(async () => expect(await syncedFollowers(leader)).toBe(2), {
        timeout: scaled(10_000),
      });
      await expect(down.restart()).rejects.toThrow(/is running/);
    },
    scaled(30_000),
  );

  it(
    'pause() makes a follower unresponsive while the other two keep a quorum; resume() lets it rejoin',
    async () => {
      const leader = await ensemble.leader();
      const follower = ensemble.members.find((member) => member !== leader);
      if (follower === undefined) throw new Error('INVARIANT: three members');
      follower.pause();
      try {
        expect(follower.paused).toBe(true);
        expect(await follower.mode()).toBe('down');
        expect(follower.pid).not.toBeNull();
        await ensemble.waitForQuorum(10_000);
        expect((await ensemble.leader()).id).toBe(leader.id);
        // After syncLimit (1 s) without a word from it, the leader drops the frozen follower.
        await vi.waitFor(async () => expect(await syncedFollowers(leader)).toBe(1), {
          timeout: scaled(10_000),
        });
      } finally {
        follower.resume();
      }
      expect(follower.paused).toBe(false);
      // It notices that the leader dropped it, rejoins, and syncs. The leader counts it as synced
      // a moment before the member itself serves again, so both are waited for.
      await vi.waitFor(
        async () => {
          expect(await follower.mode()).toBe('follower');
          expect(await syncedFollowers(leader)).toBe(2);
        },
        { timeout: scaled(10_000) },
      );
    },
    scaled(30_000),
  );

  it(
    'stop() resumes paused members, leaves no JVM and no files, and is idempotent',
    async () => {
      const pids = ensemble.members.map((member) => member.pid);
      expect(pids.every((pid) => pid !== null && isAlive(pid))).toBe(true);
      const [first, , third] = ensemble.members;
      if (first === undefined || third === undefined) throw new Error('INVARIANT: three members');
      // A frozen JVM cannot act on SIGTERM: stop() has to continue it first (else it would only
      // die of the SIGKILL that follows 5 s later).
      third.pause();

      const startedAt = performance.now();
      await ensemble.stop();
      expect(performance.now() - startedAt).toBeLessThan(4_000);

      for (const pid of pids) if (pid !== null) expect(isAlive(pid)).toBe(false);
      for (const member of ensemble.members) expect(member.pid).toBeNull();
      expect(existsSync(ensemble.dir)).toBe(false);
      await expect(ensemble.stop()).resolves.toBeUndefined();
      await expect(first.restart()).rejects.toThrow(/stopped/);
    },
    scaled(30_000),
  );
});
