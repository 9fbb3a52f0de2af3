import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { fakeClock, hasLibfaketime, type FakeClock } from '../support/fake-clock.js';
import { LockCaller, type RequestStream } from '../support/lock-caller.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { scaled } from '../support/timing.js';

/*
 * A server's wall clock steps an hour (an operator's `date -s`, a VM restored, NTP stepping
 * after a long suspend) while it serves: nothing lockstream answers may move with it. The server
 * runs in its own process under libfaketime (see fake-clock.ts), which steps Date.now() and
 * leaves the monotonic clock and timers alone. The test process's own clocks are real, and it
 * measures with performance.now().
 */

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

if (!hasLibfaketime()) throw new Error('no libfaketime for clock tests: run scripts/install-test-deps.sh');

/** A revocation's deadline (force_after): a few seconds, so a step's effect before it shows. */
const DEADLINE_MS = 3_000;
/** A waiter's wait_timeout. */
const WAIT_MS = 2_000;
/**
 * How late a deadline may come: the holder's server sees the revocation a few ms after the
 * call, forces at its deadline, and the status crosses the loopback; generous for a busy CI box.
 */
const LATE_MS = 1_500;
const HOUR_MS = 3_600_000;

/** Resolves with when (performance.now()) the stream's final status arrived, and the status. */
async function endOf(stream: RequestStream): Promise<{ at: number; code: status; details: string }> {
  const outcome = await stream.outcome;
  return { at: performance.now(), code: outcome.code, details: outcome.details };
}

for (const store of ['embedded', 'zookeeper'] as const) {
  describe(`a server whose wall clock steps an hour, on the ${store} store`, () => {
    let clock: FakeClock;
    let server: ServerProcess;
    let caller: LockCaller;

    beforeAll(async () => {
      clock = await fakeClock();
      server = await startServerProcess(
        store === 'embedded' ? [] : ['--zookeeper', connectString, '--root', `/clock-steps-${randomUUID()}`],
        clock.env,
      );
      caller = new LockCaller(server.address);
    });
    afterAll(async () => {
      caller?.close();
      await server?.kill('SIGTERM');
      await clock?.close();
    });
    beforeEach(async () => {
      await clock.step('+0');
    });

    /** The server's wall clock, as its log's `time` shows it, when it logged `msg`. */
    const loggedAt = async (lock: string, msg: string, token?: bigint): Promise<number> => {
      const line = await server.logged(
        (l) => l['lock'] === lock && l['msg'] === msg && (token === undefined || l['token'] === `${token}`),
      );
      return Number(line['time']);
    };

    for (const step of ['+1h', '-1h'] as const) {
      it(`${step} during a revocation with a deadline: CheckToken says held until the holder is forced, on time, and not held after`, async () => {
        const name = `revoked/${randomUUID()}`;
        const holder = caller.open({ name, owner: 'holder' });
        let waiter: RequestStream | undefined;
        try {
          // The waiter asks once the holder holds: asked together, either may be granted first.
          const token = await holder.acquired();
          waiter = caller.open({ name, owner: 'waiter' });
          await waiter.queued();
          const holderEnd = endOf(holder);

          const askedAt = performance.now();
          expect(await caller.revoke(name, 'maintenance', DEADLINE_MS / 1000)).toBe(1);
          await holder.receipt('revokeRequested');
          const revokedAt = await loggedAt(name, 'revocation requested');
          await clock.step(step);

          // Until the deadline the holder was told, every answer is "held"; the holder's end
          // (ABORTED) comes at that deadline, measured by the test's own clock. The deadline
          // counts from when the server saw the revocation, after askedAt: an answer received
          // before askedAt + DEADLINE_MS was given before it (one sent just before may not be).
          const notHeld: number[] = [];
          let ended = false;
          void holderEnd.then(() => (ended = true));
          while (!ended) {
            const held = await caller.checkToken(name, token);
            const answeredAt = performance.now();
            if (!held && answeredAt < askedAt + DEADLINE_MS) notHeld.push(Math.round(answeredAt - askedAt));
            await delay(50);
          }
          expect(notHeld, 'CheckToken answered "not held" before the deadline, at these ms').toEqual([]);

          const end = await holderEnd;
          expect(end).toMatchObject({
            code: status.ABORTED,
            details: expect.stringMatching(/was revoked and not released in time: maintenance/),
          });
          expect(end.at - askedAt).toBeGreaterThanOrEqual(DEADLINE_MS);
          expect(end.at - askedAt).toBeLessThan(DEADLINE_MS + LATE_MS);

          const nextToken = await waiter.acquired();
          expect(nextToken).toBeGreaterThan(token);
          expect(await caller.checkToken(name, token)).toBe(false);
          expect(await caller.checkToken(name, nextToken)).toBe(true);
          // The step did reach the server: its log shows the hour.
          const grantedAt = await loggedAt(name, 'granted', nextToken);
          expect(Math.abs(grantedAt - revokedAt - (step === '+1h' ? HOUR_MS : -HOUR_MS))).toBeLessThan(
            DEADLINE_MS + LATE_MS,
          );
          expect((await waiter.release()).code).toBe(status.OK);
        } finally {
          holder.cancel();
          waiter?.cancel();
          await Promise.all([holder.outcome, waiter?.outcome]);
        }
      });

      it(`${step} while a request waits: its wait_timeout ends it on time`, async () => {
        const name = `waited/${randomUUID()}`;
        const holder = caller.open({ name, owner: 'holder' });
        let waiter: RequestStream | undefined;
        try {
          await holder.acquired();
          // The wait_timeout counts from when the server reads `start`, after this; the waiter
          // asks once the holder holds (asked together, either may be granted first).
          const askedAt = performance.now();
          waiter = caller.open({
            name,
            owner: 'waiter',
            waitTimeout: { seconds: BigInt(WAIT_MS / 1000), nanos: 0 },
          });
          await waiter.queued();
          await clock.step(step);
          const end = await endOf(waiter);
          expect(end.code).toBe(status.DEADLINE_EXCEEDED);
          // A timer may fire a millisecond early by performance.now().
          expect(end.at - askedAt).toBeGreaterThanOrEqual(WAIT_MS - 5);
          expect(end.at - askedAt).toBeLessThan(WAIT_MS + LATE_MS);
          expect((await holder.release()).code).toBe(status.OK);
        } finally {
          holder.cancel();
          waiter?.cancel();
          await Promise.all([holder.outcome, waiter?.outcome]);
        }
      });
    }
  });
}

