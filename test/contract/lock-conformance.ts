import { status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/server/config.js';
import { startServer } from '../../src/server/main.js';
import {
  type LockRpc,
  type LockCaller,
  LockMode,
  type RequestStream,
  seconds,
} from '../support/lock-caller.js';
import { spawnLockHolder } from '../support/lock-holder-process.js';
import { healthOf, untilHealth } from '../support/health.js';
import { type BackendUnderTest, testLogger, useConformanceServer } from './conformance-server.js';
import { describeSessionConformance } from './session-conformance.js';
import { describeValueConformance } from './value-conformance.js';
import { describeDowngradeConformance } from './downgrade-conformance.js';
import { describeSemaphoreConformance } from './semaphore-conformance.js';
import { describeMultiLockConformance } from './multi-lock-conformance.js';

/**
 * Lock behaviour through gRPC, written once and run against every back end. A back end that
 * fails a case has a bug. Each test gets its own server and root path, and must leave no lock
 * node behind.
 */
export function describeLockConformance(backendName: string, backend: BackendUnderTest): void {
  for (const rpc of ['acquire', 'session'] as const) describeOver(backendName, backend, rpc);
  describeSessionConformance(backendName, backend);
  describeValueConformance(backendName, backend);
  describeDowngradeConformance(backendName, backend);
  describeSemaphoreConformance(backendName, backend);
  describeMultiLockConformance(backendName, backend);
}

/**
 * What differs between the RPCs in their answers to protocol mistakes; everything else is the
 * same promise, checked by the same case. Over Session, each request is the only one of its
 * own session (see SessionRequestStream); test/contract/session-conformance.ts covers many
 * requests on one session.
 */
const PROTOCOL: Record<LockRpc, { firstMessage: RegExp; startTwice: RegExp }> = {
  acquire: { firstMessage: /first message must be `start`/, startTwice: /only once/ },
  session: { firstMessage: /first message must be `open` or `resume`/, startTwice: /request_id 1 is in use/ },
};

function describeOver(backendName: string, backend: BackendUnderTest, rpc: LockRpc): void {
  describe(`lock conformance on the ${backendName} back end, over ${rpc === 'acquire' ? 'Acquire' : 'Session'}`, () => {
    const { ctx, open, track } = useConformanceServer(backend, rpc);

    it('grants a free mutex with a token and releases it on half-close with `released` and OK', async () => {
      const holder = open({ name: 'jobs/nightly' });
      const token = await holder.acquired();
      expect(token).toBeGreaterThan(0n);
      const outcome = await holder.release();
      expect(outcome.code).toBe(status.OK);
      expect(holder.messages.map((m) => m.kind?.$case)).toEqual(['acquired', 'released']);
    });

    it('releases on an explicit `release` message', async () => {
      const holder = open({ name: 'r' });
      await holder.acquired();
      holder.sendRelease();
      expect((await holder.outcome).code).toBe(status.OK);
      expect(holder.messages.at(-1)?.kind?.$case).toBe('released');
      const next = open({ name: 'r', waitTimeout: seconds(0) });
      await next.acquired();
      await next.release();
    });

    it('never lets two mutex holders overlap: 20 clients x 10 acquisitions on one lock', async () => {
      const history: Array<{ client: number; event: 'enter' | 'exit'; token: bigint }> = [];
      let inside = 0;
      let maxInside = 0;
      const client = async (id: number): Promise<void> => {
        for (let round = 0; round < 10; round += 1) {
          const stream = open({ name: 'counter', owner: `client-${id}` });
          const token = await stream.acquired();
          inside += 1;
          maxInside = Math.max(maxInside, inside);
          history.push({ client: id, event: 'enter', token });
          await new Promise((resolve) => setImmediate(resolve));
          history.push({ client: id, event: 'exit', token });
          inside -= 1;
          expect((await stream.release()).code).toBe(status.OK);
        }
      };
      await Promise.all(Array.from({ length: 20 }, (_, id) => client(id)));
      expect(maxInside).toBe(1);
      expect(history).toHaveLength(400);
      // The history alternates enter/exit of the same holder, and tokens grow with every grant.
      const grants = history.filter((h) => h.event === 'enter');
      for (let i = 0; i < history.length; i += 2) {
        expect(history[i + 1]).toMatchObject({ client: history[i]!.client, event: 'exit' });
      }
      for (let i = 1; i < grants.length; i += 1) {
        expect(grants[i]!.token).toBeGreaterThan(grants[i - 1]!.token);
      }
    });

    it('grants waiters in the order they queued (FIFO)', async () => {
      const holder = open({ name: 'fifo' });
      await holder.acquired();
      const waiters: RequestStream[] = [];
      for (let i = 0; i < 6; i += 1) {
        const waiter = open({ name: 'fifo', owner: `w${i}` });
        expect(await waiter.queued()).toBe(i + 1);
        waiters.push(waiter);
      }
      const order: number[] = [];
      await holder.release();
      for (const [i, waiter] of waiters.entries()) {
        await waiter.acquired();
        order.push(i);
        // Nobody behind is holding while this one does.
        expect(waiters.slice(i + 1).some((w) => w.isAcquired)).toBe(false);
        await waiter.release();
      }
      expect(order).toEqual([0, 1, 2, 3, 4, 5]);
    });

    it('holds a request that leaves mode unset as a MUTEX: a WRITE and a READ wait for it, and it for a READ', async () => {
      const unset = open({ name: 'no-mode', mode: LockMode.UNSPECIFIED });
      await unset.acquired();
      const writer = open({ name: 'no-mode', mode: LockMode.WRITE });
      expect(await writer.queued()).toBe(1);
      const reader = open({ name: 'no-mode', mode: LockMode.READ });
      expect(await reader.queued()).toBe(2);
      await unset.release();
      await writer.acquired();
      await writer.release();
      await reader.acquired();
      const second = open({ name: 'no-mode', mode: LockMode.UNSPECIFIED });
      expect(await second.queued()).toBe(1);
      await reader.release();
      await second.acquired();
      await second.release();
    });

    it('lets readers share, makes a writer wait for them, and queues later readers behind the writer', async () => {
      const r1 = open({ name: 'doc', mode: LockMode.READ });
      const r2 = open({ name: 'doc', mode: LockMode.READ });
      await Promise.all([r1.acquired(), r2.acquired()]);
      const writer = open({ name: 'doc', mode: LockMode.WRITE });
      expect(await writer.queued()).toBe(2);
      const r3 = open({ name: 'doc', mode: LockMode.READ });
      expect(await r3.queued()).toBe(3);

      await r1.release();
      expect(writer.isAcquired).toBe(false);
      await r2.release();
      const writeToken = await writer.acquired();
      expect(r3.isAcquired).toBe(false);
      await writer.release();
      expect(await r3.acquired()).toBeGreaterThan(writeToken);
      await r3.release();
    });

    it('makes MUTEX and WRITE exclude each other on the same name, and READ wait for both', async () => {
      const mutex = open({ name: 'shared-name', mode: LockMode.MUTEX });
      await mutex.acquired();
      const writer = open({ name: 'shared-name', mode: LockMode.WRITE });
      expect(await writer.queued()).toBe(1);
      const reader = open({ name: 'shared-name', mode: LockMode.READ });
      expect(await reader.queued()).toBe(2);
      await mutex.release();
      await writer.acquired();
      expect(reader.isAcquired).toBe(false);
      await writer.release();
      await reader.acquired();
      await reader.release();
    });

    it('removes a cancelled waiter from the middle of the queue without blocking those behind it', async () => {
      const holder = open({ name: 'q' });
      await holder.acquired();
      const middle = open({ name: 'q' });
      await middle.queued();
      const last = open({ name: 'q' });
      expect(await last.queued()).toBe(2);
      middle.cancel();
      expect((await middle.outcome).code).toBe(status.CANCELLED);
      await holder.release();
      await last.acquired();
      await last.release();
    });

    it('releases the lock when the holder cancels its call', async () => {
      const holder = open({ name: 'c' });
      const token = await holder.acquired();
      const next = open({ name: 'c' });
      expect(await next.queued()).toBe(1);
      holder.cancel();
      expect((await holder.outcome).code).toBe(status.CANCELLED);
      expect(await next.acquired()).toBeGreaterThan(token);
      expect(holder.messages.map((m) => m.kind?.$case)).toEqual(['acquired']);
      expect(await ctx.caller.checkToken('c', token)).toBe(false);
      expect((await next.release()).code).toBe(status.OK);
    });

    it('withdraws a waiter that half-closes before the grant, with CANCELLED', async () => {
      const holder = open({ name: 'h' });
      await holder.acquired();
      const waiter = open({ name: 'h' });
      await waiter.queued();
      waiter.halfClose();
      const outcome = await waiter.outcome;
      expect(outcome.code).toBe(status.CANCELLED);
      expect(outcome.details).toContain('"h"');
      await holder.release();
    });

    it('releases the lock of a client process that is killed', async () => {
      const holder = await spawnLockHolder(ctx.address, 'killed-holder', rpc);
      const waiter = open({ name: 'killed-holder' });
      expect(await waiter.queued()).toBe(1);
      await holder.kill('SIGKILL');
      expect(await waiter.acquired()).toBeGreaterThan(holder.token);
      await waiter.release();
    });

    it('try-lock (wait_timeout 0) acquires a free lock and fails at once on a held one, leaving nothing queued', async () => {
      const first = open({ name: 'try', waitTimeout: seconds(0) });
      await first.acquired();
      const second = open({ name: 'try', waitTimeout: seconds(0) });
      const outcome = await second.outcome;
      expect(outcome.code).toBe(status.DEADLINE_EXCEEDED);
      expect(outcome.details).toContain('"try"');
      expect(second.messages).toEqual([]);
      await first.release();
    });

    it('try-lock does not jump the queue: a reader fails while a writer waits ahead, though readers hold', async () => {
      const reader = open({ name: 'tq', mode: LockMode.READ });
      await reader.acquired();
      const writer = open({ name: 'tq', mode: LockMode.WRITE });
      await writer.queued();
      const tryReader = open({ name: 'tq', mode: LockMode.READ, waitTimeout: seconds(0) });
      expect((await tryReader.outcome).code).toBe(status.DEADLINE_EXCEEDED);
      await reader.release();
      await writer.acquired();
      await writer.release();
    });

    it('ends a wait with DEADLINE_EXCEEDED once wait_timeout passes, and removes the waiter', async () => {
      const holder = open({ name: 't' });
      await holder.acquired();
      const impatient = open({ name: 't', waitTimeout: seconds(0.2) });
      await impatient.queued();
      const behind = open({ name: 't' });
      expect(await behind.queued()).toBe(2);
      const outcome = await impatient.outcome;
      expect(outcome.code).toBe(status.DEADLINE_EXCEEDED);
      expect(outcome.details).toMatch(/"t".*200 ms/);
      await holder.release();
      await behind.acquired();
      await behind.release();
    });

    it('hands out strictly increasing fencing tokens to successive holders, also after the queue empties', async () => {
      const tokens: bigint[] = [];
      for (let i = 0; i < 5; i += 1) {
        const holder = open({
          name: i % 2 ? 'tokens' : 'tokens',
          mode: i % 2 ? LockMode.WRITE : LockMode.MUTEX,
        });
        tokens.push(await holder.acquired());
        await holder.release();
      }
      expect([...tokens].sort((a, b) => (a < b ? -1 : 1))).toEqual(tokens);
      expect(new Set(tokens).size).toBe(tokens.length);
    });

    it('wakes exactly one waiter when a mutex with 50 waiters is released (no herd)', async () => {
      const holder = open({ name: 'herd' });
      await holder.acquired();
      const waiters: RequestStream[] = [];
      for (let i = 0; i < 50; i += 1) {
        const waiter = open({ name: 'herd' });
        expect(await waiter.queued()).toBe(i + 1);
        waiters.push(waiter);
      }
      const before = { ...ctx.server.store.stats };
      await holder.release();
      await waiters[0]!.acquired();
      const after = { ...ctx.server.store.stats };
      expect(after.waitersWoken - before.waitersWoken).toBe(1);
      expect(waiters.filter((w) => w.isAcquired)).toHaveLength(1);
      // Every other waiter is told it has one fewer ahead, from a listing of the queue by this
      // server (its one watch on the lock), not one per waiter: one, or two if a listing for the
      // queue's last joiner was still due when the holder released; and where a children watch is
      // used up by the change it tells, the listing that arms it again.
      for (let i = 1; i < 50; i += 1) expect(await waiters[i]!.queued(1)).toBe(i);
      const rearm = backend.rearmsChildrenWatch ? 1 : 0;
      expect(ctx.server.store.stats.childrenListings - before.childrenListings).toBeLessThanOrEqual(
        2 + rearm,
      );

      // A waiter leaving from the middle wakes only the one right behind it, and those behind
      // it are told their new places.
      const beforeCancel = { ...ctx.server.store.stats };
      waiters[10]!.cancel();
      await waiters[10]!.outcome;
      expect(await waiters[11]!.queued(2)).toBe(10);
      expect(await waiters[49]!.queued(2)).toBe(48);
      const afterCancel = { ...ctx.server.store.stats };
      expect(afterCancel.waitersWoken - beforeCancel.waitersWoken).toBe(1);
      for (const w of waiters) w.cancel();
    });

    it('rejects malformed requests with INVALID_ARGUMENT naming the problem, without disturbing other locks', async () => {
      const bystander = open({ name: 'bystander' });
      const token = await bystander.acquired();
      const cases: Array<[Parameters<LockCaller['open']>[0], RegExp]> = [
        [{ name: '' }, /name is empty/],
        [{ name: 'x'.repeat(513) }, /513 bytes.*512/],
        [{ name: 'é'.repeat(257) }, /514 bytes/],
        [{ name: 'bad\nname' }, /control character U\+000A/],
        [{ name: 'bell\u0007' }, /U\+0007/],
        [{ name: 'ok', mode: 9 as LockMode }, /mode 9/],
        [{ name: 'ok', waitTimeout: { seconds: -1n, nanos: 0 } }, /wait_timeout.*negative/],
        [{ name: 'ok', waitTimeout: { seconds: 0n, nanos: 2_000_000_000 } }, /wait_timeout.*malformed/],
        [{ name: 'ok', waitTimeout: { seconds: 10n ** 10n, nanos: 0 } }, /wait_timeout.*maximum/],
        [{ name: 'ok', owner: 'o'.repeat(257) }, /owner is 257 bytes/],
      ];
      for (const [start, message] of cases) {
        const outcome = await open(start).outcome;
        expect(outcome.code, String(start.name).slice(0, 40)).toBe(status.INVALID_ARGUMENT);
        expect(outcome.details).toMatch(message);
      }
      const releaseFirst = ctx.caller.openEmpty();
      track(releaseFirst);
      releaseFirst.sendRelease();
      expect(await releaseFirst.outcome).toMatchObject({
        code: status.INVALID_ARGUMENT,
        details: expect.stringMatching(PROTOCOL[rpc].firstMessage),
      });
      const emptyStream = ctx.caller.openEmpty();
      track(emptyStream);
      emptyStream.halfClose();
      expect((await emptyStream.outcome).code).toBe(status.INVALID_ARGUMENT);

      const twice = open({ name: 'twice' });
      await twice.acquired();
      twice.send({
        kind: {
          $case: 'start',
          value: {
            name: 'twice',
            mode: LockMode.MUTEX,
            owner: '',
            waitTimeout: undefined,
            resumeGrace: undefined,
            heartbeatInterval: undefined,
            value: Buffer.alloc(0),
            limit: 0,
            locks: [],
          },
        },
      });
      expect(await twice.outcome).toMatchObject({
        code: status.INVALID_ARGUMENT,
        details: expect.stringMatching(PROTOCOL[rpc].startTwice),
      });

      // The bystander still holds its lock: a try-lock on it fails.
      const probe = open({ name: 'bystander', waitTimeout: seconds(0) });
      expect((await probe.outcome).code).toBe(status.DEADLINE_EXCEEDED);
      expect(bystander.isAcquired).toBe(true);
      const later = open({ name: 'bystander' });
      await later.queued();
      await bystander.release();
      expect(await later.acquired()).toBeGreaterThan(token);
      await later.release();
    });

    it('keeps odd names apart and inside the root: slashes, dots, percent signs, Unicode, 512 bytes', async () => {
      const names = [
        'a/b',
        'a%2Fb',
        'a',
        '..',
        '.',
        '/',
        '../../zookeeper',
        'zookeeper',
        '🔒 ключ',
        'ö'.repeat(256),
        ' ',
      ];
      const holders = names.map((name) => open({ name, waitTimeout: seconds(0) }));
      const tokens = await Promise.all(holders.map((h) => h.acquired()));
      expect(new Set(tokens).size).toBe(names.length);
      const lockDirs = await ctx.server.store.children(`${ctx.rootPath}/locks`);
      expect(lockDirs).toHaveLength(names.length);
      for (const dir of lockDirs) expect(dir).toMatch(/^[A-Za-z0-9_%-]+$/);
      await Promise.all(holders.map((h) => h.release()));
    });

    it('aborts holders with ABORTED when the store session is lost, and queues waiters again', async () => {
      const holder = open({ name: 'session' });
      await holder.acquired();
      const waiter = open({ name: 'session' });
      await waiter.queued();
      await backend.expireSession(ctx.server);
      const outcome = await holder.outcome;
      // The server is on its new session and serving again (a busy machine may see the new
      // session in doubt for a moment on the way: Watch follows the status to SERVING).
      await waiter.acquired();
      await untilHealth(ctx.address, 'SERVING');
      expect(outcome.code).toBe(status.ABORTED);
      expect(outcome.details).toMatch(/"session" was lost/);
      // The waiter never held anything: it was queued again on the new session and granted.
      await waiter.release();
    });

    it('tells holders when their lock is in doubt and confirmed again, and grants nothing in between', async () => {
      const holder = open({ name: 'doubt' });
      await holder.acquired();
      expect(await healthOf(ctx.address)).toBe('SERVING');
      await backend.setSessionConfirmed(ctx.server, false);
      await holder.receipt('inDoubt');
      expect(await healthOf(ctx.address, 'lockstream.v1.LockService')).toBe('NOT_SERVING');
      const newcomer = open({ name: 'doubt-free' });
      await backend.setSessionConfirmed(ctx.server, true);
      const confirmedAt = await holder.receipt('confirmed');
      expect(await healthOf(ctx.address)).toBe('SERVING');
      // The free lock was asked for during the doubt and granted only after it ended.
      expect(await newcomer.receipt('acquired')).toBeGreaterThan(confirmedAt);
      expect(holder.messages.map((m) => m.kind?.$case)).toEqual(['acquired', 'inDoubt', 'confirmed']);
      expect((await holder.release()).code).toBe(status.OK);
      await newcomer.release();
    });

    it('keeps a held lock through a broken stream for its resume grace; a resume gets it back with the same token', async () => {
      const holder = open({ name: 'blip', owner: 'long-task', resumeGrace: seconds(30) });
      const token = await holder.acquired();
      const { token: resumeToken, graceMs } = await holder.resumable();
      expect(graceMs).toBe(30_000);
      expect(holder.messages.map((m) => m.kind?.$case)).toEqual(['resumable', 'acquired']);
      const waiter = open({ name: 'blip' });
      expect(await waiter.queued()).toBe(1);
      holder.cancel();
      await holder.outcome;
      const resumed = ctx.caller.resume(resumeToken);
      expect(await resumed.acquired()).toBe(token);
      expect(await resumed.resumable()).toEqual({ token: resumeToken, graceMs });
      // Still the holder: the waiter was never granted, and gets the lock on the clean release.
      expect(waiter.isAcquired).toBe(false);
      expect((await resumed.release()).code).toBe(status.OK);
      expect(await waiter.acquired()).toBeGreaterThan(token);
      await waiter.release();
      // A released request cannot be resumed.
      const late = ctx.caller.resume(resumeToken);
      expect(await late.outcome).toMatchObject({
        code: status.NOT_FOUND,
        details: expect.stringMatching(/unknown/),
      });
    });

    it('lets nobody else have a lock whose stream broke before its grace is over (lock-delay), then releases it', async () => {
      const graceMs = 400;
      const holder = open({ name: 'delay', resumeGrace: seconds(graceMs / 1000) });
      await holder.acquired();
      const { token: resumeToken } = await holder.resumable();
      const waiter = open({ name: 'delay' });
      await waiter.queued();
      const brokeAt = performance.now();
      holder.cancel();
      await waiter.acquired();
      expect(performance.now() - brokeAt).toBeGreaterThanOrEqual(graceMs);
      expect(await ctx.caller.resume(resumeToken).outcome).toMatchObject({ code: status.NOT_FOUND });
      await waiter.release();
    });

    it("keeps a waiter's place in the queue across a resume, and carries its wait timeout over", async () => {
      const holder = open({ name: 'place' });
      await holder.acquired();
      const first = open({ name: 'place', resumeGrace: seconds(30) });
      expect(await first.queued()).toBe(1);
      const { token: resumeToken } = await first.resumable();
      const second = open({ name: 'place' });
      expect(await second.queued()).toBe(2);
      first.cancel();
      await first.outcome;
      const resumed = ctx.caller.resume(resumeToken);
      expect(await resumed.queued()).toBe(1);
      await holder.release();
      await resumed.acquired();
      expect(second.isAcquired).toBe(false);
      await resumed.release();
      await second.acquired();
      await second.release();

      // A deadline set by `start` still applies to the resumed stream.
      const blocker = open({ name: 'deadline' });
      await blocker.acquired();
      const timed = open({ name: 'deadline', waitTimeout: seconds(0.3), resumeGrace: seconds(30) });
      const { token: timedToken } = await timed.resumable();
      await timed.queued();
      timed.cancel();
      await timed.outcome;
      const resumedTimed = ctx.caller.resume(timedToken);
      expect(await resumedTimed.outcome).toMatchObject({ code: status.DEADLINE_EXCEEDED });
      await blocker.release();
    });

    it('releases at once on a clean end even with a resume grace, and on a break without one', async () => {
      const graced = open({ name: 'clean', resumeGrace: seconds(30) });
      await graced.acquired();
      expect((await graced.release()).code).toBe(status.OK);
      // Without a grace, a bare half-close releases too.
      const bare = open({ name: 'clean' });
      await bare.acquired();
      bare.halfClose();
      expect((await bare.outcome).code).toBe(status.OK);
      expect(bare.messages.at(-1)?.kind?.$case).toBe('released');
      const waiterGone = open({ name: 'clean', resumeGrace: seconds(30) });
      await waiterGone.acquired();
      const queued = open({ name: 'clean', resumeGrace: seconds(30) });
      await queued.queued();
      // `release` while waiting withdraws at once too.
      queued.sendRelease();
      expect((await queued.outcome).code).toBe(status.CANCELLED);
      expect((await waiterGone.release()).code).toBe(status.OK);
      // Without a grace, nothing is kept after a break: the next in line gets the lock.
      const next = open({ name: 'clean', waitTimeout: seconds(0) });
      await next.acquired();
      expect(next.messages.map((m) => m.kind?.$case)).toEqual(['acquired']);
      const after = open({ name: 'clean' });
      await after.queued();
      next.cancel();
      await after.acquired();
      await after.release();
    });

    it('keeps a request with a resume grace that is half-closed without `release`, as after a cancel', async () => {
      const holder = open({ name: 'bare', resumeGrace: seconds(30) });
      const { token: resumeToken } = await holder.resumable();
      const token = await holder.acquired();
      const waiter = open({ name: 'bare', resumeGrace: seconds(30) });
      const { token: waiterToken } = await waiter.resumable();
      await waiter.queued();
      // Neither half-close can be told from a cancel whose reset is still on its way.
      waiter.halfClose();
      holder.halfClose();
      for (const stream of [holder, waiter]) {
        expect(await stream.outcome).toMatchObject({
          code: status.FAILED_PRECONDITION,
          details: expect.stringMatching(/half-closed .*kept for its resume grace \(30000 ms\)/),
          requestEnded: false,
        });
      }
      const resumed = ctx.caller.resume(resumeToken);
      expect(await resumed.acquired()).toBe(token);
      const resumedWaiter = ctx.caller.resume(waiterToken);
      expect(await resumedWaiter.queued()).toBe(1);
      expect((await resumed.release()).code).toBe(status.OK);
      expect(await resumedWaiter.acquired()).toBeGreaterThan(token);
      expect((await resumedWaiter.release()).code).toBe(status.OK);
    });

    it('hands a request over to a resuming stream, caps the grace at the server maximum, and refuses bad tokens', async () => {
      const holder = open({ name: 'takeover', resumeGrace: seconds(3600) });
      const token = await holder.acquired();
      const resumable = await holder.resumable();
      // The server's default maximum is 60 s.
      expect(resumable.graceMs).toBe(60_000);
      // The old stream is still open (its client thinks it is broken): the resume takes over.
      const resumed = ctx.caller.resume(resumable.token);
      expect(await resumed.acquired()).toBe(token);
      expect(await holder.outcome).toMatchObject({
        code: status.ABORTED,
        details: expect.stringMatching(/resumed on another stream/),
      });
      expect((await resumed.release()).code).toBe(status.OK);

      const foreign = ctx.caller.resume('a1b2c3d4-0000-4000-8000-000000000000.c2VjcmV0');
      // Where sessions move between instances, a token issued elsewhere is looked for there.
      expect(await foreign.outcome).toMatchObject({
        code: status.NOT_FOUND,
        details: expect.stringMatching(
          ctx.server.store.takeover
            ? /issued on the store session "a1b2c3d4-0000-4000-8000-000000000000" of another lockstream instance, and no instance has it any more/
            : /issued by lockstream instance "a1b2c3d4-0000-4000-8000-000000000000"/,
        ),
      });
      const empty = ctx.caller.resume('');
      expect(await empty.outcome).toMatchObject({
        code: status.INVALID_ARGUMENT,
        details: expect.stringMatching(/resume_token/),
      });
      const badHeartbeat = open({ name: 'takeover', heartbeatInterval: seconds(0.01) });
      expect(await badHeartbeat.outcome).toMatchObject({
        code: status.INVALID_ARGUMENT,
        details: expect.stringMatching(/heartbeat_interval 10 ms is out of range/),
      });
    });

    it('sends heartbeats, and treats a client silent for three intervals as a broken stream', async () => {
      const holder = open({ name: 'heartbeat', heartbeatInterval: seconds(0.1), resumeGrace: seconds(30) });
      const token = await holder.acquired();
      const { token: resumeToken } = await holder.resumable();
      await holder.receipt('heartbeat', 1);
      // This client never sends a heartbeat back.
      // Kept for its grace: no `lockstream-request: ended`.
      expect(await holder.outcome).toMatchObject({
        code: status.UNAVAILABLE,
        details: expect.stringMatching(/no message from the client for 300 ms/),
        requestEnded: false,
      });
      const resumed = ctx.caller.resume(resumeToken);
      expect(await resumed.acquired()).toBe(token);
      expect((await resumed.release()).code).toBe(status.OK);
    });

    it('reports a lock lost while its stream was broken as ABORTED on resume', async () => {
      const holder = open({
        name: 'lost-meanwhile',
        resumeGrace: seconds(30),
        heartbeatInterval: seconds(0.1),
      });
      await holder.acquired();
      const { token: resumeToken } = await holder.resumable();
      // The server ends the silent stream itself, so it has detached the request by the time
      // this client hears of it.
      expect((await holder.outcome).code).toBe(status.UNAVAILABLE);
      await backend.expireSession(ctx.server);
      const resumed = ctx.caller.resume(resumeToken);
      expect(await resumed.outcome).toMatchObject({
        code: status.ABORTED,
        details: expect.stringMatching(/"lost-meanwhile" was lost/),
      });
      expect(resumed.isAcquired).toBe(false);
    });

    it('describes holders and waiters in queue order, with mode, owner, token, instance and peer', async () => {
      const r1 = open({ name: 'described', mode: LockMode.READ, owner: 'reader-1' });
      const r2 = open({ name: 'described', mode: LockMode.READ, owner: 'reader-2' });
      const [t1, t2] = await Promise.all([r1.acquired(), r2.acquired()]);
      const writer = open({ name: 'described', mode: LockMode.WRITE, owner: 'writer' });
      await writer.queued();
      const r3 = open({ name: 'described', mode: LockMode.READ, owner: 'reader-3' });
      await r3.queued();

      const before = Date.now();
      const described = await ctx.caller.describe('described');
      expect(described.name).toBe('described');
      const summary = (infos: typeof described.holders): Array<[LockMode, string]> =>
        infos.map((info) => [info.mode, info.owner]);
      expect(summary(described.holders)).toEqual([
        [LockMode.READ, 'reader-1'],
        [LockMode.READ, 'reader-2'],
      ]);
      expect(summary(described.waiters)).toEqual([
        [LockMode.WRITE, 'writer'],
        [LockMode.READ, 'reader-3'],
      ]);
      expect(described.holders.map((h) => h.fencingToken).sort()).toEqual([t1, t2].sort());
      const all = [...described.holders, ...described.waiters];
      for (const info of all) {
        expect(info.instance).toBe(all[0]!.instance);
        expect(info.instance).not.toBe('');
        expect(info.peer).toMatch(/^(ipv4:)?127\.0\.0\.1:\d+$/);
        expect(info.requestedAt!.getTime()).toBeLessThanOrEqual(before);
        expect(info.requestedAt!.getTime()).toBeGreaterThan(before - 60_000);
      }
      // A waiter's token is the one it will hold: larger than the holders'.
      expect(described.waiters[0]!.fencingToken).toBeGreaterThan(t2 > t1 ? t2 : t1);

      await r1.release();
      await r2.release();
      const writeToken = await writer.acquired();
      const after = await ctx.caller.describe('described');
      expect(after.holders.map((h) => [h.owner, h.fencingToken])).toEqual([['writer', writeToken]]);
      expect(summary(after.waiters)).toEqual([[LockMode.READ, 'reader-3']]);
      await writer.release();
      await r3.acquired();
      await r3.release();

      expect(await ctx.caller.describe('nobody-here')).toEqual({
        name: 'nobody-here',
        holders: [],
        waiters: [],
        limit: 0,
        usedWeight: 0,
      });
      await expect(ctx.caller.describe('')).rejects.toMatchObject({
        code: status.INVALID_ARGUMENT,
        details: expect.stringMatching(/name is empty/),
      });
    });

    it('says whether a fencing token is held: only while its holder holds the lock', async () => {
      const holder = open({ name: 'checked' });
      const token = await holder.acquired();
      const waiter = open({ name: 'checked' });
      await waiter.queued();
      const [waiterInfo] = (await ctx.caller.describe('checked')).waiters;
      expect(await ctx.caller.checkToken('checked', token)).toBe(true);
      expect(await ctx.caller.checkToken('checked', waiterInfo!.fencingToken)).toBe(false);
      expect(await ctx.caller.checkToken('checked', token + 1_000_000n)).toBe(false);
      expect(await ctx.caller.checkToken('elsewhere', token)).toBe(false);
      await holder.release();
      expect(await waiter.acquired()).toBe(waiterInfo!.fencingToken);
      expect(await ctx.caller.checkToken('checked', token)).toBe(false);
      expect(await ctx.caller.checkToken('checked', waiterInfo!.fencingToken)).toBe(true);
      await waiter.release();
      await expect(ctx.caller.checkToken('bad\u0000name', token)).rejects.toMatchObject({
        code: status.INVALID_ARGUMENT,
      });
    });

    it('lists the locks with holders or waiters by prefix, in name order, a page at a time', async () => {
      const held = ['list/c', 'list/a', 'list/b', 'other/x'].map((name) => open({ name }));
      await Promise.all(held.map((h) => h.acquired()));
      const waiter = open({ name: 'list/b', mode: LockMode.READ });
      await waiter.queued();

      const first = await ctx.caller.list({ prefix: 'list/', pageSize: 2 });
      expect(first.locks).toEqual([
        { name: 'list/a', holders: 1, waiters: 0, heldMode: LockMode.MUTEX, limit: 0, usedWeight: 0 },
        { name: 'list/b', holders: 1, waiters: 1, heldMode: LockMode.MUTEX, limit: 0, usedWeight: 0 },
      ]);
      expect(first.nextPageToken).not.toBe('');
      const second = await ctx.caller.list({ prefix: 'list/', pageSize: 2, pageToken: first.nextPageToken });
      expect(second).toEqual({
        locks: [
          { name: 'list/c', holders: 1, waiters: 0, heldMode: LockMode.MUTEX, limit: 0, usedWeight: 0 },
        ],
        nextPageToken: '',
      });
      expect((await ctx.caller.list()).locks.map((l) => l.name)).toEqual([
        'list/a',
        'list/b',
        'list/c',
        'other/x',
      ]);

      await Promise.all(held.map((h) => h.release()));
      await waiter.acquired();
      expect((await ctx.caller.list()).locks).toEqual([
        { name: 'list/b', holders: 1, waiters: 0, heldMode: LockMode.READ, limit: 0, usedWeight: 0 },
      ]);
      await waiter.release();
      expect((await ctx.caller.list()).locks).toEqual([]);

      await expect(ctx.caller.list({ pageSize: 5000 })).rejects.toMatchObject({
        code: status.INVALID_ARGUMENT,
        details: expect.stringMatching(/page_size 5000/),
      });
      await expect(ctx.caller.list({ pageToken: 'not-a-token!' })).rejects.toMatchObject({
        code: status.INVALID_ARGUMENT,
        details: expect.stringMatching(/page_token/),
      });
    });

    it('asks holders to release on RevokeLock, and takes the lock from a holder that ignores a deadline', async () => {
      const polite = open({ name: 'revoked', owner: 'polite' });
      const politeToken = await polite.acquired();
      const stubborn = open({ name: 'revoked', owner: 'stubborn' });
      await stubborn.queued();
      expect(await ctx.caller.revoke('revoked', 'maintenance')).toBe(1);
      await polite.receipt('revokeRequested');
      expect(polite.messages.at(-1)).toEqual({
        kind: { $case: 'revokeRequested', value: { reason: 'maintenance', forceAt: undefined } },
      });
      // Cooperative: still the holder until it releases.
      expect(stubborn.isAcquired).toBe(false);
      expect(await ctx.caller.checkToken('revoked', politeToken)).toBe(true);
      expect((await polite.release()).code).toBe(status.OK);

      const stubbornToken = await stubborn.acquired();
      const next = open({ name: 'revoked', owner: 'next' });
      await next.queued();
      const askedAt = Date.now();
      expect(await ctx.caller.revoke('revoked', 'deploy', 0.3)).toBe(1);
      await stubborn.receipt('revokeRequested');
      const request = stubborn.messages.at(-1)?.kind;
      if (request?.$case !== 'revokeRequested') throw new Error('INVARIANT: not a revocation request');
      expect(request.value.reason).toBe('deploy');
      expect(request.value.forceAt!.getTime()).toBeGreaterThanOrEqual(askedAt + 300);
      // It does not release: the lock is taken away, and the next waiter gets it.
      expect(await stubborn.outcome).toMatchObject({
        code: status.ABORTED,
        details: expect.stringMatching(/"revoked" was revoked and not released in time: deploy/),
      });
      expect(await next.acquired()).toBeGreaterThan(stubbornToken);
      expect(await ctx.caller.checkToken('revoked', stubbornToken)).toBe(false);
      await next.release();

      expect(await ctx.caller.revoke('revoked', 'nobody holds it')).toBe(0);
      await expect(ctx.caller.revoke('revoked', 'bad\nreason')).rejects.toMatchObject({
        code: status.INVALID_ARGUMENT,
        details: expect.stringMatching(/reason contains a control character/),
      });
    });

    it('keeps a deadline once told: a later, shorter one does not end the hold sooner; one added to a cooperative request is told first', async () => {
      // Told a deadline 2.5 s away, then asked again with 100 ms: the first deadline stands.
      const holder = open({ name: 'revoked-twice' });
      await holder.acquired();
      const waiter = open({ name: 'revoked-twice' });
      await waiter.queued();
      expect(await ctx.caller.revoke('revoked-twice', 'first', 2.5)).toBe(1);
      await holder.receipt('revokeRequested');
      const told = holder.messages.at(-1)?.kind;
      if (told?.$case !== 'revokeRequested') throw new Error('INVARIANT: not a revocation request');
      const forceAt = told.value.forceAt!.getTime();
      // Asked cooperatively (no deadline), then with a 100 ms deadline: told that deadline, then forced.
      const cooperative = open({ name: 'revoked-politely' });
      await cooperative.acquired();
      expect(await ctx.caller.revoke('revoked-politely', 'when you can')).toBe(1);
      await cooperative.receipt('revokeRequested');
      expect(await ctx.caller.revoke('revoked-twice', 'second', 0.1)).toBe(1);
      expect(await ctx.caller.revoke('revoked-politely', 'now', 0.1)).toBe(1);

      expect(await cooperative.outcome).toMatchObject({
        code: status.ABORTED,
        details: expect.stringMatching(/"revoked-politely" was revoked and not released in time: now/),
      });
      const politeRequests = cooperative.messages.flatMap((m) =>
        m.kind?.$case === 'revokeRequested' ? [m.kind.value] : [],
      );
      expect(politeRequests.map(({ reason }) => reason)).toEqual(['when you can', 'now']);
      expect(politeRequests[0]!.forceAt).toBeUndefined();
      expect(cooperative.endedAt!).toBeGreaterThanOrEqual(politeRequests[1]!.forceAt!.getTime());

      expect(await holder.outcome).toMatchObject({
        code: status.ABORTED,
        details: expect.stringMatching(/"revoked-twice" was revoked and not released in time: first/),
      });
      expect(holder.endedAt!).toBeGreaterThanOrEqual(forceAt);
      expect(holder.messages.filter((m) => m.kind?.$case === 'revokeRequested')).toHaveLength(1);
      await waiter.acquired();
      await waiter.release();
    });

    it("streams a lock's state on WatchLock: now, then after every grant, release and queue change", async () => {
      const owners = (infos: Array<{ owner: string }>): string[] => infos.map((info) => info.owner);
      const watch = ctx.caller.watch('watched');
      await watch.until((s) => s.holders.length === 0 && s.waiters.length === 0);
      const holder = open({ name: 'watched', owner: 'first' });
      await holder.acquired();
      await watch.until((s) => owners(s.holders).join() === 'first' && s.waiters.length === 0);
      const waiter = open({ name: 'watched', owner: 'second' });
      await waiter.queued();
      await watch.until((s) => owners(s.holders).join() === 'first' && owners(s.waiters).join() === 'second');
      await holder.release();
      await watch.until((s) => owners(s.holders).join() === 'second' && s.waiters.length === 0);
      await waiter.release();
      const last = await watch.until(
        (s) => s.holders.length === 0 && s.waiters.length === 0 && watch.states.indexOf(s) > 0,
      );
      expect(last.name).toBe('watched');
      watch.cancel();

      const bad = ctx.caller.watch('');
      expect(await bad.ended()).toMatchObject({ code: status.INVALID_ARGUMENT });
    });

    it('ends held and queued streams with UNAVAILABLE on shutdown', async () => {
      const holder = open({ name: 'bye' });
      await holder.acquired();
      const waiter = open({ name: 'bye' });
      await waiter.queued();
      await ctx.server.stop();
      // Gone for good, unlike a broken connection's UNAVAILABLE: nothing to resume.
      expect(await holder.outcome).toMatchObject({ code: status.UNAVAILABLE, requestEnded: true });
      expect(await waiter.outcome).toMatchObject({ code: status.UNAVAILABLE, requestEnded: true });
      // Restart on the same root for afterEach's leftover check.
      const config = loadConfig({}, ['--port', '0', '--root', ctx.rootPath, ...backend.serveArgs()]);
      ctx.server = await startServer(config, testLogger());
    });
  });
}
