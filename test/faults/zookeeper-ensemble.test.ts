import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LockClient, LockClientError } from '../../src/client/index.js';
import { ZooKeeperStore } from '../../src/server/stores/zookeeper/zookeeper-store.js';
import { startZooKeeperEnsemble, type ZooKeeperEnsemble } from '../setup/zookeeper-ensemble.js';
import { LockHistory } from '../support/lock-history.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { scaled } from '../support/timing.js';

const LOCK = 'ensemble/job';

/**
 * Clients of two lockstream servers take turns on one write lock while the three-server
 * ZooKeeper ensemble under them loses its leader, gets it back, and has a follower frozen.
 * Whatever happens: no two holders overlap, tokens grow, and every client finishes once the
 * ensemble has a quorum again.
 */
describe('lockstream on a three-server ZooKeeper ensemble under faults', () => {
  let ensemble: ZooKeeperEnsemble;
  const servers: ServerProcess[] = [];
  const root = `/ensemble-${randomUUID()}`;

  beforeAll(async () => {
    ensemble = await startZooKeeperEnsemble({ size: 3 });
    for (let i = 0; i < 2; i += 1) {
      servers.push(
        await startServerProcess([
          '--zookeeper',
          ensemble.connectString,
          '--root',
          root,
          '--session-timeout',
          '6s',
        ]),
      );
    }
  }, scaled(120_000));

  afterAll(async () => {
    await Promise.all(servers.map((s) => s.kill('SIGTERM')));
    await ensemble?.stop();
  });

  it(
    'never lets two holders overlap and strands no waiter, through a leader loss and a frozen follower',
    async () => {
      const history = new LockHistory();
      const failures: string[] = [];
      let grants = 0;
      const grantWaiters: Array<{ count: number; wake: () => void }> = [];
      /** Resolves once `more` further grants have happened: the workload is making progress. */
      const progress = (more: number): Promise<void> =>
        new Promise((wake) => grantWaiters.push({ count: grants + more, wake }));
      let running = true;

      const worker = async (id: number, client: LockClient): Promise<void> => {
        while (running) {
          try {
            const lock = history.held(`client-${id}`, await client.acquire(LOCK, { mode: 'write' }));
            grants += 1;
            for (const waiter of grantWaiters.filter((w) => grants >= w.count)) {
              grantWaiters.splice(grantWaiters.indexOf(waiter), 1);
              waiter.wake();
            }
            await new Promise((resolve) => setImmediate(resolve)); // the "work"
            await history.release(lock);
          } catch (error) {
            // Losing a lock or a call during a fault is allowed; overlapping is not.
            if (!(error instanceof LockClientError)) throw error;
            failures.push(`${error.name}: ${error.message}`);
          }
        }
      };
      const clients = servers.flatMap((server) => [0, 1, 2].map(() => new LockClient(server.address)));
      const workers = clients.map((client, id) => worker(id, client));

      await progress(20);
      const leader = await ensemble.leader();
      await leader.kill('SIGKILL');
      await ensemble.waitForQuorum();
      await progress(20);
      await leader.restart();
      await ensemble.waitForQuorum();
      await progress(20);

      // The harder freeze: the follower lockstream's sessions are connected to, if any. Their
      // connections go silent, and a new session dialing it finds it accepting and mute.
      const followers = [];
      for (const member of ensemble.members) {
        if ((await member.mode()) === 'follower')
          followers.push({ member, sessions: await member.sessionsConnected() });
      }
      followers.sort((a, b) => b.sessions - a.sessions);
      const follower = followers[0]!.member;
      follower.pause();
      await progress(20);
      follower.resume();
      await ensemble.waitForQuorum();
      await progress(20);

      running = false;
      await Promise.all(workers);
      for (const client of clients) client.close();

      history.verify();
      // Faults in ZooKeeper never bring a lockstream server down.
      const crashes = servers.map((s) =>
        s.exitCode() === null
          ? null
          : `exited ${s.exitCode()}: ${s.stderr()}\nlast log lines:\n${s.logs
              .slice(-20)
              .map((line) => JSON.stringify(line))
              .join('\n')}`,
      );
      expect(crashes).toEqual([null, null]);
      expect(grants).toBeGreaterThanOrEqual(100);
      console.info(
        `ensemble: ${grants} grants, ${failures.length} calls failed during faults`,
        failures.slice(0, 5),
      );

      // Nothing is left queued or held under the lock.
      const store = await ZooKeeperStore.connect({
        connectString: ensemble.connectString,
        sessionTimeoutMs: 6_000,
        connectTimeoutMs: 10_000,
        logger: pino({ level: 'silent' }),
      });
      try {
        expect(await store.children(`${root}/locks/${encodeURIComponent(LOCK)}`)).toEqual([]);
      } finally {
        await store.close();
      }
    },
    scaled(120_000),
  );
});