/*
 * Skew between instances: two lockstream instances on one ZooKeeper, one of them under
 * libfaketime. They failed before the deadlines were kept by the monotonic clock (the holder's
 * instance +1h forced the holder at once; -1h left it to the revoker's backstop at 5 s; a wait
 * carried to a clock an hour behind lasted the hour). The holder and the waiter are on
 * different instances: the waiter asks only once the holder holds, or either may win the lock
 * (the instance under libfaketime is the slower to start a request).
 */
describe('two instances on one ZooKeeper whose wall clocks differ by an hour', () => {
  let clock: FakeClock;
  /** Where RevokeLock and CheckToken are asked: the real clock. */
  let asker: ServerProcess;
  /** Where the holder is served: the real clock stepped by `clock`. */
  let holding: ServerProcess;
  let askerCaller: LockCaller;
  let holdingCaller: LockCaller;

  beforeAll(async () => {
    const root = `/clock-skew-${randomUUID()}`;
    clock = await fakeClock();
    asker = await startServerProcess(['--zookeeper', connectString, '--root', root]);
    holding = await startServerProcess(['--zookeeper', connectString, '--root', root], clock.env);
    askerCaller = new LockCaller(asker.address);
    holdingCaller = new LockCaller(holding.address);
  });
  afterAll(async () => {
    askerCaller?.close();
    holdingCaller?.close();
    await Promise.all([asker?.kill('SIGTERM'), holding?.kill('SIGTERM')]);
    await clock?.close();
  });

  for (const skew of ['+1h', '-1h'] as const) {
    it(`the holder's instance ${skew}: a deadline set on the other is kept to the second by the holder's instance, and CheckToken says held until then on both`, async () => {
      await clock.step(skew);
      const name = `skewed/${randomUUID()}`;
      const holder = holdingCaller.open({ name, owner: 'holder' });
      let waiter: RequestStream | undefined;
      try {
        const token = await holder.acquired();
        waiter = askerCaller.open({ name, owner: 'waiter' });
        await waiter.queued();
        const holderEnd = endOf(holder);

        const askedAt = performance.now();
        expect(await askerCaller.revoke(name, 'maintenance', DEADLINE_MS / 1000)).toBe(1);
        await holder.receipt('revokeRequested');

        // Answers received before askedAt + DEADLINE_MS were given before the deadline.
        const notHeld: string[] = [];
        let ended = false;
        void holderEnd.then(() => (ended = true));
        while (!ended) {
          const [onAsker, onHolding] = await Promise.all([
            askerCaller.checkToken(name, token),
            holdingCaller.checkToken(name, token),
          ]);
          const answeredAt = performance.now();
          if (answeredAt < askedAt + DEADLINE_MS && !(onAsker && onHolding)) {
            notHeld.push(
              `${Math.round(answeredAt - askedAt)} ms: ${onAsker ? '' : 'asker '}${onHolding ? '' : 'holding'}`,
            );
          }
          await delay(50);
        }
        expect(notHeld, 'CheckToken answered "not held" before the deadline').toEqual([]);

        const end = await holderEnd;
        expect(end.code).toBe(status.ABORTED);
        expect(end.at - askedAt).toBeGreaterThanOrEqual(DEADLINE_MS);
        expect(end.at - askedAt).toBeLessThan(DEADLINE_MS + LATE_MS);
        const nextToken = await waiter.acquired();
        // Nobody was granted the lock before the holder was told it lost it: as the servers
        // logged it (the holding instance's wall clock less its skew, which libfaketime keeps
        // exact). The test's own receipts, over two connections a few ms apart, may come in
        // either order on a busy machine.
        const told = await holding.logged(
          (l) => l['lock'] === name && l['msg'] === 'ended' && l['status'] === 'ABORTED',
        );
        const granted = await asker.logged(
          (l) => l['lock'] === name && l['msg'] === 'granted' && l['token'] === `${nextToken}`,
        );
        const skewMs = skew === '+1h' ? HOUR_MS : -HOUR_MS;
        expect(Number(granted['time'])).toBeGreaterThanOrEqual(Number(told['time']) - skewMs);
        expect(await askerCaller.checkToken(name, token)).toBe(false);
        expect(await holdingCaller.checkToken(name, nextToken)).toBe(true);
        expect((await waiter.release()).code).toBe(status.OK);
      } finally {
        holder.cancel();
        waiter?.cancel();
        await Promise.all([holder.outcome, waiter?.outcome]);
      }
    });
  }
});

