import { status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import type { AcquireStart, LockTarget } from '../../src/gen/lockstream/v1/lockstream.js';
import { LockMode, type LockRpc, nextReceipt, type RequestStream } from '../support/lock-caller.js';
import { mulberry32 } from '../support/random.js';
import { useConformanceServer, type BackendUnderTest } from './conformance-server.js';

/**
 * Multi-locks (AcquireStart.locks), on both RPCs: all locks or none, one token per lock, one
 * wait_timeout and one release for the set; clients taking random overlapping sets never
 * deadlock and never hold a lock against its mode; malformed sets are refused without
 * queuing anything.
 */
export function describeMultiLockConformance(backendName: string, backend: BackendUnderTest): void {
  for (const rpc of ['acquire', 'session'] as const) describeOver(backendName, backend, rpc);
}

const target = (name: string, mode = LockMode.MUTEX): LockTarget => ({
  name,
  mode,
  limit: 0,
  weight: undefined,
});

function acquiredTokens(stream: RequestStream): Array<[string, bigint]> {
  const message = stream.messages.find((m) => m.kind?.$case === 'acquired');
  if (message?.kind?.$case !== 'acquired') throw new Error('not acquired');
  return message.kind.value.tokens.map((token) => [token.name, token.fencingToken]);
}

/** One lock held by one set, as its client saw it. */
interface Hold {
  readonly set: number;
  readonly lock: string;
  readonly exclusive: boolean;
  readonly start: number;
  readonly end: number;
}

function describeOver(backendName: string, backend: BackendUnderTest, rpc: LockRpc): void {
  describe(`multi-locks on the ${backendName} back end, over ${rpc === 'acquire' ? 'Acquire' : 'Session'}`, () => {
    const { ctx, open } = useConformanceServer(backend, rpc);
    const all = (locks: LockTarget[], more: Partial<AcquireStart> = {}): RequestStream =>
      open({ mode: LockMode.UNSPECIFIED, locks, ...more });
    const holders = async (name: string): Promise<string[]> =>
      (await ctx.caller.describe(name)).holders.map((holder) => holder.owner);

    if (backend.replaces === false) {
      it('refuses a multi-lock with UNIMPLEMENTED where the back end cannot create nodes in one step', async () => {
        const set = all([target('m/a'), target('m/b')]);
        expect(await set.outcome).toMatchObject({
          code: status.UNIMPLEMENTED,
          details: expect.stringMatching(/multi.*--zookeeper-client protocol/),
        });
        expect(await holders('m/a')).toEqual([]);
      });
      return;
    }

    it('grants every lock of the set together, with a token per lock, once the last one is free', async () => {
      const first = open({ name: 'set/x', owner: 'single-x' });
      const tokenX = await first.acquired();
      const set = all([target('set/x'), target('set/y', LockMode.WRITE)], { owner: 'set' });
      await set.queued();
      // y is free, but the set waits for x; a reader of y queued behind the set waits for it.
      const readerY = open({ name: 'set/y', mode: LockMode.READ, owner: 'reader-y' });
      await readerY.queued();
      expect(set.isAcquired || readerY.isAcquired).toBe(false);

      await first.release();
      const token = await set.acquired();
      const tokens = acquiredTokens(set);
      expect(tokens.map(([name]) => name)).toEqual(['set/x', 'set/y']);
      expect(token).toBe(tokens[0]![1]);
      for (const [, each] of tokens) expect(each).toBeGreaterThan(tokenX);
      for (const [name, each] of tokens) expect(await ctx.caller.checkToken(name, each)).toBe(true);
      expect(await holders('set/x')).toEqual(['set']);
      expect(await holders('set/y')).toEqual(['set']);
      expect(readerY.isAcquired).toBe(false);

      // One release for the set: both locks go.
      expect((await set.release()).code).toBe(status.OK);
      expect(await readerY.acquired()).toBeGreaterThan(tokens[1]![1]);
      expect(await holders('set/x')).toEqual([]);
      await readerY.release();
    });

    it('holds a lock whose target leaves mode unset as a MUTEX: a reader of it waits for the set', async () => {
      const set = all([target('unset/a', LockMode.UNSPECIFIED), target('unset/b')], { owner: 'set' });
      await set.acquired();
      const reader = open({ name: 'unset/a', mode: LockMode.READ });
      expect(await reader.queued()).toBe(1);
      await set.release();
      await reader.acquired();
      await reader.release();
    });

    it('gives up the whole set at its one wait_timeout, leaving nothing queued on any lock', async () => {
      const blocker = open({ name: 'timed/b', owner: 'blocker' });
      await blocker.acquired();
      const set = all([target('timed/a'), target('timed/b')], {
        waitTimeout: { seconds: 0n, nanos: 200_000_000 },
      });
      expect(await set.outcome).toMatchObject({
        code: status.DEADLINE_EXCEEDED,
        details: expect.stringMatching(/locks "timed\/a", "timed\/b" were not acquired within 200 ms/),
      });
      const tryAll = all([target('timed/a'), target('timed/b')], { waitTimeout: { seconds: 0n, nanos: 0 } });
      expect((await tryAll.outcome).code).toBe(status.DEADLINE_EXCEEDED);
      for (const name of ['timed/a', 'timed/b'])
        expect((await ctx.caller.describe(name)).waiters).toEqual([]);
      expect(await holders('timed/a')).toEqual([]);
      await blocker.release();
    });

    it('never deadlocks and keeps every lock exclusive while 12 clients take random overlapping sets in random orders', async () => {
      const names = ['r/0', 'r/1', 'r/2', 'r/3', 'r/4'];
      const holds: Hold[] = [];
      let sets = 0;
      const client = async (id: number): Promise<void> => {
        const random = mulberry32(31_337 * (id + 1));
        for (let round = 0; round < 5; round += 1) {
          const shuffled = [...names].sort(() => random() - 0.5);
          const chosen = shuffled.slice(0, 2 + Math.floor(random() * 3));
          const modes = chosen.map(() =>
            random() < 0.4 ? LockMode.READ : random() < 0.5 ? LockMode.WRITE : LockMode.MUTEX,
          );
          const set = (sets += 1);
          const stream = all(chosen.map((name, i) => target(name, modes[i])));
          await stream.acquired();
          const start = await stream.receipt('acquired');
          await new Promise((resolve) => setImmediate(resolve));
          const end = nextReceipt();
          chosen.forEach((lock, i) =>
            holds.push({ set, lock, exclusive: modes[i] !== LockMode.READ, start, end }),
          );
          expect((await stream.release()).code).toBe(status.OK);
        }
      };
      await Promise.all(Array.from({ length: 12 }, (_, id) => client(id)));
      expect(new Set(holds.map((hold) => hold.set)).size).toBe(60);
      for (const a of holds) {
        for (const b of holds) {
          if (a.set >= b.set || a.lock !== b.lock || a.end <= b.start || b.end <= a.start) continue;
          if (a.exclusive || b.exclusive)
            throw new Error(`sets ${a.set} and ${b.set} overlapped on ${a.lock}`);
        }
      }
    });

    it('ends the set as one when its store session is lost: every lock freed, lost reported once', async () => {
      const set = all([target('lost/a'), target('lost/b'), target('lost/c', LockMode.READ)]);
      await set.acquired();
      const waiter = open({ name: 'lost/b' });
      await waiter.queued();
      await backend.expireSession(ctx.server);
      expect(await set.outcome).toMatchObject({ code: status.ABORTED });
      await waiter.acquired();
      expect(await holders('lost/a')).toEqual([]);
      await waiter.release();
    });

    it('loses the whole set to a forced revocation of one of its locks, freeing the others only after telling the holder', async () => {
      const set = all([target('revoked/a'), target('revoked/b')]);
      await set.acquired();
      const onOther = open({ name: 'revoked/b' });
      await onOther.queued();
      expect(await ctx.caller.revoke('revoked/a', 'maintenance', 0.05)).toBe(1);
      await set.receipt('revokeRequested');
      expect(await set.outcome).toMatchObject({
        code: status.ABORTED,
        details: expect.stringMatching(/revoked.*maintenance/),
      });
      const told = await set.outcomeReceipt();
      expect(await onOther.receipt('acquired')).toBeGreaterThan(told);
      await onOther.release();
    });

    it.each<[string, Partial<AcquireStart>, RegExp]>([
      ['a single lock', { locks: [target('one')] }, /locks names 1 lock: a multi-lock takes 2 to 16/],
      [
        'seventeen locks',
        { locks: Array.from({ length: 17 }, (_, i) => target(`many/${i}`)) },
        /locks names 17 locks: a multi-lock takes 2 to 16/,
      ],
      [
        'a lock named twice',
        { locks: [target('twice'), target('other'), target('twice')] },
        /locks\[2\]: "twice" is named twice/,
      ],
      ['a name beside `locks`', { name: 'also', locks: [target('a'), target('b')] }, /leave those unset/],
      ['an empty name', { locks: [target('a'), target('')] }, /locks\[1\]: invalid lock name: name is empty/],
      [
        'a lock of an unknown mode',
        { locks: [target('a'), target('b', 9 as LockMode)] },
        /locks\[1\]\.mode 9 is not a known LockMode/,
      ],
      [
        'a semaphore without a limit',
        { locks: [target('a'), target('b', LockMode.SEMAPHORE)] },
        /locks\[1\]: limit is required in SEMAPHORE mode/,
      ],
    ])(
      'refuses %s with INVALID_ARGUMENT naming the field, queuing nothing',
      async (_case, start, message) => {
        const set = open({ mode: LockMode.UNSPECIFIED, ...start });
        expect(await set.outcome).toMatchObject({
          code: status.INVALID_ARGUMENT,
          details: expect.stringMatching(message),
        });
        for (const name of ['a', 'b', 'twice', 'other']) {
          const state = await ctx.caller.describe(name);
          expect([...state.holders, ...state.waiters]).toEqual([]);
        }
      },
    );
  });
}
