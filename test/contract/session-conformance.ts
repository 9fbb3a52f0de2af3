import { status } from '@grpc/grpc-js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/server/config.js';
import { startServer, type RunningServer } from '../../src/server/main.js';
import { LockCaller, LockMode, seconds } from '../support/lock-caller.js';
import { SessionDriver } from '../support/session-driver.js';
import {
  startConformanceServer,
  stopConformanceServer,
  testLogger,
  type BackendUnderTest,
  type ConformanceContext,
} from './conformance-server.js';

/**
 * What only a Session stream does, on every back end: many requests on one stream, each
 * failing alone; one resume, heartbeat and grace for all of them; the protocol's own rules.
 * Every per-request promise is also checked by the whole lock conformance suite over Session.
 */
export function describeSessionConformance(backendName: string, backend: BackendUnderTest): void {
  describe(`session conformance on the ${backendName} back end`, () => {
    const ctx = {} as ConformanceContext;
    const sessions: SessionDriver[] = [];
    const track = (session: SessionDriver): SessionDriver => {
      sessions.push(session);
      return session;
    };
    const openSession = (options?: Parameters<typeof SessionDriver.open>[1]): SessionDriver =>
      track(SessionDriver.open(ctx.caller.client, options));
    const resumeSession = (token: string): SessionDriver =>
      track(SessionDriver.resume(ctx.caller.client, token));

    beforeEach(async () => {
      await startConformanceServer(ctx, backend, 'acquire', ['--max-requests-per-session', '20']);
    });

    afterEach(async () => {
      const leftOpen = sessions.splice(0);
      for (const session of leftOpen) session.cancel();
      await Promise.all(leftOpen.map((s) => s.outcome));
      await stopConformanceServer(ctx, backend);
    });

    it('holds two locks on one stream, and releases both on half-close with `released`, `ended` OK and an OK call', async () => {
      const session = openSession();
      expect(await session.opened()).toEqual({ token: '', graceMs: 0 });
      session.acquire(1, { name: 'two/a' });
      session.acquire(2, { name: 'two/b', mode: LockMode.READ });
      const [a, b] = await Promise.all([session.acquired(1), session.acquired(2)]);
      expect(a).not.toBe(b);
      const waiter = ctx.caller.open({ name: 'two/a' });
      expect(await waiter.queued()).toBe(1);
      session.halfClose();
      expect(await session.outcome).toMatchObject({ code: status.OK });
      for (const id of [1, 2]) {
        expect(session.kinds(id)).toEqual(['acquired', 'released', 'ended']);
        expect(await session.ended(id)).toEqual({ code: status.OK, message: '' });
      }
      expect(await waiter.acquired()).toBeGreaterThan(a);
      await waiter.release();
    });

    it('serves many requests of one session at once, each lock to one holder at a time, in queue order', async () => {
      const session = openSession();
      const names = ['many/0', 'many/1', 'many/2'];
      const perName = 5;
      // Request ids: 1.., five per name, queued in that order on each name.
      const ids = names.flatMap((name, n) =>
        Array.from({ length: perName }, (_, i) => ({ id: n * perName + i + 1, name })),
      );
      for (const { id, name } of ids) session.acquire(id, { name });
      const history: Array<{ name: string; id: number; token: bigint }> = [];
      for (const [n, name] of names.entries()) {
        for (let i = 0; i < perName; i += 1) {
          const id = n * perName + i + 1;
          const token = await session.acquired(id);
          history.push({ name, id, token });
          // Nobody behind it on this name holds meanwhile.
          for (let later = i + 1; later < perName; later += 1)
            expect(session.isAcquired(n * perName + later + 1)).toBe(false);
          session.release(id);
          expect(await session.ended(id)).toEqual({ code: status.OK, message: '' });
        }
      }
      for (const name of names) {
        const grants = history.filter((h) => h.name === name);
        expect(grants.map((g) => g.id)).toEqual([...grants.map((g) => g.id)].sort((x, y) => x - y));
        for (let i = 1; i < grants.length; i += 1)
          expect(grants[i]!.token).toBeGreaterThan(grants[i - 1]!.token);
      }
      session.halfClose();
      expect((await session.outcome).code).toBe(status.OK);
    });

    it('ends a failing request alone, with the status and message Acquire would give, and goes on serving the session', async () => {
      const session = openSession();
      session.acquire(1, { name: 'alone' });
      const token = await session.acquired(1);
      const cases: Array<[number, Parameters<SessionDriver['acquire']>[1], status, RegExp]> = [
        [2, { name: '' }, status.INVALID_ARGUMENT, /name is empty/],
        [3, { name: 'ok', mode: 9 as LockMode }, status.INVALID_ARGUMENT, /mode 9/],
        [
          4,
          { name: 'ok', waitTimeout: { seconds: -1n, nanos: 0 } },
          status.INVALID_ARGUMENT,
          /wait_timeout.*negative/,
        ],
        [5, { name: 'ok', owner: 'o'.repeat(257) }, status.INVALID_ARGUMENT, /owner is 257 bytes/],
        [
          6,
          { name: 'alone', waitTimeout: seconds(0) },
          status.DEADLINE_EXCEEDED,
          /"alone" is not free \(1 ahead\)/,
        ],
        [
          7,
          { name: 'alone', waitTimeout: seconds(0.1) },
          status.DEADLINE_EXCEEDED,
          /"alone" was not acquired within 100 ms/,
        ],
      ];
      for (const [id, request, code, message] of cases) {
        session.acquire(id, request);
        const ended = await session.ended(id);
        expect(ended.code, `request ${id}`).toBe(code);
        expect(ended.message).toMatch(message);
      }
      // A try-lock that fails left nothing queued, and the holder still holds.
      expect(session.isAcquired(1)).toBe(true);
      expect(await ctx.caller.checkToken('alone', token)).toBe(true);
      // The failed ids are free again.
      session.acquire(2, { name: 'alone-2' });
      await session.acquired(2);
      session.halfClose();
      expect((await session.outcome).code).toBe(status.OK);
    });

    it('queues two requests of one session for the same lock like two clients', async () => {
      const session = openSession();
      session.acquire(1, { name: 'self' });
      const first = await session.acquired(1);
      session.acquire(2, { name: 'self' });
      expect(await session.queued(2)).toBe(1);
      session.release(1);
      expect(await session.acquired(2)).toBeGreaterThan(first);
      // Its `released` may come after the next grant: ZooKeeper tells the waiter's watch first.
      expect(await session.ended(1)).toEqual({ code: status.OK, message: '' });
      expect(session.kinds(1)).toEqual(['acquired', 'released', 'ended']);
      session.halfClose();
      await session.outcome;
    });

    it('withdraws a waiting request on `release` or `cancel` (CANCELLED), releases a held one on `cancel` (CANCELLED), and ignores unknown ids', async () => {
      const session = openSession();
      session.acquire(1, { name: 'rc' });
      const token = await session.acquired(1);
      session.acquire(2, { name: 'rc' });
      session.acquire(3, { name: 'rc' });
      expect(await session.queued(3)).toBe(2);
      session.release(2);
      expect(await session.ended(2)).toMatchObject({
        code: status.CANCELLED,
        message: expect.stringMatching(/"rc".*`release` while waiting/),
      });
      session.cancelRequest(3);
      expect(await session.ended(3)).toMatchObject({
        code: status.CANCELLED,
        message: expect.stringMatching(/"rc".*cancelled the request while waiting/),
      });
      session.release(99);
      session.cancelRequest(98);
      const other = ctx.caller.open({ name: 'rc' });
      expect(await other.queued()).toBe(1);
      session.cancelRequest(1);
      expect(await session.ended(1)).toMatchObject({
        code: status.CANCELLED,
        message: expect.stringMatching(/"rc" was released/),
      });
      expect(session.kinds(1)).toEqual(['acquired', 'ended']);
      expect(await other.acquired()).toBeGreaterThan(token);
      await other.release();
      // The session is still open and serving.
      session.acquire(4, { name: 'rc' });
      await session.acquired(4);
      session.halfClose();
      expect((await session.outcome).code).toBe(status.OK);
    });

    it('ends the session on a protocol violation, releasing all its locks, with INVALID_ARGUMENT naming the rule', async () => {
      const violations: Array<[(s: SessionDriver) => void, RegExp]> = [
        [(s) => s.acquire(0, { name: 'v' }), /request_id of 1 or more/],
        [(s) => s.acquire(1, { name: 'v' }), /request_id 1 is in use/],
        [
          (s) => s.send({ $case: 'open', value: { resumeGrace: undefined, heartbeatInterval: undefined } }),
          /only once per stream/,
        ],
        [(s) => s.send(undefined), /must set one of/],
      ];
      for (const [violate, rule] of violations) {
        const session = openSession();
        session.acquire(1, { name: 'v' });
        const token = await session.acquired(1);
        const waiter = ctx.caller.open({ name: 'v' });
        await waiter.queued();
        violate(session);
        expect(await session.outcome).toMatchObject({
          code: status.INVALID_ARGUMENT,
          details: expect.stringMatching(rule),
          requestEnded: true,
        });
        expect(await waiter.acquired()).toBeGreaterThan(token);
        await waiter.release();
      }
      const notOpened = track(
        new SessionDriver(ctx.caller.client, {
          $case: 'acquire',
          value: {
            requestId: 1,
            name: 'v',
            mode: LockMode.MUTEX,
            owner: '',
            waitTimeout: undefined,
            limit: 0,
            locks: [],
            value: Buffer.alloc(0),
          },
        }),
      );
      expect(await notOpened.outcome).toMatchObject({
        code: status.INVALID_ARGUMENT,
        details: expect.stringMatching(/first message must be `open` or `resume`/),
      });
      const badGrace = track(
        new SessionDriver(ctx.caller.client, {
          $case: 'open',
          value: { resumeGrace: { seconds: -1n, nanos: 0 }, heartbeatInterval: undefined },
        }),
      );
      expect(await badGrace.outcome).toMatchObject({
        code: status.INVALID_ARGUMENT,
        details: expect.stringMatching(/resume_grace.*negative/),
      });
    });

    it('refuses requests beyond --max-requests-per-session with RESOURCE_EXHAUSTED, leaving the others alone', async () => {
      const session = openSession();
      for (let id = 1; id <= 20; id += 1) session.acquire(id, { name: `cap/${id}` });
      await Promise.all(Array.from({ length: 20 }, (_, i) => session.acquired(i + 1)));
      session.acquire(21, { name: 'cap/21' });
      expect(await session.ended(21)).toMatchObject({
        code: status.RESOURCE_EXHAUSTED,
        message: expect.stringMatching(/20 requests; the server allows 20/),
      });
      session.release(1);
      await session.ended(1);
      session.acquire(21, { name: 'cap/21' });
      await session.acquired(21);
      session.halfClose();
      expect((await session.outcome).code).toBe(status.OK);
    });

    it('resumes a whole session with one token: every lock with the same token, every waiter in its place, nobody else granted meanwhile', async () => {
      const session = openSession({ resumeGrace: seconds(30) });
      const { token: resumeToken, graceMs } = await session.opened();
      expect(graceMs).toBe(30_000);
      session.acquire(1, { name: 'r/a' });
      session.acquire(2, { name: 'r/b' });
      const [a, b] = await Promise.all([session.acquired(1), session.acquired(2)]);
      const other = ctx.caller.open({ name: 'r/a' });
      expect(await other.queued()).toBe(1);
      session.acquire(3, { name: 'r/a' });
      expect(await session.queued(3)).toBe(2);
      session.cancel();
      const broken = await session.outcome;
      expect(broken.code).toBe(status.CANCELLED);
      const resumed = resumeSession(resumeToken);
      expect(await resumed.opened()).toEqual({ token: resumeToken, graceMs });
      await resumed.next(0, 'resumed');
      expect(await resumed.acquired(1)).toBe(a);
      expect(await resumed.acquired(2)).toBe(b);
      expect(await resumed.queued(3)).toBe(2);
      // The resume report comes before `resumed`.
      const resumedAt = (await resumed.next(0, 'resumed')).receipt;
      for (const kind of ['acquired', 'queued'] as const) {
        const reports = resumed.received.filter((r) => r.message.kind?.$case === kind);
        for (const report of reports) expect(report.receipt).toBeLessThan(resumedAt);
      }
      expect(other.isAcquired).toBe(false);
      resumed.release(1);
      expect(await resumed.ended(1)).toEqual({ code: status.OK, message: '' });
      expect(await other.acquired()).toBeGreaterThan(a);
      await other.release();
      expect(await resumed.acquired(3)).toBeGreaterThan(a);
      resumed.release(2);
      resumed.release(3);
      resumed.halfClose();
      expect((await resumed.outcome).code).toBe(status.OK);
      // A session that ended cleanly cannot be resumed.
      expect(await resumeSession(resumeToken).outcome).toMatchObject({
        code: status.NOT_FOUND,
        details: expect.stringMatching(/unknown/),
      });
    });

    it('reports every request before `resumed` even when the resumed stream is backed up (more held locks than its buffer)', async () => {
      // grpc-js buffers 16 messages before a write reports backpressure; this suite allows 20 requests.
      const heldCount = 19;
      const session = openSession({ resumeGrace: seconds(30) });
      const { token: resumeToken } = await session.opened();
      const blocker = ctx.caller.open({ name: 'backed-up/blocked' });
      await blocker.acquired();
      for (let id = 1; id <= heldCount; id += 1) session.acquire(id, { name: `backed-up/${id}` });
      const waiterId = heldCount + 1;
      session.acquire(waiterId, { name: 'backed-up/blocked' });
      await Promise.all([
        ...Array.from({ length: heldCount }, (_, i) => session.acquired(i + 1)),
        session.queued(waiterId),
      ]);
      session.cancel();
      await session.outcome;
      const resumed = resumeSession(resumeToken);
      const resumedAt = (await resumed.next(0, 'resumed')).receipt;
      // A request not reported before `resumed` would be unknown to the server: each one is.
      const reportedBefore = (id: number): boolean =>
        resumed.received.some((r) => r.message.requestId === id && r.receipt < resumedAt);
      const unreported = Array.from({ length: waiterId }, (_, i) => i + 1).filter(
        (id) => !reportedBefore(id),
      );
      expect(unreported).toEqual([]);
      expect(await resumed.queued(waiterId)).toBe(1);
      for (let id = 1; id <= waiterId; id += 1) resumed.cancelRequest(id);
      resumed.halfClose();
      expect((await resumed.outcome).code).toBe(status.OK);
      await blocker.release();
    });

    it('tells a resumed session of requests that ended while it was detached, and frees everything once its grace passes', async () => {
      const blocker = ctx.caller.open({ name: 'd/blocked' });
      const blockerToken = await blocker.acquired();
      const session = openSession({ resumeGrace: seconds(30) });
      const { token: resumeToken } = await session.opened();
      session.acquire(1, { name: 'd/blocked', waitTimeout: seconds(0.2) });
      await session.queued(1);
      session.acquire(2, { name: 'd/held' });
      await session.acquired(2);
      session.cancel();
      await session.outcome;
      // The wait timeout passes while no stream is attached: the waiter leaves the queue.
      const watch = ctx.caller.watch('d/blocked');
      await watch.until((state) => state.holders.length === 1 && state.waiters.length === 0);
      watch.cancel();
      const resumed = resumeSession(resumeToken);
      expect(await resumed.ended(1)).toMatchObject({
        code: status.DEADLINE_EXCEEDED,
        message: expect.stringMatching(/"d\/blocked" was not acquired within 200 ms/),
      });
      await resumed.acquired(2);
      await resumed.next(0, 'resumed');
      await blocker.release();
      expect(blockerToken).toBeGreaterThan(0n);

      // Without a resume, the grace ends the session and frees its locks.
      const short = openSession({ resumeGrace: seconds(0.3) });
      const { token: shortToken } = await short.opened();
      short.acquire(1, { name: 'd/short' });
      const shortHeld = await short.acquired(1);
      const next = ctx.caller.open({ name: 'd/short' });
      await next.queued();
      const brokeAt = performance.now();
      short.cancel();
      expect(await next.acquired()).toBeGreaterThan(shortHeld);
      expect(performance.now() - brokeAt).toBeGreaterThanOrEqual(300);
      expect(await resumeSession(shortToken).outcome).toMatchObject({ code: status.NOT_FOUND });
      await next.release();
      resumed.release(2);
      resumed.halfClose();
      expect((await resumed.outcome).code).toBe(status.OK);
    });

    it('hands the session to a resuming stream while the old one is still open: the old one ends with ABORTED', async () => {
      const session = openSession({ resumeGrace: seconds(30) });
      const { token } = await session.opened();
      session.acquire(7, { name: 'takeover' });
      const held = await session.acquired(7);
      const resumed = resumeSession(token);
      expect(await resumed.acquired(7)).toBe(held);
      expect(await session.outcome).toMatchObject({
        code: status.ABORTED,
        details: expect.stringMatching(/resumed on another stream/),
        requestEnded: false,
      });
      resumed.release(7);
      expect(await resumed.ended(7)).toEqual({ code: status.OK, message: '' });
      resumed.halfClose();
      expect((await resumed.outcome).code).toBe(status.OK);
    });

    it('sends heartbeats on the session, and treats a silent client as a broken stream (kept for its grace)', async () => {
      const session = openSession({ resumeGrace: seconds(30), heartbeatInterval: seconds(0.1) });
      const { token } = await session.opened();
      session.acquire(1, { name: 'hb/a' });
      session.acquire(2, { name: 'hb/b' });
      const [a, b] = await Promise.all([session.acquired(1), session.acquired(2)]);
      await session.next(0, 'heartbeat', 1);
      expect(await session.outcome).toMatchObject({
        code: status.UNAVAILABLE,
        details: expect.stringMatching(/no message from the client for 300 ms/),
        requestEnded: false,
      });
      const resumed = resumeSession(token);
      expect([await resumed.acquired(1), await resumed.acquired(2)]).toEqual([a, b]);
      resumed.release(1);
      resumed.cancelRequest(2);
      resumed.halfClose();
      expect((await resumed.outcome).code).toBe(status.OK);
    });

    it('keeps a session with a grace that is half-closed before every request was let go, as after a cancel', async () => {
      const session = openSession({ resumeGrace: seconds(30) });
      const { token } = await session.opened();
      session.acquire(1, { name: 'hc/a' });
      session.acquire(2, { name: 'hc/b' });
      const [a] = await Promise.all([session.acquired(1), session.acquired(2)]);
      session.acquire(3, { name: 'hc/a' });
      await session.queued(3);
      const other = ctx.caller.open({ name: 'hc/b' });
      await other.queued();
      // Request 2 is let go; 1 and 3 are not: the half-close cannot be told from a cancel.
      session.release(2);
      expect(await session.ended(2)).toEqual({ code: status.OK, message: '' });
      await other.acquired();
      session.halfClose();
      expect(await session.outcome).toMatchObject({
        code: status.FAILED_PRECONDITION,
        details: expect.stringMatching(
          /half-closed with 2 request\(s\) neither released nor cancelled; it is kept for its resume grace \(30000 ms\)/,
        ),
        requestEnded: false,
      });
      const resumed = resumeSession(token);
      expect(await resumed.acquired(1)).toBe(a);
      expect(await resumed.queued(3)).toBe(1);
      resumed.cancelRequest(3);
      resumed.release(1);
      expect(await resumed.ended(1)).toEqual({ code: status.OK, message: '' });
      resumed.halfClose();
      expect((await resumed.outcome).code).toBe(status.OK);
      await other.release();
    });

    it('tells each held request of a revocation with its id, and a forced one ends only that request with ABORTED', async () => {
      const session = openSession();
      session.acquire(1, { name: 'rv/a' });
      session.acquire(2, { name: 'rv/b' });
      const [a] = await Promise.all([session.acquired(1), session.acquired(2)]);
      expect(await ctx.caller.revoke('rv/a', 'maintenance', 0.2)).toBe(1);
      const { message } = await session.next(1, 'revokeRequested');
      expect(message.kind).toMatchObject({ $case: 'revokeRequested', value: { reason: 'maintenance' } });
      expect(await session.ended(1)).toMatchObject({
        code: status.ABORTED,
        message: expect.stringMatching(/"rv\/a" was revoked and not released in time: maintenance/),
      });
      expect(session.kinds(2)).toEqual(['acquired']);
      expect(await ctx.caller.checkToken('rv/a', a)).toBe(false);
      session.halfClose();
      expect((await session.outcome).code).toBe(status.OK);
    });

    it('ends held requests with ABORTED when the store session is lost, queues waiters again, and keeps the session', async () => {
      const session = openSession();
      session.acquire(1, { name: 'sl' });
      const held = await session.acquired(1);
      session.acquire(2, { name: 'sl' });
      await session.queued(2);
      await backend.expireSession(ctx.server);
      expect(await session.ended(1)).toMatchObject({
        code: status.ABORTED,
        message: expect.stringMatching(/"sl" was lost/),
      });
      expect(await session.acquired(2)).toBeGreaterThan(held);
      session.halfClose();
      expect((await session.outcome).code).toBe(status.OK);
    });

    it('shows session requests to DescribeLock, ListLocks and CheckToken like any other', async () => {
      const session = openSession();
      session.acquire(1, { name: 'seen', owner: 'session-owner', mode: LockMode.WRITE });
      const token = await session.acquired(1);
      session.acquire(2, { name: 'seen', owner: 'session-waiter', mode: LockMode.READ });
      await session.queued(2);
      const described = await ctx.caller.describe('seen');
      expect(described.holders.map((h) => [h.owner, h.mode, h.fencingToken])).toEqual([
        ['session-owner', LockMode.WRITE, token],
      ]);
      expect(described.waiters.map((w) => [w.owner, w.mode])).toEqual([['session-waiter', LockMode.READ]]);
      expect((await ctx.caller.list({ prefix: 'seen' })).locks).toEqual([
        { name: 'seen', holders: 1, waiters: 1, heldMode: LockMode.WRITE, limit: 0, usedWeight: 0 },
      ]);
      expect(await ctx.caller.checkToken('seen', token)).toBe(true);
      session.halfClose();
      expect((await session.outcome).code).toBe(status.OK);
      expect(await ctx.caller.checkToken('seen', token)).toBe(false);
    });

    /** Another server of this back end on the test's root, and a caller of its Session RPC. */
    async function anotherServer(
      args: string[] = [],
    ): Promise<{ server: RunningServer; caller: LockCaller }> {
      const config = loadConfig({}, ['--port', '0', '--root', ctx.rootPath, ...args, ...backend.serveArgs()]);
      const server = await startServer(config, testLogger());
      return { server, caller: new LockCaller(`127.0.0.1:${server.port}`, {}, undefined, 'session') };
    }

    it('ends every session with UNAVAILABLE and `lockstream-request: ended` on shutdown with --on-stop release', async () => {
      await ctx.server.stop();
      ctx.caller.close();
      ({ server: ctx.server, caller: ctx.caller } = await anotherServer(['--on-stop', 'release']));
      const session = openSession({ resumeGrace: seconds(30) });
      session.acquire(1, { name: 'bye' });
      await session.acquired(1);
      session.acquire(2, { name: 'bye' });
      await session.queued(2);
      await ctx.server.stop();
      expect(await session.outcome).toMatchObject({ code: status.UNAVAILABLE, requestEnded: true });
      ctx.caller.close();
      ({ server: ctx.server, caller: ctx.caller } = await anotherServer());
    });

    it('on shutdown hands a resumable session over (UNAVAILABLE without `lockstream-request: ended`), and another server resumes it with its lock, token and place; where the back end cannot, ends it as with --on-stop release', async () => {
      const session = openSession({ resumeGrace: seconds(30) });
      const { token } = await session.opened();
      session.acquire(1, { name: 'moving' });
      const held = await session.acquired(1);
      session.acquire(2, { name: 'moving' });
      expect(await session.queued(2)).toBe(1);
      const other = await anotherServer();
      const handsOver = ctx.server.store.takeover !== undefined;
      const leaving = ctx.server;
      // A server that hands over stops once another has taken its sessions (or their grace passed).
      const stopped = leaving.stop();
      ctx.caller.close();
      ({ server: ctx.server, caller: ctx.caller } = other);
      const outcome = await session.outcome;
      if (!handsOver) {
        expect(outcome).toMatchObject({ code: status.UNAVAILABLE, requestEnded: true });
        await stopped;
        return;
      }
      expect(outcome).toMatchObject({ code: status.UNAVAILABLE, requestEnded: false });
      const resumed = track(SessionDriver.resume(ctx.caller.client, token));
      await resumed.next(0, 'resumed');
      await stopped;
      expect(await resumed.acquired(1)).toBe(held);
      expect(await resumed.queued(2)).toBe(1);
      resumed.release(1);
      expect(await resumed.ended(1)).toEqual({ code: status.OK, message: '' });
      expect(await resumed.acquired(2)).toBeGreaterThan(held);
      resumed.release(2);
      resumed.halfClose();
      expect((await resumed.outcome).code).toBe(status.OK);
    });
  });
}
