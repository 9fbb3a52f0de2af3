import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { setTimeout as delay } from 'node:timers/promises';
import { describe, expect, inject, it } from 'vitest';
import { faultFixture } from '../support/fault-fixture.js';
import { seconds } from '../support/lock-caller.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import type { ServerProcess } from '../support/server-process.js';
import { SessionDriver } from '../support/session-driver.js';
import { scaled } from '../support/timing.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));
const SESSION_TIMEOUT_MS = 4_000;
/** Past half the session timeout (the instance then gives its ZooKeeper session up), short of all of it. */
const PAUSE_MS = 3_000;

/*
 * An instance is paused (SIGSTOP) past the point where it gives its ZooKeeper session up, and
 * meanwhile a client resumes one of its sessions on another instance, which takes the ZooKeeper
 * session over with its locks. The session's stream to the paused instance (one without
 * heartbeats, so its client noticed nothing) is still open when the instance wakes. Whatever
 * the woken instance notices first, the takeover or its own silence, it must not keep serving
 * that session on a new ZooKeeper session of its own: one resume token would name two live
 * sessions, the taker's with the old locks and the woken instance's with whatever it grants
 * next.
 */
describe('a lockstream instance woken after its ZooKeeper session was given up and taken over', () => {
  const fixture = faultFixture();
  const serve = (root: string): Promise<ServerProcess> =>
    fixture.serve([
      '--zookeeper',
      connectString,
      '--root',
      root,
      '--session-timeout',
      `${SESSION_TIMEOUT_MS}ms`,
      '--max-resume-grace',
      '60s',
    ]);
  const { caller } = fixture;

  it(
    'ends the session it still had a stream for, grants nothing on it, and the taker keeps the locks',
    async () => {
      const root = `/woken-instance-${randomUUID()}`;
      const [sleeper, taker] = [await serve(root), await serve(root)];
      const [sleeping, taking] = [caller(sleeper), caller(taker)];

      const stream = SessionDriver.open(sleeping.client, { resumeGrace: seconds(30) });
      const { token } = await stream.opened();
      stream.acquire(1, { name: 'job' });
      const held = await stream.acquired(1);

      process.kill(sleeper.pid, 'SIGSTOP');
      let resumed: SessionDriver | undefined;
      try {
        resumed = SessionDriver.resume(taking.client, token);
        await resumed.opened();
        await resumed.acquired(1);
        await delay(Math.max(0, PAUSE_MS));
      } finally {
        process.kill(sleeper.pid, 'SIGCONT');
      }
      expect(resumed.isAcquired(1)).toBe(true);

      // On the woken instance, the old stream asks for a lock nobody holds.
      stream.acquire(2, { name: 'other' });
      const outcome = await Promise.race([
        stream.outcome,
        delay(scaled(SESSION_TIMEOUT_MS * 3)).then(() => undefined),
      ]);
      expect(outcome, 'the woken instance kept serving the session').toBeDefined();
      console.info(
        `woken instance: its stream ended ${grpc.status[outcome!.code]} (${outcome!.details}), ` +
          `request ended: ${outcome!.requestEnded}`,
      );
      expect(stream.isAcquired(2), 'granted on the woken instance').toBe(false);
      expect(grpc.status[outcome!.code]).not.toBe('OK');

      // The taker still holds the lock for the session, with its token.
      const rival = await taking.open({ name: 'job', waitTimeout: seconds(0) }).outcome;
      expect(grpc.status[rival.code]).toBe('DEADLINE_EXCEEDED');
      expect((await taking.describe('job')).holders.map((h) => h.fencingToken)).toEqual([held]);
      resumed.halfClose();
      await resumed.outcome;
    },
    scaled(60_000),
  );
});
