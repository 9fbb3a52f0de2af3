import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { Recorder } from '../jepsen/client/recorder.js';
import { TestNetwork } from '../jepsen/net/test-network.js';
import { startNetworkedEnsemble } from '../jepsen/net/zookeeper-hosts.js';
import { serveOnHost } from '../jepsen/net/lockstream-hosts.js';
import { scaled } from '../support/timing.js';

const SESSION_TIMEOUT_MS = 4_000;

/**
 * A lockstream instance that knows every member of a healthy three-member ensemble loses its
 * link to the one member its session is on (each process on a test host of its own; the link is
 * cut with iptables, so packets vanish and nothing is closed). The ensemble is healthy, so
 * nothing needs to be lost: the instance must move its session to a member it can reach before
 * it would give the session up (half a session timeout after the leader last heard it).
 */
describe('a lockstream instance cut off from the ZooKeeper member its session is on', () => {
  const cleanups: Array<() => Promise<unknown> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it(
    'moves the session to another member and keeps its locks',
    async () => {
      const network = await TestNetwork.create();
      cleanups.push(() => network.destroy());
      const { ensemble, hosts: zkHosts } = await startNetworkedEnsemble(network, { tickTimeMs: 500 });
      cleanups.push(() => ensemble.stop());
      const host = await network.addHost('a');
      const server = await serveOnHost(network, host, {
        members: ensemble.members,
        sessionTimeoutMs: SESSION_TIMEOUT_MS,
        root: `/member-cut-${randomUUID()}`,
      });
      cleanups.push(() => server.kill('SIGKILL'));
      const holder = Recorder.start(network, await network.addHost('client'), {
        client: 'holder',
        servers: [server.address],
        locks: ['job'],
        count: 1,
        holdMs: '120000',
      });
      cleanups.push(() => holder.stop());
      expect((await holder.event((e) => e.f === 'acquire' && e.type !== 'invoke')).type).toBe('ok');

      // The instance's is the only session in the ensemble: the member with one is its member.
      const connected = await Promise.all(ensemble.members.map((member) => member.sessionsConnected()));
      const index = connected.findIndex((sessions) => sessions > 0);
      expect(index).toBeGreaterThanOrEqual(0);
      const cutAt = Number(process.hrtime.bigint());
      await network.cut([host], [zkHosts[index]!]);

      // Whichever comes first: the lock is confirmed again after a doubt, or it is lost.
      const outcome = await holder.event((e) => e.f === 'lost' || e.f === 'confirmed', 30_000);
      const reconnected = server.logs.find(
        (line) => line['msg'] === 'reconnected to ZooKeeper; session kept',
      );
      const doubted = holder.history.find((e) => e.f === 'in_doubt');
      const ms = (t: number | undefined): number => (t === undefined ? NaN : Math.round((t - cutAt) / 1e6));
      console.info(
        `member cut: in doubt after ${ms(doubted?.t)} ms, then ${outcome.f} after ${ms(outcome.t)} ms ` +
          `(${outcome.error ?? 'session kept'}); session timeout ${SESSION_TIMEOUT_MS} ms`,
      );
      expect(outcome.f, outcome.error).toBe('confirmed');
      expect(reconnected).toBeDefined();

      await holder.stop();
      expect(holder.history.filter((e) => e.f === 'lost')).toEqual([]);
      expect(holder.history.filter((e) => e.f === 'release').map((e) => e.type)).toEqual(['invoke', 'ok']);
    },
    scaled(120_000),
  );
});
