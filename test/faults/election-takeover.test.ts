import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { CampaignResponse } from '../../src/gen/lockstream/v1/election.js';
import { describe, expect, inject, it } from 'vitest';
import { ElectionCaller } from '../support/election-caller.js';
import { faultFixture } from '../support/fault-fixture.js';
import { seconds } from '../support/lock-caller.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { scaled } from '../support/timing.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

/** The leader's heartbeats: its client takes a server silent for 3 of them as gone. */
const HEARTBEAT_S = 1;

/*
 * KNOWN BUG (found by the elections partition run, test/jepsen/README.md "Elections"): when an
 * instance is paused (SIGSTOP, a long GC), a client of its with a resume grace resumes on another
 * instance, which takes the paused instance's ZooKeeper session over, and releases at once every
 * request of that session that had no grace (LockSessions#adopt: "their streams ended with their
 * instance"). They did not: the paused instance still has their streams open and has told them
 * nothing. So a leader without a grace on the paused instance is deposed, and the next candidate
 * elected, within milliseconds of the resume, before the leader can know (its stream is only
 * silent; it notices after its heartbeat silence, about a heartbeat interval or more later):
 * two leaders at once, against "a leader that is deposed hears it before any other candidate is
 * elected". The same holds for a lock held without a grace. This test asserts the promise and is
 * marked `fails` while the bug stands: once the server keeps such requests until their clients
 * must have noticed (e.g. the session timeout after the takeover, as if nobody had taken the
 * session: ZooKeeper would have expired it then), it passes, and `.fails` must go.
 */
describe('an election on an instance paused and taken over by a resume', () => {
  const fixture = faultFixture();

  it.fails(
    'does not elect anyone else while its leader without a grace has been told nothing (KNOWN BUG: the takeover releases it at once)',
    async () => {
      const root = `/election-takeover-${randomUUID()}`;
      const paused = await fixture.serve(['--zookeeper', connectString, '--root', root]);
      const other = await fixture.serve(['--zookeeper', connectString, '--root', root]);
      const viaPaused = new ElectionCaller(paused.address);
      const viaOther = new ElectionCaller(other.address);
      fixture.later(() => viaPaused.close());
      fixture.later(() => viaOther.close());
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
      const heardBefore = leader.messages.all.length;

      process.kill(paused.pid, 'SIGSTOP');
      const pausedAt = performance.now();
      fixture.later(() => {
        process.kill(paused.pid, 'SIGCONT');
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
          value: { resumeToken: resumable.value.resumeToken, heartbeatInterval: seconds(HEARTBEAT_S) },
        },
      });
      // Less than the leader's client needs to take its silent server as gone (3 heartbeats).
      const electedAfterMs = await Promise.race([elected, delay(2_000 * HEARTBEAT_S).then(() => undefined)]);
      const told = leader.messages.all.slice(heardBefore).map((message) => message.kind?.$case);
      expect(
        electedAfterMs,
        `the next candidate was elected ${Math.round(electedAfterMs ?? 0)} ms after the leader's instance paused, ` +
          `while the leader had been told ${JSON.stringify(told)} and its stream was still open`,
      ).toBeUndefined();
    },
    scaled(60_000),
  );
});
