import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LockEngine } from '../../src/server/engine/lock-engine.js';
import { Withdrawal, type AcquireRequest, type Lease } from '../../src/server/engine/lock-request.js';
import { isLockError, LockError } from '../../src/server/lock-error.js';
import { MemoryStore } from '../../src/server/stores/memory/memory-store.js';
import { joinPath } from '../../src/server/stores/store.js';
import { scaled } from '../support/timing.js';

const ROOT = '/engine-test';

function neverAborted(): AbortSignal {
  return new AbortController().signal;
}

/** A request in flight: its outcome, and every `ahead` count it was told while it waited. */
interface Pending {
  readonly lease: Promise<Lease>;
  readonly queued: number[];
  /** Resolves with the `ahead` count of the next onQueued call. */
  nextQueued(): Promise<number>;
}

describe('LockEngine over the embedded store', () => {
  let store: MemoryStore;
  let engine: LockEngine;

  const acquire = (request: Partial<AcquireRequest> & { name: string }, signal = neverAborted()): Pending => {
    const queued: number[] = [];
    let listeners: Array<(ahead: number) => void> = [];
    const lease = engine.acquire(
      { mode: 'mutex', ...request },
      {
        withdrawal: Withdrawal.following(signal),
        onQueued: (ahead) => {
          queued.push(ahead);
          const waiting = listeners;
          listeners = [];
          for (const listener of waiting) listener(ahead);
        },
      },
    );
    // Rejections are asserted by the tests that expect them.
    lease.catch(() => {});
    return {
      lease,
      queued,
      nextQueued: () => new Promise<number>((resolve) => listeners.push(resolve)),
    };
  };

  /** Starts a request and resolves once it is queued, with how many are ahead of it. */
  const queue = async (
    request: Partial<AcquireRequest> & { name: string },
    signal = neverAborted(),
  ): Promise<Pending & { ahead: number }> => {
    const pending = acquire(request, signal);
    const ahead = await Promise.race([
      pending.nextQueued(),
      pending.lease.then(() => {
        throw new Error(`"${request.name}" was granted instead of queued`);
      }),
    ]);
    return { ...pending, ahead };
  };

  const nodes = (name: string): Promise<string[]> => store.children(engine.lockPath(name));

  beforeEach(() => {
    store = new MemoryStore();
    engine = new LockEngine({
      store,
      replacement: store,
      rootPath: ROOT,
      logger: pino({ level: 'silent' }),
      instanceId: 'test',
    });
  });

  afterEach(async () => {
    await store.close();
  });

  it('keeps each lock under <root>/locks/<encoded name>', () => {
    expect(engine.lockPath('jobs/nightly')).toBe(joinPath(`${ROOT}/locks`, 'jobs%2Fnightly'));
    expect(engine.lockPath('..')).toBe(`${ROOT}/locks/%2E%2E`);
  });

  it('grants a free lock with a fencing token, and deletes its node on release', async () => {
    const lease = await acquire({ name: 'jobs/nightly' }).lease;
    expect(lease.name).toBe('jobs/nightly');
    expect(lease.mode).toBe('mutex');
    expect(lease.fencingToken).toBeGreaterThan(0n);
    expect(lease.lost.aborted).toBe(false);
    expect(await nodes('jobs/nightly')).toHaveLength(1);

    await lease.release();
    expect(await nodes('jobs/nightly')).toEqual([]);
    expect(lease.lost.aborted).toBe(false);
  });

  it('hands successive holders growing fencing tokens', async () => {
    const tokens: bigint[] = [];
    for (let i = 0; i < 4; i += 1) {
      const lease = await acquire({ name: 'tokens', mode: i % 2 ? 'write' : 'mutex' }).lease;
      tokens.push(lease.fencingToken);
      await lease.release();
    }
    for (let i = 1; i < tokens.length; i += 1) expect(tokens[i]).toBeGreaterThan(tokens[i - 1]!);
  });

  it('makes a second request wait until the holder releases, then grants it', async () => {
    const holder = await acquire({ name: 'm' }).lease;
    const waiter = await queue({ name: 'm' });
    expect(waiter.ahead).toBe(1);
    await holder.release();
    const lease = await waiter.lease;
    expect(lease.fencingToken).toBeGreaterThan(holder.fencingToken);
    await lease.release();
  });

  it('reports through onQueued how many requests are ahead, again whenever that number changes', async () => {
    const holder = await acquire({ name: 'q' }).lease;
    const first = await queue({ name: 'q' });
    const second = await queue({ name: 'q' });
    const third = await queue({ name: 'q' });
    expect([first.ahead, second.ahead, third.ahead]).toEqual([1, 2, 3]);
    const told = async (pending: Pending, ahead: number): Promise<void> => {
      while (!pending.queued.includes(ahead)) await pending.nextQueued();
    };

    // Each release leaves one fewer ahead of every waiter (holders count as ahead).
    await holder.release();
    const firstLease = await first.lease;
    await told(second, 1);
    await told(third, 2);
    await firstLease.release();
    const secondLease = await second.lease;
    await told(third, 1);
    await secondLease.release();
    await (await third.lease).release();
    expect([first.queued, second.queued, third.queued]).toEqual([[1], [2, 1], [3, 2, 1]]);
  });

  it('reports a new ahead count when a request ahead withdraws', async () => {
    const holder = await acquire({ name: 'w' }).lease;
    const controller = new AbortController();
    const leaving = await queue({ name: 'w' }, controller.signal);
    const staying = await queue({ name: 'w' });
    expect(staying.ahead).toBe(2);
    const moved = staying.nextQueued();
    controller.abort(new Error('bye'));
    await expect(leaving.lease).rejects.toThrow('bye');
    expect(await moved).toBe(1);
    expect(staying.queued).toEqual([2, 1]);
    await holder.release();
    await (await staying.lease).release();
  });

  it('lets readers share, and queues a writer behind them', async () => {
    const r1 = await acquire({ name: 'doc', mode: 'read' }).lease;
    const r2 = await acquire({ name: 'doc', mode: 'read' }).lease;
    const writer = await queue({ name: 'doc', mode: 'write' });
    expect(writer.ahead).toBe(2);
    const r3 = await queue({ name: 'doc', mode: 'read' });
    expect(r3.ahead).toBe(3);
    await r1.release();
    await r2.release();
    const w = await writer.lease;
    await w.release();
    await (await r3.lease).release();
    expect(await nodes('doc')).toEqual([]);
  });

  it("rejects with the signal's reason when aborted while waiting, and deletes its node first", async () => {
    const holder = await acquire({ name: 'a' }).lease;
    const controller = new AbortController();
    const waiter = await queue({ name: 'a' }, controller.signal);
    expect(await nodes('a')).toHaveLength(2);
    const reason = new Error('the client went away');
    controller.abort(reason);
    await expect(waiter.lease).rejects.toBe(reason);
    expect(await nodes('a')).toHaveLength(1);
    await holder.release();
    expect(await nodes('a')).toEqual([]);
  });

  it("rejects with the signal's reason at once, creating nothing, when the signal has already aborted", async () => {
    const reason = new Error('too late');
    const creates = store.stats.creates;
    await expect(
      engine.acquire(
        { name: 'early', mode: 'mutex' },
        { withdrawal: Withdrawal.following(AbortSignal.abort(reason)) },
      ),
    ).rejects.toBe(reason);
    expect(store.stats.creates).toBe(creates);
  });

  it('rejects with TIMEOUT once waitTimeoutMs has passed, and deletes its node', async () => {
    const holder = await acquire({ name: 't' }).lease;
    const waiter = await queue({ name: 't', waitTimeoutMs: 50 });
    expect(waiter.ahead).toBe(1);
    const error: unknown = await waiter.lease.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockError);
    expect(isLockError(error, 'TIMEOUT')).toBe(true);
    expect((error as LockError).message).toBe('lock "t" was not acquired within 50 ms');
    expect(await nodes('t')).toHaveLength(1);
    await holder.release();
  });

  it('does not time out a request that is granted before its waitTimeoutMs', async () => {
    const holder = await acquire({ name: 'soon' }).lease;
    const waiter = await queue({ name: 'soon', waitTimeoutMs: 60_000 });
    await holder.release();
    const lease = await waiter.lease;
    expect(lease.lost.aborted).toBe(false);
    await lease.release();
  });

  describe('try-lock (waitTimeoutMs 0)', () => {
    it('grants a free lock', async () => {
      const lease = await acquire({ name: 'try', waitTimeoutMs: 0 }).lease;
      expect(await nodes('try')).toHaveLength(1);
      await lease.release();
    });

    it('fails at once with TIMEOUT on a held lock, without queuing or leaving a node', async () => {
      const holder = await acquire({ name: 'try' }).lease;
      const attempt = acquire({ name: 'try', waitTimeoutMs: 0 });
      const error: unknown = await attempt.lease.catch((e: unknown) => e);
      expect(isLockError(error, 'TIMEOUT')).toBe(true);
      expect((error as LockError).message).toBe('lock "try" is not free (1 ahead) and wait_timeout is 0');
      expect(attempt.queued).toEqual([]);
      expect(await nodes('try')).toHaveLength(1);
      await holder.release();
    });

    it('grants a reader while only readers hold', async () => {
      const reader = await acquire({ name: 'shared', mode: 'read' }).lease;
      const tryReader = await acquire({ name: 'shared', mode: 'read', waitTimeoutMs: 0 }).lease;
      // Both hold at once: two nodes, two tokens, neither lost; a writer cannot get in.
      expect(await nodes('shared')).toHaveLength(2);
      expect(tryReader.fencingToken).not.toBe(reader.fencingToken);
      expect([reader.lost.aborted, tryReader.lost.aborted]).toEqual([false, false]);
      const writer: unknown = await acquire({ name: 'shared', mode: 'write', waitTimeoutMs: 0 }).lease.catch(
        (error: unknown) => error,
      );
      expect(isLockError(writer, 'TIMEOUT')).toBe(true);
      await tryReader.release();
      await reader.release();
      expect(await nodes('shared')).toEqual([]);
    });
  });

  describe('request validation', () => {
    it.each([-1, 0.5, 1.5, 2 ** 31, Number.NaN, Number.POSITIVE_INFINITY, -0.1])(
      'rejects waitTimeoutMs %d with INVALID_ARGUMENT, creating nothing',
      async (waitTimeoutMs) => {
        const creates = store.stats.creates;
        const error: unknown = await engine
          .acquire({ name: 'v', mode: 'mutex', waitTimeoutMs }, { withdrawal: new Withdrawal() })
          .catch((e: unknown) => e);
        expect(isLockError(error, 'INVALID_ARGUMENT')).toBe(true);
        expect((error as LockError).message).toBe(
          `invalid wait timeout ${waitTimeoutMs} ms: expected a whole number from 0 to 2147483647`,
        );
        expect(store.stats.creates).toBe(creates);
      },
    );

    it('accepts the largest waitTimeoutMs, 2^31 - 1, and waits with it rather than timing out', async () => {
      const holder = await acquire({ name: 'v' }).lease;
      // Queued behind a holder, so the wait timeout's timer is armed: a timer that overflowed
      // (Node fires those at once) would end the wait with TIMEOUT.
      const waiter = acquire({ name: 'v', waitTimeoutMs: 2 ** 31 - 1 });
      expect(await waiter.nextQueued()).toBe(1);
      await holder.release();
      const lease = await waiter.lease;
      expect(lease.fencingToken).toBeGreaterThan(holder.fencingToken);
      await lease.release();
    });

    it('rejects an invalid lock name with INVALID_ARGUMENT, creating nothing', async () => {
      const creates = store.stats.creates;
      for (const name of ['', 'x'.repeat(513), 'a\u0000b']) {
        const error: unknown = await engine
          .acquire({ name, mode: 'mutex' }, { withdrawal: new Withdrawal() })
          .catch((e: unknown) => e);
        expect(isLockError(error, 'INVALID_ARGUMENT')).toBe(true);
      }
      expect(store.stats.creates).toBe(creates);
    });
  });

  describe('leases', () => {
    it('release is idempotent: one deletion however often it is called', async () => {
      const lease = await acquire({ name: 'idem' }).lease;
      const deletes = store.stats.deletes;
      const first = lease.release();
      const second = lease.release();
      await Promise.all([first, second]);
      await lease.release();
      expect(store.stats.deletes - deletes).toBe(1);
      expect(await nodes('idem')).toEqual([]);
    });

    it('lease.lost aborts with LOCK_LOST when the store session expires', async () => {
      const lease = await acquire({ name: 'lost' }).lease;
      const aborted = new Promise<unknown>((resolve) =>
        lease.lost.addEventListener('abort', () => resolve(lease.lost.reason), { once: true }),
      );
      store.expireSession();
      const reason = await aborted;
      expect(isLockError(reason, 'LOCK_LOST')).toBe(true);
      expect(await nodes('lost')).toEqual([]);
    });

    it('release after the session was lost rejects with LOCK_LOST, naming the lock and the cause', async () => {
      const lease = await acquire({ name: 'gone' }).lease;
      store.expireSession();
      const error: unknown = await lease.release().catch((e: unknown) => e);
      expect(isLockError(error, 'LOCK_LOST')).toBe(true);
      expect((error as LockError).message).toMatch(/^lock "gone" was lost: /);
      // The loss itself, which says what ended the session.
      expect(error).toBe(lease.lost.reason);
      expect(((error as LockError).cause as Error).message).toMatch(/session ended/);
      // And stays that way.
      await expect(lease.release()).rejects.toBe(error);
    });

    it('a release that completed before the session was lost stays successful', async () => {
      const lease = await acquire({ name: 'done' }).lease;
      await lease.release();
      store.expireSession();
      await expect(lease.release()).resolves.toBeUndefined();
    });

    it('`await using` releases the lease at the end of the block', async () => {
      {
        await using lease = await acquire({ name: 'scoped' }).lease;
        expect(lease.lost.aborted).toBe(false);
        expect(await nodes('scoped')).toHaveLength(1);
      }
      expect(await nodes('scoped')).toEqual([]);
      const next = await acquire({ name: 'scoped', waitTimeoutMs: 0 }).lease;
      await next.release();
    });

    it('`await using` does not throw when the lease was already lost', async () => {
      const block = async (): Promise<void> => {
        await using lease = await acquire({ name: 'scoped-lost' }).lease;
        store.expireSession();
        expect(lease.lost.aborted).toBe(true);
      };
      await expect(block()).resolves.toBeUndefined();
    });
  });

  describe('session loss while waiting', () => {
    it('re-queues a waiter on the new session and grants it, with a larger token', async () => {
      const holder = await acquire({ name: 'requeue' }).lease;
      const waiter = await queue({ name: 'requeue' });
      expect(waiter.ahead).toBe(1);

      store.expireSession();
      expect(holder.lost.aborted).toBe(true);

      const lease = await waiter.lease;
      expect(lease.lost.aborted).toBe(false);
      expect(lease.fencingToken).toBeGreaterThan(holder.fencingToken);
      expect(await nodes('requeue')).toHaveLength(1);
      // It lives on the new session: losing that one loses it.
      store.expireSession();
      expect(lease.lost.aborted).toBe(true);
      expect(await nodes('requeue')).toEqual([]);
    });

    it('re-queues every waiter after a session loss: one is granted, the other waits for it', async () => {
      const holder = await acquire({ name: 'herd' }).lease;
      const w1 = await queue({ name: 'herd' });
      const w2 = await queue({ name: 'herd' });
      let w1Granted = false;
      let w2Granted = false;
      void w1.lease.then(() => {
        w1Granted = true;
      });
      void w2.lease.then(() => {
        w2Granted = true;
      });

      store.expireSession();
      expect(holder.lost.aborted).toBe(true);

      const granted = await Promise.race([w1.lease, w2.lease]);
      const other = w1Granted ? w2 : w1;
      expect(await nodes('herd')).toHaveLength(2);
      expect(w1Granted && w2Granted).toBe(false);
      await granted.release();
      const second = await other.lease;
      expect(second.fencingToken).toBeGreaterThan(granted.fencingToken);
      await second.release();
      expect(await nodes('herd')).toEqual([]);
    });

    it('rejects with LOCK_LOST when its queue node is deleted by someone else while it waits', async () => {
      const holder = await acquire({ name: 'vanish' }).lease;
      const waiter = await queue({ name: 'vanish' });
      const children = await nodes('vanish');
      expect(children).toHaveLength(2);
      // Delete the waiter's node (the later sequence) from outside, then free the lock.
      const [, mine] = [...children].sort((a, b) => Number(a.slice(-10)) - Number(b.slice(-10)));
      await store.delete(joinPath(engine.lockPath('vanish'), mine!));
      await holder.release();
      const error: unknown = await waiter.lease.catch((e: unknown) => e);
      expect(isLockError(error, 'LOCK_LOST')).toBe(true);
      expect(await nodes('vanish')).toEqual([]);
    });

    it('is never granted when its own node goes in the same step as its predecessor (as a closed session takes both)', async () => {
      const holder = await acquire({ name: 'both-gone' }).lease;
      const waiter = await queue({ name: 'both-gone' });
      const children = await nodes('both-gone');
      const paths = [...children]
        .sort((a, b) => Number(a.slice(-10)) - Number(b.slice(-10)))
        .map((child) => joinPath(engine.lockPath('both-gone'), child));
      // The predecessor's deletion is told first, the waiter's own right behind it.
      await store.delete(paths);
      const error: unknown = await waiter.lease.catch((e: unknown) => e);
      expect(isLockError(error, 'LOCK_LOST')).toBe(true);
      expect(holder.lost.aborted).toBe(true);
      expect(await nodes('both-gone')).toEqual([]);
    });
  });

  describe('a session in doubt', () => {
    it('tells a holder when its lock is in doubt and when it is confirmed again', async () => {
      const lease = await acquire({ name: 'doubt' }).lease;
      const seen: boolean[] = [];
      const unsubscribe = lease.onConfirmedChange((confirmed) => seen.push(confirmed));
      expect(lease.confirmed).toBe(true);
      store.setSessionConfirmed(false);
      expect(lease.confirmed).toBe(false);
      store.setSessionConfirmed(true);
      unsubscribe();
      store.setSessionConfirmed(false);
      expect(seen).toEqual([false, true]);
      expect(lease.lost.aborted).toBe(false);
      store.setSessionConfirmed(true);
      await lease.release();
    });

    it('grants nothing while the session is in doubt, and grants once it is confirmed', async () => {
      store.setSessionConfirmed(false);
      const pending = acquire({ name: 'unconfirmed' });
      let granted = false;
      void pending.lease.then(() => (granted = true));
      // The request is created and first in its queue: only the doubt holds it back.
      while ((await nodes('unconfirmed')).length === 0) await Promise.resolve();
      for (let i = 0; i < 20; i += 1) await Promise.resolve();
      expect(granted).toBe(false);
      store.setSessionConfirmed(true);
      const lease = await pending.lease;
      expect(lease.confirmed).toBe(true);
      await lease.release();
    });

    it('queues a request again when the doubt ends in a loss', async () => {
      store.setSessionConfirmed(false);
      const pending = acquire({ name: 'doubt-lost' });
      while ((await nodes('doubt-lost')).length === 0) await Promise.resolve();
      store.expireSession();
      const lease = await pending.lease;
      expect(lease.confirmed).toBe(true);
      expect(await nodes('doubt-lost')).toHaveLength(1);
      await lease.release();
    });
  });

  it(
    'queues 10,000 waiters on one lock and grants them in order, each woken exactly once',
    async () => {
      const holder = await acquire({ name: 'ten-thousand' }).lease;
      const waiters = Array.from({ length: 10_000 }, () => acquire({ name: 'ten-thousand' }));
      await Promise.all(waiters.map((w) => (w.queued.length > 0 ? Promise.resolve(0) : w.nextQueued())));
      const before = { ...store.stats };
      await holder.release();
      let previous = holder.fencingToken;
      for (const waiter of waiters) {
        const lease = await waiter.lease;
        expect(lease.fencingToken).toBeGreaterThan(previous);
        previous = lease.fencingToken;
        await lease.release();
      }
      expect(store.stats.waitersWoken - before.waitersWoken).toBe(10_000);
      expect(await nodes('ten-thousand')).toEqual([]);
    },
    scaled(120_000),
  );
});