/*
 * A resumable request's wait moves with its session to the instance the client resumes on
 * (SessionAdoption), which knows when the wait ends only by the wall clock of the instance that
 * began it (no monotonic clock is shared): a clock behind must not stretch it by an hour.
 */
describe('a wait carried to an instance whose wall clock is an hour behind', () => {
  let clock: FakeClock;

  beforeAll(async () => {
    clock = await fakeClock('-1h');
  });
  afterAll(async () => {
    await clock?.close();
  });

  it(
    'ends no later than its whole wait_timeout after the takeover',
    async () => {
      const root = `/clock-takeover-${randomUUID()}`;
      const args = ['--zookeeper', connectString, '--root', root];
      const origin = await startServerProcess(args);
      const behind = await startServerProcess(args, clock.env);
      const originCaller = new LockCaller(origin.address);
      const behindCaller = new LockCaller(behind.address);
      const name = `carried/${randomUUID()}`;
      const holder = behindCaller.open({ name, owner: 'holder' });
      let resumed: RequestStream | undefined;
      try {
        // The waiter asks once the holder holds: asked together, either may win the lock.
        await holder.acquired();
        const waiter = originCaller.open({
          name,
          owner: 'waiter',
          waitTimeout: { seconds: BigInt(WAIT_MS / 1000), nanos: 0 },
          resumeGrace: { seconds: 30n, nanos: 0 },
        });
        const { token } = await waiter.resumable();
        await waiter.queued();
        await origin.kill('SIGKILL');
        const resumedAt = performance.now();
        resumed = behindCaller.resume(token);
        await resumed.queued();
        const end = await Promise.race([
          endOf(resumed),
          delay(scaled(WAIT_MS + LATE_MS + 1_000)).then(() => undefined),
        ]);
        expect(end, 'still waiting long after its wait_timeout').toBeDefined();
        expect(end!.code).toBe(status.DEADLINE_EXCEEDED);
        expect(end!.at - resumedAt).toBeLessThan(WAIT_MS + LATE_MS);
        expect((await holder.release()).code).toBe(status.OK);
      } finally {
        holder.cancel();
        resumed?.cancel();
        await Promise.all([holder.outcome, resumed?.outcome]);
        originCaller.close();
        behindCaller.close();
        // SIGKILL: a stopping instance would wait for another to take its sessions over.
        await Promise.all([origin.kill('SIGKILL'), behind.kill('SIGKILL')]);
      }
    },
    scaled(60_000),
  );
});
