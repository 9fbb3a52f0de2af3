import { status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import type { AcquireStart, DescribeLockResponse } from '../../src/gen/lockstream/v1/lockstream.js';
import { LockMode, type LockRpc, nextReceipt, type RequestStream } from '../support/lock-caller.js';
import { mulberry32 } from '../support/random.js';
import { useConformanceServer, type BackendUnderTest } from './conformance-server.js';

/**
 * Semaphores (LOCK_MODE_SEMAPHORE with a limit and weights), on both RPCs: grants never exceed
 * the limit and stay in queue order, a heavy waiter is not starved, a release wakes one waiter
 * through the store and the grants it allows pass down the queue, and requests that disagree
 * with the queue or are malformed are refused without queuing anything.
 */
export function describeSemaphoreConformance(backendName: string, backend: BackendUnderTest): void {
  for (const rpc of ['acquire', 'session'] as const) describeOver(backendName, backend, rpc);
}

/** Each request's [owner, weight], holders then waiters, with the capacity in use. */
function shape(state: DescribeLockResponse): unknown {
  const row = (info: DescribeLockResponse['holders'][number]): unknown => [info.owner, info.weight];
  return {
    limit: state.limit,
    usedWeight: state.usedWeight,
    holders: state.holders.map(row),
    waiters: state.waiters.map(row),
  };
}

/** One hold as the client saw it: from its grant's arrival to when it asked to release. */
interface Hold {
  readonly weight: number;
  readonly token: bigint;
  readonly start: number;
  readonly end: number;
}

const json = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? `${v}` : v));

