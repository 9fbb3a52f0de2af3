import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { EnsembleMember } from '../setup/zookeeper-ensemble.js';
import { check, type NemesisEvent, type Verdict } from '../jepsen/checker-run.js';
import { Recorder, type HistoryEvent } from '../jepsen/client/recorder.js';
import { TestNetwork, type Host } from '../jepsen/net/test-network.js';
import { startNetworkedEnsemble } from '../jepsen/net/zookeeper-hosts.js';
import type { ServerProcess } from '../support/server-process.js';
import { serveOnHost } from '../jepsen/net/lockstream-hosts.js';
import { scaled } from '../support/timing.js';

/** A follower goes on answering reads for syncLimit × tickTime after losing its leader: 4 s. */
const TICK_MS = 500;
const SYNC_LIMIT_TICKS = 8;
const SESSION_TIMEOUT_MS = 4_000;
const REPORTS = path.resolve('.tmp/faults/follower-partition');

/**
 * Every process on a test host of its own (a network namespace): a three-member ZooKeeper
 * ensemble, lockstream instance A whose only ZooKeeper member is a follower, instance B on the
 * other two, and a client of each. A's client holds a lock, B's waits for it; then the follower
 * is cut off from the other two members. The follower goes on answering A's reads for
 * syncLimit × tickTime while the leader, on the majority side, expires A's session and B is
 * granted the lock. A's holder must have been told it no longer holds the lock (in doubt, then
 * lost) before that grant: the history, recorded by the clients on their own clocks, is judged
 * by the independent checker (test/jepsen/checker).
 */
describe('a lockstream instance whose ZooKeeper follower is cut off from its leader', () => {
  const cleanups: Array<() => Promise<unknown> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /**
   * The scenario, with `plant` planted in instance A (see src/server/planted-bugs.ts); returns
   * what the clients recorded, when, and the checker's verdict.
   */
  async function cutFollower(plant?: 'follower-reads'): Promise<{
    holder: Recorder;
    next: HistoryEvent;
    lost: HistoryEvent;
    doubted: HistoryEvent | undefined;
    verdict: Verdict;
  }> {
    const network = await TestNetwork.create();
    cleanups.push(() => network.destroy());
    const { ensemble, hosts: zkHosts } = await startNetworkedEnsemble(network, {
      tickTimeMs: TICK_MS,
      syncLimitTicks: SYNC_LIMIT_TICKS,
    });
    cleanups.push(() => ensemble.stop());
    const leader = await ensemble.leader();
    const hostOf = (member: EnsembleMember): Host => zkHosts[member.id - 1]!;
    const follower = ensemble.members.find((member) => member !== leader)!;
    const majority = ensemble.members.filter((member) => member !== follower);

    const root = `/follower-partition-${randomUUID()}`;
    const serve = async (
      name: string,
      members: readonly EnsembleMember[],
      env: Record<string, string>,
    ): Promise<ServerProcess> => {
      const host = await network.addHost(name);
      const server = await serveOnHost(network, host, {
        members,
        sessionTimeoutMs: SESSION_TIMEOUT_MS,
        root,
        env,
      });
      cleanups.push(() => server.kill('SIGKILL'));
      return server;
    };
    const [a, b] = await Promise.all([
      serve('a', [follower], plant ? { LOCKSTREAM_PLANTED_BUG: plant } : {}),
      serve('b', majority, {}),
    ]);
    const [clientHostA, clientHostB] = [await network.addHost('client-a'), await network.addHost('client-b')];

    const holder = Recorder.start(network, clientHostA, {
      client: 'holder@A',
      servers: [a.address],
      locks: ['job'],
      count: 1,
      holdMs: '120000',
    });
    cleanups.push(() => holder.stop());
    const granted = await holder.event((e) => e.f === 'acquire' && e.type !== 'invoke');
    expect(granted.type).toBe('ok');
    const waiter = Recorder.start(network, clientHostB, {
      client: 'waiter@B',
      servers: [b.address],
      locks: ['job'],
      count: 1,
      holdMs: '200',
      waitTimeoutMs: 60_000,
    });
    cleanups.push(() => waiter.stop());
    await waiter.queued('job');

    const nemesis: NemesisEvent[] = [];
    const cutAt = Number(process.hrtime.bigint());
    await network.cut([hostOf(follower)], majority.map(hostOf));
    nemesis.push({
      t: cutAt,
      type: 'start',
      nemesis: 'partition-follower',
      detail: `zk${follower.id} (instance A's only member) cut from zk${majority.map((m) => m.id).join(', zk')}`,
    });

    const next = await waiter.event((e) => e.f === 'acquire' && e.type !== 'invoke', 60_000);
    const lost = await holder.event((e) => e.f === 'lost', 60_000);
    await waiter.finished();
    nemesis.push({ t: Number(process.hrtime.bigint()), type: 'stop', nemesis: 'partition-follower' });
    await network.healAll();
    await holder.stop();

    const doubted = holder.history.find((e) => e.f === 'in_doubt');
    const ms = (event: HistoryEvent | undefined): number =>
      event === undefined ? NaN : Math.round((event.t - cutAt) / 1e6);
    console.info(
      `follower partition${plant ? ` (planted: ${plant})` : ''}: holder@A in doubt after ${ms(doubted)} ms, ` +
        `told lost after ${ms(lost)} ms (${lost.error}); waiter@B granted after ${ms(next)} ms ` +
        `(session timeout ${SESSION_TIMEOUT_MS} ms, syncLimit × tickTime ${SYNC_LIMIT_TICKS * TICK_MS} ms)`,
    );
    const verdict = await check(
      path.join(REPORTS, plant ?? 'fixed'),
      [...holder.history, ...waiter.history],
      nemesis,
    );
    console.info(verdict.stdout.trim().split('\n').slice(-3).join('\n'), `\nreport: ${verdict.report}`);
    return { holder, next, lost, doubted, verdict };
  }

  it(
    'tells its holder it is in doubt and has lost the lock before another instance grants it',
    async () => {
      const { next, lost, doubted, verdict } = await cutFollower();
      expect(next.type).toBe('ok');
      // The strict loss rule, directly: A's holder was told before B was granted.
      expect(doubted).toBeDefined();
      expect(doubted!.t).toBeLessThan(next.t);
      expect(lost.t).toBeLessThan(next.t);
      expect(verdict.exitCode, verdict.stdout).toBe(0);
      expect(verdict.anomalies).toBe(0);
      expect(verdict.operations).toBeGreaterThanOrEqual(5);
    },
    scaled(180_000),
  );

  // The checker must catch the defect this test was written for, planted back in.
  it(
    'with follower reads counted as word from the leader (a planted bug), two hold the lock at once, and the checker says so',
    async () => {
      const { next, lost, verdict } = await cutFollower('follower-reads');
      expect(next.type).toBe('ok');
      expect(lost.t).toBeGreaterThan(next.t);
      expect(verdict.exitCode, verdict.stdout).toBe(1);
      expect(verdict.anomalies).toBeGreaterThan(0);
    },
    scaled(180_000),
  );
});
