import * as grpc from '@grpc/grpc-js';
import { pino } from 'pino';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AcquireResponse, SessionRequest } from '../../src/gen/lockstream/v1/lockstream.js';
import { DEFAULTS, loadConfig } from '../../src/server/config.js';
import { startServer, type RunningServer } from '../../src/server/main.js';
import { RECEIVE_MARGIN_BYTES, largestLegalRequests } from '../../src/server/largest-request.js';
import { AcquireStream, LockCaller, type RequestStream, type CallOutcome } from '../support/lock-caller.js';
import { startServerProcess } from '../support/server-process.js';
import { SessionDriver } from '../support/session-driver.js';
import { scaled } from '../support/timing.js';

/** Bad input and abuse: each gets a precise status, and nobody else's lock is harmed. */
describe('limits and abuse', () => {
  const cleanups: Array<() => Promise<unknown> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function serve(args: string[]): Promise<{ server: RunningServer; caller: () => LockCaller }> {
    const server = await startServer(loadConfig({}, ['--port', '0', ...args]), pino({ level: 'silent' }));
    cleanups.push(() => server.stop());
    // Each caller gets a connection of its own: grpc-js otherwise shares one between clients
    // of the same address, and per-connection limits would apply to all of them together.
    const caller = (): LockCaller => {
      const c = new LockCaller(`127.0.0.1:${server.port}`, { 'grpc.use_local_subchannel_pool': 1 });
      cleanups.push(() => c.close());
      return c;
    };
    return { server, caller };
  }

  it('refuses a request that finds more waiters ahead than the server allows, with RESOURCE_EXHAUSTED', async () => {
    const { caller } = await serve(['--max-waiters-per-lock', '3']);
    const c = caller();
    const holder = c.open({ name: 'crowded' });
    await holder.acquired();
    const waiters: RequestStream[] = [];
    for (let i = 1; i <= 3; i += 1) {
      const waiter = c.open({ name: 'crowded' });
      expect(await waiter.queued()).toBe(i);
      waiters.push(waiter);
    }
    const refused = await c.open({ name: 'crowded' }).outcome;
    expect(refused).toMatchObject({
      code: grpc.status.RESOURCE_EXHAUSTED,
      details: 'lock "crowded" has 4 requests ahead; this server allows 3',
    });
    // The refused request left nothing behind: the queue is still holder + 3.
    waiters[2]!.halfClose();
    expect((await waiters[2]!.outcome).code).toBe(grpc.status.CANCELLED);
    expect(await c.open({ name: 'crowded' }).queued()).toBe(3);
    expect(holder.isAcquired).toBe(true);
  });

  it('ends an Acquire call whose start is over the size limit with RESOURCE_EXHAUSTED naming the limit, and serves the next', async () => {
    const { caller } = await serve(['--max-message-bytes', '1024']);
    const c = caller();
    const bystander = c.open({ name: 'bystander' });
    await bystander.acquired();
    const huge = await c.open({ name: 'n'.repeat(4000) }).outcome;
    expect(huge).toMatchObject({
      code: grpc.status.RESOURCE_EXHAUSTED,
      details: 'the `start` message is 4008 bytes; this server accepts lock requests of at most 1024 bytes',
      requestEnded: true,
    });
    // The largest single lock without a value (512-byte name, 256-byte owner) fits under the smallest limit.
    const largest = c.open({ name: 'é'.repeat(256), owner: 'o'.repeat(256) });
    await largest.acquired();
    await largest.release();
    expect(bystander.isAcquired).toBe(true);
    expect((await bystander.release()).code).toBe(grpc.status.OK);
  });

  it('under a limit below the default, refuses a legal Session request too large for it alone', async () => {
    const { server } = await serve(['--max-message-bytes', '1024']);
    const c = new LockCaller(`127.0.0.1:${server.port}`);
    cleanups.push(() => c.close());
    const session = SessionDriver.open(c.client);
    session.acquire(1, { name: 'small' });
    const token = await session.acquired(1);
    // A legal value (at most 1024 bytes), in a message over this server's limit.
    session.acquire(2, { name: 'published', value: Buffer.alloc(1024) });
    expect(await session.ended(2)).toEqual({
      code: grpc.status.RESOURCE_EXHAUSTED,
      message: 'the `acquire` message is 1045 bytes; this server accepts lock requests of at most 1024 bytes',
    });
    expect(await c.checkToken('small', token)).toBe(true);
    session.halfClose();
    expect((await session.outcome).code).toBe(grpc.status.OK);
  });

  describe('against a server in its own process', () => {
    let address: string;
    const caller = (): LockCaller => {
      const c = new LockCaller(address);
      cleanups.push(() => c.close());
      return c;
    };
    beforeAll(async () => {
      const server = await startServerProcess([]);
      address = server.address;
      return async () => void (await server.kill('SIGTERM'));
    });

    it('grants the largest legal request (16 semaphores of 512-byte names, owner, value) on each RPC with default options', async () => {
      const largest = largestLegalRequests();
      // Far over the 4 KiB the default once was.
      expect(SessionRequest.encode(largest.session).finish().length).toBeGreaterThan(9_000);

      const session = SessionDriver.open(caller().client);
      session.send(largest.session.kind);
      const id = 2 ** 32 - 1;
      // Granted, or refused alone (which would not end the session).
      const { message } = await Promise.race([session.next(id, 'acquired'), session.next(id, 'ended')]);
      expect(message.kind?.$case === 'acquired' ? message.kind.value.tokens : message.kind).toHaveLength(16);
      session.release(id);
      expect(await session.ended(id)).toEqual({ code: grpc.status.OK, message: '' });

      const stream = new AcquireStream(caller().client, largest.acquire);
      await stream.acquired();
      expect((await stream.release()).code).toBe(grpc.status.OK);
      session.halfClose();
      expect((await session.outcome).code).toBe(grpc.status.OK);
    });

    it('ends a Session request over the size limit alone: the held lock stays held with its token until released', async () => {
      const c = caller();
      const session = SessionDriver.open(c.client);
      session.acquire(1, { name: 'kept' });
      const token = await session.acquired(1);

      // A 10 KiB name: the message is over the limit (a name of 10,000 bytes would be under it,
      // and refused for its length as INVALID_ARGUMENT).
      session.acquire(2, { name: 'n'.repeat(10_240) });
      expect(await session.ended(2)).toEqual({
        code: grpc.status.RESOURCE_EXHAUSTED,
        message: `the \`acquire\` message is 10250 bytes; this server accepts lock requests of at most ${DEFAULTS.maxMessageBytes} bytes`,
      });
      session.acquire(3, { name: 'valued', value: Buffer.alloc(5 * 1024) });
      expect(await session.ended(3)).toEqual({
        code: grpc.status.INVALID_ARGUMENT,
        message: 'value is 5120 bytes; the limit is 1024',
      });
      // The session goes on: a new request on it is served, and the held lock is still its own.
      session.acquire(4, { name: 'after' });
      await session.acquired(4);
      expect(await c.checkToken('kept', token)).toBe(true);
      expect(session.kinds(1)).toEqual(['acquired']);
      session.release(1);
      await session.next(1, 'released');
      expect(await session.ended(1)).toEqual({ code: grpc.status.OK, message: '' });
      expect(await c.checkToken('kept', token)).toBe(false);
      session.halfClose();
      expect((await session.outcome).code).toBe(grpc.status.OK);
    });

    it("ends the whole call for a message beyond gRPC's own limit (the request limit + 64 KiB)", async () => {
      const c = caller();
      const session = SessionDriver.open(c.client);
      session.acquire(1, { name: 'held' });
      const token = await session.acquired(1);
      session.acquire(2, { name: 'n'.repeat(DEFAULTS.maxMessageBytes + RECEIVE_MARGIN_BYTES) });
      expect(await session.outcome).toMatchObject({
        code: grpc.status.RESOURCE_EXHAUSTED,
        details: expect.stringMatching(/^Received message larger than max/),
      });
      // With the session went its lock (it asked for no resume grace): another client gets it.
      const next = caller().open({ name: 'held' });
      expect(await next.acquired()).toBeGreaterThan(token);
      await next.release();
    });
  });

  it('lets one connection have only so many Acquire calls open; the next waits for a free slot', async () => {
    const { caller } = await serve(['--max-streams-per-connection', '5']);
    const c = caller();
    await c.open({ name: 'warm-up', waitTimeout: { seconds: 0n, nanos: 0 } }).release();
    const holders = Array.from({ length: 5 }, (_, i) => c.open({ name: `slot-${i}` }));
    await Promise.all(holders.map((h) => h.acquired()));
    const sixth = c.open({ name: 'slot-6' });
    await holders[0]!.release();
    // A free lock, yet granted only after a slot was freed on the connection.
    expect(await sixth.receipt('acquired')).toBeGreaterThan(await holders[0]!.receipt('released'));
    // Another connection is not affected by this one's limit.
    const other = caller().open({ name: 'other-connection' });
    await other.acquired();
  });

  it('rejects a name that is not valid UTF-8 with INVALID_ARGUMENT', async () => {
    const { server } = await serve([]);
    const client = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
    cleanups.push(() => client.close());
    // AcquireRequest{start: AcquireStart{name: 0xFF 0xFE (not UTF-8), mode: MUTEX}}, encoded by hand.
    const raw = Buffer.from([0x0a, 0x06, 0x0a, 0x02, 0xff, 0xfe, 0x10, 0x01]);
    const call = client.makeBidiStreamRequest(
      '/lockstream.v1.LockService/Acquire',
      (message: Buffer) => message,
      (bytes: Buffer) => AcquireResponse.decode(bytes),
    );
    const outcome = new Promise<CallOutcome>((resolve) => call.on('status', resolve));
    call.on('error', () => {});
    call.write(raw);
    expect(await outcome).toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: expect.stringMatching(/invalid UTF-8/),
    });
  });

  it(
    'keeps a WatchLock reader that stops reading to one buffer: it gets the newest state when it reads again',
    async () => {
      const { caller } = await serve([]);
      const slow = caller().watch('busy');
      await slow.until((state) => state.waiters.length === 0);
      slow.pause();
      // Twenty waiters with long owners make every state a few KiB, so the stream backs up fast.
      const c = caller();
      const holder = c.open({ name: 'busy', owner: 'holder' });
      await holder.acquired();
      for (let i = 0; i < 20; i += 1)
        await c.open({ name: 'busy', owner: `${i}-${'w'.repeat(250)}` }).queued();
      // Churn at the back of the queue: 300 requests that queue and withdraw, 600 changes.
      const changes = 600;
      for (let i = 0; i < changes / 2; i += 1) {
        const churn = c.open({ name: 'busy', owner: 'churn' });
        await churn.queued();
        churn.halfClose();
        await churn.outcome;
      }
      // Meanwhile the server serves everyone else.
      const other = c.open({ name: 'elsewhere', waitTimeout: { seconds: 0n, nanos: 0 } });
      await other.acquired();
      await other.release();
      await c.open({ name: 'busy', owner: 'last' }).queued();

      const before = slow.states.length;
      slow.resume();
      await slow.until((state) => state.waiters.some((w) => w.owner === 'last'));
      const delivered = slow.states.length - before;
      // What the stream's buffers held when it backed up, then the newest state: not 600 states.
      expect(delivered).toBeLessThan(changes / 4);
      expect(
        slow.states
          .at(-1)!
          .waiters.map((w) => w.owner)
          .at(-1),
      ).toBe('last');
    },
    scaled(60_000),
  );

  it(
    'queues 2,000 waiters through gRPC and grants them in order, waking each exactly once',
    async () => {
      const { server, caller } = await serve([]);
      // Spread over connections, 200 calls each (10,000 are queued at the engine level in
      // test/unit/lock-engine.test.ts, without gRPC around them).
      const callers = Array.from({ length: 11 }, () => caller());
      const holder = callers[0]!.open({ name: 'ten-thousand' });
      await holder.acquired();
      const waiters = Array.from({ length: 2_000 }, (_, i) =>
        callers[1 + (i % 10)]!.open({ name: 'ten-thousand' }),
      );
      // Requests on different connections reach the server in any order: each one's first
      // `queued` says where it stands, and those places must be exactly 1..2000.
      const places = await Promise.all(waiters.map((w) => w.queued()));
      expect([...places].sort((a, b) => a - b)).toEqual(waiters.map((_, i) => i + 1));
      const inQueueOrder = waiters
        .map((waiter, i) => ({ waiter, place: places[i]! }))
        .sort((a, b) => a.place - b.place);
      const before = { ...server.store.stats };
      await holder.release();
      let previous = 0n;
      for (const { waiter } of inQueueOrder) {
        const token = await waiter.acquired();
        // Nobody behind it holds the lock yet: grants follow the queue.
        expect(token).toBeGreaterThan(previous);
        previous = token;
        await waiter.release();
      }
      const after = server.store.stats;
      expect(inQueueOrder.every(({ waiter }) => waiter.isAcquired)).toBe(true);
      expect(after.waitersWoken - before.waitersWoken).toBe(2_000);
    },
    scaled(120_000),
  );
});