function describeOver(backendName: string, backend: BackendUnderTest, rpc: LockRpc): void {
  describe(`semaphores on the ${backendName} back end, over ${rpc === 'acquire' ? 'Acquire' : 'Session'}`, () => {
    const { ctx, open } = useConformanceServer(backend, rpc);
    const semaphore = (name: string, limit: number, weight: number, owner = ''): RequestStream =>
      open({ name, mode: LockMode.SEMAPHORE, limit, weight, owner });

    it('grants as many requests as their weights fit the limit, in queue order, each with its own token; DescribeLock and WatchLock show the limit and the weight in use', async () => {
      const watch = ctx.caller.watch('pool');
      const a = semaphore('pool', 3, 2, 'a');
      const tokenA = await a.acquired();
      const b = semaphore('pool', 3, 2, 'b');
      await b.queued();
      // c would fit beside a, but b waits ahead of it: a light request never overtakes.
      const c = semaphore('pool', 3, 1, 'c');
      expect(await c.queued()).toBe(2);
      expect(shape(await ctx.caller.describe('pool'))).toEqual({
        limit: 3,
        usedWeight: 2,
        holders: [['a', 2]],
        waiters: [
          ['b', 2],
          ['c', 1],
        ],
      });
      await watch.until((state) => state.usedWeight === 2 && state.waiters.length === 2);
      expect(b.isAcquired || c.isAcquired).toBe(false);

      await a.release();
      const [tokenB, tokenC] = await Promise.all([b.acquired(), c.acquired()]);
      expect(tokenB).toBeGreaterThan(tokenA);
      expect(tokenC).toBeGreaterThan(tokenB);
      expect(shape(await ctx.caller.describe('pool'))).toEqual({
        limit: 3,
        usedWeight: 3,
        holders: [
          ['b', 2],
          ['c', 1],
        ],
        waiters: [],
      });
      for (const token of [tokenB, tokenC]) expect(await ctx.caller.checkToken('pool', token)).toBe(true);
      expect(await ctx.caller.checkToken('pool', tokenA)).toBe(false);
      const listed = (await ctx.caller.list({ prefix: 'pool' })).locks;
      expect(listed).toMatchObject([
        { name: 'pool', holders: 2, waiters: 0, heldMode: LockMode.SEMAPHORE, limit: 3, usedWeight: 3 },
      ]);
      await watch.until((state) => state.usedWeight === 3 && state.holders.length === 2);
      watch.cancel();
      await b.release();
      await c.release();
    });

    it('does not starve a heavy waiter: light requests behind it wait until it has had the lock', async () => {
      const light = [1, 2, 3].map((i) => semaphore('heavy', 4, 1, `light-${i}`));
      await Promise.all(light.map((s) => s.acquired()));
      const heavy = semaphore('heavy', 4, 4, 'heavy');
      await heavy.queued();
      const later = [1, 2, 3].map((i) => semaphore('heavy', 4, 1, `later-${i}`));
      await Promise.all(later.map((s) => s.queued()));
      for (const holder of light) await holder.release();
      await heavy.acquired();
      expect(later.some((s) => s.isAcquired)).toBe(false);
      expect(shape(await ctx.caller.describe('heavy'))).toMatchObject({
        usedWeight: 4,
        holders: [['heavy', 4]],
      });
      await heavy.release();
      await Promise.all(later.map((s) => s.acquired()));
      for (const holder of later) await holder.release();
    });

    it('wakes one waiter per release through the store; the grants that release allows pass down the queue', async () => {
      const big = semaphore('wake', 4, 3, 'big');
      await big.acquired();
      const small = semaphore('wake', 4, 1, 'small');
      await small.acquired();
      const waiters = (
        [
          ['w1', 1],
          ['w2', 2],
          ['w3', 1],
          ['w4', 1],
        ] as const
      ).map(([owner, weight]) => semaphore('wake', 4, weight, owner));
      for (const waiter of waiters) await waiter.queued();
      const [w1, w2, w3, w4] = waiters as [RequestStream, RequestStream, RequestStream, RequestStream];

      const before = ctx.server.store.stats.waitersWoken;
      await big.release();
      // 3 freed: w1 and w2 fit (1 + 2 beside small's 1); w3 does not.
      await Promise.all([w1.acquired(), w2.acquired()]);
      expect(ctx.server.store.stats.waitersWoken - before).toBe(1);
      expect(shape(await ctx.caller.describe('wake'))).toMatchObject({
        usedWeight: 4,
        waiters: [
          ['w3', 1],
          ['w4', 1],
        ],
      });
      expect(w3.isAcquired || w4.isAcquired).toBe(false);

      const beforeSmall = ctx.server.store.stats.waitersWoken;
      await small.release();
      await w3.acquired();
      expect(ctx.server.store.stats.waitersWoken - beforeSmall).toBe(1);
      expect(w4.isAcquired).toBe(false);
      await w1.release();
      await w4.acquired();
      for (const holder of [w2, w3, w4]) await holder.release();
    });

    it('never exceeds the limit and keeps queue order, with random weights, tries and cancellations', async () => {
      const limit = 5;
      const holds: Hold[] = [];
      const client = async (id: number): Promise<void> => {
        const random = mulberry32(7919 * (id + 1));
        const pick = (from: number, to: number): number => from + Math.floor(random() * (to - from + 1));
        for (let round = 0; round < 6; round += 1) {
          const weight = pick(1, 3);
          const fate = pick(0, 5); // 0: a try, 1: cancelled while queued, else: waits
          const stream = open({
            name: 'random',
            mode: LockMode.SEMAPHORE,
            limit,
            weight,
            owner: `client-${id}`,
            ...(fate === 0 ? { waitTimeout: { seconds: 0n, nanos: 0 } } : {}),
          });
          if (fate === 1) {
            const first = await Promise.race([stream.queued().then(() => 'queued'), stream.acquired()]);
            if (first === 'queued') {
              stream.cancel();
              await stream.outcome;
              continue;
            }
          }
          let token: bigint;
          try {
            token = await stream.acquired();
          } catch {
            // A try that found the lock busy.
            expect(fate).toBe(0);
            expect((await stream.outcome).code).toBe(status.DEADLINE_EXCEEDED);
            continue;
          }
          const start = await stream.receipt('acquired');
          await new Promise((resolve) => setImmediate(resolve));
          holds.push({ weight, token, start, end: nextReceipt() });
          expect((await stream.release()).code).toBe(status.OK);
        }
      };
      await Promise.all(Array.from({ length: 8 }, (_, id) => client(id)));
      expect(holds.length).toBeGreaterThan(8);
      for (const hold of holds) {
        // What the client saw running when `hold` began: each hold was seen from its grant's
        // arrival to its release, so what it saw is within what the server had granted.
        const running = holds.filter((other) => other.start <= hold.start && hold.start < other.end);
        const used = running.reduce((sum, other) => sum + other.weight, 0);
        if (used > limit) throw new Error(`over the limit at ${hold.start}: ${json(running)}`);
        // Queue order: an earlier request (a smaller token) granted after this one began must
        // have fitted beside what was running then; had it not, this one overtook it.
        const overtaken = holds.find(
          (earlier) =>
            earlier.token < hold.token && earlier.start > hold.start && used + earlier.weight > limit,
        );
        if (overtaken) throw new Error(`${json(hold)} overtook ${json(overtaken)} beside ${json(running)}`);
      }
    });

    it('refuses a request that disagrees with the queue (another limit, or a lock mode) with FAILED_PRECONDITION naming both, queuing nothing', async () => {
      const holder = semaphore('shared', 3, 1, 'holder');
      await holder.acquired();
      const otherLimit = semaphore('shared', 5, 1);
      expect(await otherLimit.outcome).toMatchObject({
        code: status.FAILED_PRECONDITION,
        details: expect.stringMatching(/"shared".*a semaphore of limit 3.*a semaphore of limit 5/),
      });
      const mutex = open({ name: 'shared', mode: LockMode.MUTEX });
      expect(await mutex.outcome).toMatchObject({
        code: status.FAILED_PRECONDITION,
        details: expect.stringMatching(/a semaphore of limit 3.*MUTEX mode/),
      });
      const writer = open({ name: 'plain', mode: LockMode.WRITE });
      await writer.acquired();
      const onLock = semaphore('plain', 2, 1);
      expect(await onLock.outcome).toMatchObject({
        code: status.FAILED_PRECONDITION,
        details: expect.stringMatching(/WRITE mode.*a semaphore of limit 2/),
      });
      expect(shape(await ctx.caller.describe('shared'))).toEqual({
        limit: 3,
        usedWeight: 1,
        holders: [['holder', 1]],
        waiters: [],
      });
      expect((await ctx.caller.describe('plain')).waiters).toEqual([]);
      await holder.release();
      await writer.release();
      // Once the queue is empty, the next request sets the limit again.
      const fresh = semaphore('shared', 5, 5);
      await fresh.acquired();
      await fresh.release();
    });

    it.each<[string, Partial<AcquireStart>, RegExp]>([
      ['no limit', { mode: LockMode.SEMAPHORE }, /limit is required in SEMAPHORE mode/],
      ['a negative limit', { mode: LockMode.SEMAPHORE, limit: -3 }, /limit -3 is out of range/],
      [
        'an absurd limit',
        { mode: LockMode.SEMAPHORE, limit: 2_000_000_000 },
        /limit 2000000000 is out of range: expected 1 to 1000000/,
      ],
      ['a zero weight', { mode: LockMode.SEMAPHORE, limit: 3, weight: 0 }, /weight 0 is out of range/],
      ['a negative weight', { mode: LockMode.SEMAPHORE, limit: 3, weight: -1 }, /weight -1 is out of range/],
      [
        'a weight above the limit',
        { mode: LockMode.SEMAPHORE, limit: 3, weight: 4 },
        /weight 4 is more than the limit 3/,
      ],
      [
        'a limit on a MUTEX request',
        { mode: LockMode.MUTEX, limit: 3 },
        /limit applies to SEMAPHORE mode only; this request asks for MUTEX/,
      ],
      [
        'a weight on a READ request',
        { mode: LockMode.READ, weight: 1 },
        /weight applies to SEMAPHORE mode only; this request asks for READ/,
      ],
    ])(
      'refuses %s with INVALID_ARGUMENT naming the field, queuing nothing',
      async (_case, start, message) => {
        const stream = open({ name: 'bad', ...start });
        expect(await stream.outcome).toMatchObject({
          code: status.INVALID_ARGUMENT,
          details: expect.stringMatching(message),
        });
        expect(shape(await ctx.caller.describe('bad'))).toEqual({
          limit: 0,
          usedWeight: 0,
          holders: [],
          waiters: [],
        });
      },
    );
  });
}
