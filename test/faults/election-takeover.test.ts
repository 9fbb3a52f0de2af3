import { randomUUID } from 'node:crypto';
import type { CampaignResponse } from '../../src/gen/lockstream/v1/election.js';
import { describe, expect, inject, it } from 'vitest';
import { ElectionCaller } from '../support/election-caller.js';
import { faultFixture } from '../support/fault-fixture.js';
import { LockCaller, seconds } from '../support/lock-caller.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { scaled } from '../support/timing.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

/** The leader's heartbeats: its client takes a server silent for 3 of them as gone. */
const HEARTBEAT_S = 1;

const TOOK_OVER = 'took over the store session of another lockstream instance';

/** ZooKeeper's session timeout, asked by both instances (its default server allows 4 s and up). */
const SESSION_TIMEOUT_S = 6;

/*
 * Found by the elections partition run (test/jepsen/README.md "Elections"): when an instance is
 * paused (SIGSTOP, a long GC), a client of its with a resume grace resumes on another instance,
 * which takes the paused instance's ZooKeeper session over. The requests in that session without
 * a grace cannot be resumed, but their streams have not ended: the paused instance still has
 * them open and has told their clients nothing. Released at once (as they were), a leader without
 * a grace there was deposed, and the next candidate elected, within milliseconds, before it could
 * know: two leaders at once, against "a leader that is deposed hears it before any other candidate
 * is elected". The taker keeps them until their clients must have noticed: four heartbeat
 * intervals after the takeover (a client takes a server silent for three as gone), or, for a
 * stream without heartbeats, the session timeout, as long as ZooKeeper would have kept them had
 * nobody taken the session (StoreTakeovers#keepUnresumable).
 */
describe('requests without a grace on an instance paused and taken over by a resume', () => {
  const fixture = faultFixture();

  /** Two instances on one new root, the first to be paused, both asking for SESSION_TIMEOUT_S. */
  const pausableAndOther = async () => {
    const args = ['--zookeeper', connectString, '--root', `/takeover-${randomUUID()}`];
    args.push('--session-timeout', `${SESSION_TIMEOUT_S}s`);
    return { paused: await fixture.serve(args), other: await fixture.serve(args) };
  };

  it(
    'elects nobody else while its leader without a grace has been told nothing: only after the woken instance told it, four of its heartbeats after the takeover',
    async () => {
      const { paused, other } = await pausableAndOther();
      const [viaPaused, viaOther] = [paused, other].map((server) => {
        const caller = new ElectionCaller(server.address);
        fixture.later(() => caller.close());
        return caller;
      }) as [ElectionCaller, ElectionCaller];
      const name = `e-${randomUUID()}`;

      // The leader, on the instance to be paused, without a grace.
      const leader = viaPaused.campaign({ name, heartbeatInterval: seconds(HEARTBEAT_S) });
      await leader.elected();
      // Next in line, on the same instance, with a grace: its session can be resumed elsewhere.
      const next = viaPaused.campaign({
        name,
        resumeGrace: seconds(10),
        heartbeatInterval: seconds(HEARTBEAT_S),
      });
      const resumable = await next.next();
      if (resumable.$case !== 'resumable') throw new Error(`expected resumable, got ${resumable.$case}`);
      expect((await next.next()).$case).toBe('queued');

      process.kill(paused.pid, 'SIGSTOP');
      const pausedAt = performance.now();
      const leaderEnded = leader.outcome.then(() => performance.now() - pausedAt);
      let continued = false;
      fixture.later(() => {
        if (!continued) process.kill(paused.pid, 'SIGCONT');
      });
      // The next candidate's client notices the break and resumes on the other instance.
      next.cancel();
      const resumed = viaOther.client.campaign();
      resumed.on('error', () => {});
      const elected = new Promise<number>((resolve) =>
        resumed.on('data', (message: CampaignResponse) => {
          if (message.kind?.$case === 'elected') resolve(performance.now() - pausedAt);
        }),
      );
      fixture.later(() => resumed.cancel());
      resumed.write({
        kind: {
          $case: 'resume',
          value: { resumeToken: resumable.value.resumeToken, heartbeatInterval: undefined },
        },
      });
      // The other instance takes the paused one's ZooKeeper session over; woken right then, the
      // paused instance finds its session taken and ends the leader's stream. The next candidate
      // is elected only after that, four of the leader's heartbeats after the takeover (as long
      // as its client may take to notice a silent server), not at the takeover.
      await other.logged((line) => line['msg'] === TOOK_OVER);
      process.kill(paused.pid, 'SIGCONT');
      continued = true;
      const [endedAfterMs, electedAfterMs] = await Promise.all([leaderEnded, elected]);
      expect(
        endedAfterMs,
        `the next candidate was elected ${Math.round(electedAfterMs)} ms after the pause, before its leader was told`,
      ).toBeLessThan(electedAfterMs);
      expect(electedAfterMs).toBeGreaterThanOrEqual(4 * HEARTBEAT_S * 1_000);
      expect(electedAfterMs).toBeLessThan(SESSION_TIMEOUT_S * 1_000);
    },
    scaled(60_000),
  );
  it(
    'keeps a lock held without a grace or heartbeats for the session timeout: nobody else acquires it before its woken instance told its holder',
    async () => {
      const { paused, other } = await pausableAndOther();
      const [viaPaused, viaOther] = [paused, other].map((server) => {
        const caller = new LockCaller(server.address);
        fixture.later(() => caller.close());
        return caller;
      }) as [LockCaller, LockCaller];
      const name = `l-${randomUUID()}`;

      const holder = viaPaused.open({ name });
      await holder.acquired();
      const next = viaPaused.open({ name, resumeGrace: seconds(10) });
      const { token } = await next.resumable();
      await next.queued();

      process.kill(paused.pid, 'SIGSTOP');
      const pausedAt = performance.now();
      let continued = false;
      fixture.later(() => {
        if (!continued) process.kill(paused.pid, 'SIGCONT');
      });
      const holderEnded = holder.outcome.then(() => performance.now() - pausedAt);
      next.cancel();
      const resumed = viaOther.resume(token);
      fixture.later(() => resumed.cancel());
      const acquired = resumed.acquired().then(() => performance.now() - pausedAt);
      await other.logged((line) => line['msg'] === TOOK_OVER);
      process.kill(paused.pid, 'SIGCONT');
      continued = true;
      const [endedAfterMs, acquiredAfterMs] = await Promise.all([holderEnded, acquired]);
      expect(
        endedAfterMs,
        `acquired ${Math.round(acquiredAfterMs)} ms after the pause, before its holder was told`,
      ).toBeLessThan(acquiredAfterMs);
      expect(acquiredAfterMs).toBeGreaterThanOrEqual(SESSION_TIMEOUT_S * 1_000);
    },
    scaled(60_000),
  );
});
