import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LockEngine } from '../../src/server/engine/lock-engine.js';
import { Withdrawal, type AcquireRequest, type Lease } from '../../src/server/engine/lock-request.js';
import { isLockError } from '../../src/server/lock-error.js';
import type { CoordinationStore } from '../../src/server/stores/store.js';

/** An engine under test on one store, with its root path of its own. */
export interface EngineUnderTest {
  readonly engine: LockEngine;
  readonly store: CoordinationStore;
  /** Ends the store's session as an expiry would; resolves once the store has noticed. */
  readonly expireSession: () => Promise<void>;
  /** Closes the store (and whatever else makeEngine opened). */
  readonly close: () => Promise<void>;
}

/** What happened to a request, in the order it happened. */
interface HistoryEntry {
  readonly who: string;
  readonly what: 'held' | 'released' | 'lost';
  readonly token: bigint;
}

/** A request in flight: its outcome, and the `ahead` counts it was told while it waited. */
interface Pending {
  readonly who: string;
  readonly lease: Promise<Lease>;
  readonly withdrawal: Withdrawal;
  /** Resolves once the request has been told that `ahead` requests are ahead of it (at once if it was last told so). */
  untilQueued(ahead: number): Promise<void>;
  /** Whether the lease has been handed out. */
  readonly granted: boolean;
}

/**
 * The lock engine's grant behaviour, written once and run in-process against every store
 * (test/unit/engine-contract.test.ts on the memory store, test/integration/zookeeper-engine.test.ts
 * on ZooKeeper), below gRPC: FIFO grants, readers and writers, withdrawals, session loss,
 * fencing tokens, semaphores, multi-locks and try-locks. Each case checks a history: who held
 * what, in which order, with which token; every "not yet" is shown by an event that comes after
 * it (a `queued` count), never by waiting a while. No request node may be left behind.
 */
export function describeEngineContract(
  name: string,
  makeEngine: (rootPath: string) => Promise<EngineUnderTest>,
): void {
  describe(`the lock engine on the ${name} store`, () => {
    let under: EngineUnderTest;
    let engine: LockEngine;
    let history: HistoryEntry[];
    let pending: Pending[];

    beforeEach(async () => {
      under = await makeEngine(`/engine-contract-${randomUUID()}`);
      engine = under.engine;
      history = [];
      pending = [];
    });

    afterEach(async () => {
      for (const request of pending) request.withdrawal.withdraw(new Error('the test is over'));
      await Promise.allSettled(pending.map(({ lease }) => lease.then((held) => held.release())));
      const left: string[] = [];
      for (const dir of await under.store.children(engine.locksPath)) {
        for (const node of await under.store.children(`${engine.locksPath}/${dir}`))
          left.push(`${dir}/${node}`);
      }
      await under.close();
      expect(left, 'request nodes left behind').toEqual([]);
    });

    /** Asks for a lock as `who`; its grant (and a later loss) goes into the history. */
    const request = (who: string, asked: Partial<AcquireRequest> & { name: string }): Pending => {
      const withdrawal = new Withdrawal();
      let told: number | undefined;
      let waiting: Array<{ ahead: number; resolve: () => void }> = [];
      let granted = false;
      const lease = engine.acquire(
        { mode: 'mutex', ...asked },
        {
          withdrawal,
          onQueued: (ahead) => {
            told = ahead;
            const ready = waiting.filter((each) => each.ahead === ahead);
            waiting = waiting.filter((each) => each.ahead !== ahead);
            for (const each of ready) each.resolve();
          },
        },
      );
      void lease.then(
        (held) => {
          granted = true;
          history.push({ who, what: 'held', token: held.fencingToken });
          held.onLost(() => void history.push({ who, what: 'lost', token: held.fencingToken }));
        },
        () => {},
      );
      const made: Pending = {
        who,
        lease,
        withdrawal,
        untilQueued: (ahead) =>
          told === ahead ? Promise.resolve() : new Promise((resolve) => waiting.push({ ahead, resolve })),
        get granted() {
          return granted;
        },
      };
      pending.push(made);
      return made;
    };

    /** Asks for a lock and resolves once it is queued with `ahead` requests ahead of it. */
    const queue = async (who: string, asked: Partial<AcquireRequest> & { name: string }, ahead: number) => {
      const made = request(who, asked);
      await made.untilQueued(ahead);
      expect(made.granted, `${who} was queued, not granted`).toBe(false);
      return made;
    };

    /** Asks for a lock and resolves once it is held. */
    const hold = async (who: string, asked: Partial<AcquireRequest> & { name: string }): Promise<Lease> =>
      request(who, asked).lease;

    /** Releases `who`'s lease, recording the end first (the next holder may be granted before release() resolves). */
    const release = async (who: string, lease: Lease): Promise<void> => {
      history.push({ who, what: 'released', token: lease.fencingToken });
      await lease.release();
    };

    /** The history without tokens, as `who what` lines. */
    const story = (): string[] => history.map(({ who, what }) => `${who} ${what}`);

    /** Tokens grow with every grant in the history. */
    const expectGrowingTokens = (): void => {
      const grants = history.filter(({ what }) => what === 'held').map(({ token }) => token);
      for (let i = 1; i < grants.length; i += 1) expect(grants[i]).toBeGreaterThan(grants[i - 1]!);
    };

    const nodesOf = (name: string): Promise<string[]> => under.store.children(engine.lockPath(name));

    it('grants waiters in the order they queued (FIFO), each with a larger token', async () => {
      const a = await hold('a', { name: 'fifo' });
      const b = await queue('b', { name: 'fifo' }, 1);
      const c = await queue('c', { name: 'fifo' }, 2);
      const d = await queue('d', { name: 'fifo' }, 3);
      await release('a', a);
      await release('b', await b.lease);
      await release('c', await c.lease);
      await release('d', await d.lease);
      expect(story()).toEqual([
        'a held',
        'a released',
        'b held',
        'b released',
        'c held',
        'c released',
        'd held',
        'd released',
      ]);
      expectGrowingTokens();
    });

    it('lets readers share and keeps a writer exclusive; a reader behind a waiting writer waits for it', async () => {
      const r1 = await hold('r1', { name: 'rw', mode: 'read' });
      const r2 = await hold('r2', { name: 'rw', mode: 'read' });
      const w = await queue('w', { name: 'rw', mode: 'write' }, 2);
      const r3 = await queue('r3', { name: 'rw', mode: 'read' }, 3);
      await release('r1', r1);
      await w.untilQueued(1);
      await release('r2', r2);
      const writer = await w.lease;
      await r3.untilQueued(1);
      await release('w', writer);
      await release('r3', await r3.lease);
      expect(story()).toEqual([
        'r1 held',
        'r2 held',
        'r1 released',
        'r2 released',
        'w held',
        'w released',
        'r3 held',
        'r3 released',
      ]);
      expectGrowingTokens();
    });

    it('lets a middle waiter withdraw: its node goes, and those behind it move up', async () => {
      const holder = await hold('h', { name: 'middle' });
      const w1 = await queue('w1', { name: 'middle' }, 1);
      const w2 = await queue('w2', { name: 'middle' }, 2);
      const w3 = await queue('w3', { name: 'middle' }, 3);
      const reason = new Error('gave up');
      w2.withdrawal.withdraw(reason);
      await expect(w2.lease).rejects.toBe(reason);
      await w3.untilQueued(2);
      expect(await nodesOf('middle')).toHaveLength(3);
      await release('h', holder);
      await release('w1', await w1.lease);
      await release('w3', await w3.lease);
      expect(story()).toEqual(['h held', 'h released', 'w1 held', 'w1 released', 'w3 held', 'w3 released']);
    });

    it('lets the first waiter withdraw while the holder holds; the holder releasing then grants the next', async () => {
      const holder = await hold('h', { name: 'head' });
      const first = await queue('first', { name: 'head' }, 1);
      const second = await queue('second', { name: 'head' }, 2);
      first.withdrawal.withdraw(new Error('gave up'));
      await expect(first.lease).rejects.toThrow('gave up');
      await second.untilQueued(1);
      await release('h', holder);
      await release('second', await second.lease);
      expect(story()).toEqual(['h held', 'h released', 'second held', 'second released']);
    });

    it('on session loss, a holder loses its lock (LOCK_LOST) and a waiter queues again and is granted, with a larger token', async () => {
      const holder = await hold('h', { name: 'session' });
      const waiter = await queue('w', { name: 'session' }, 1);
      const lost = new Promise<unknown>((resolve) =>
        holder.lost.addEventListener('abort', () => resolve(holder.lost.reason), { once: true }),
      );
      await under.expireSession();
      expect(isLockError(await lost, 'LOCK_LOST')).toBe(true);
      await release('w', await waiter.lease);
      expect(story()).toEqual(['h held', 'h lost', 'w held', 'w released']);
      expectGrowingTokens();
      await expect(holder.release()).rejects.toMatchObject({ code: 'LOCK_LOST' });
    });

    it('hands successive holders growing tokens, also after the queue has emptied', async () => {
      for (const [i, mode] of (['mutex', 'write', 'read', 'mutex'] as const).entries()) {
        await release(`h${i}`, await hold(`h${i}`, { name: 'tokens', mode }));
      }
      expect(history.filter(({ what }) => what === 'held')).toHaveLength(4);
      expectGrowingTokens();
    });

    it('grants a semaphore in queue order: a light request never passes a heavy one that waits', async () => {
      const semaphore = (weight: number) => ({ name: 'sem', mode: 'semaphore' as const, limit: 3, weight });
      const s1 = await hold('s1', semaphore(2));
      const s2 = await queue('s2', semaphore(2), 1);
      // It would fit beside s1 (2 + 1 = 3), but s2 is ahead of it.
      const s3 = await queue('s3', semaphore(1), 2);
      const s4 = await queue('s4', semaphore(3), 3);
      await release('s1', s1);
      const [second, third] = await Promise.all([s2.lease, s3.lease]);
      await s4.untilQueued(2);
      expect(story().slice(0, 2)).toEqual(['s1 held', 's1 released']);
      expect(story().slice(2).sort()).toEqual(['s2 held', 's3 held']);
      await release('s2', second);
      await release('s3', third);
      await release('s4', await s4.lease);
      expect(story().slice(4)).toEqual(['s2 released', 's3 released', 's4 held', 's4 released']);
      expectGrowingTokens();
    });

    it('grants a multi-lock all or none: it waits for its busy lock while keeping the free one, then takes both', async () => {
      const other = await hold('x', { name: 'account-a' });
      const both = request('m', {
        name: 'a+b',
        locks: [
          { name: 'account-a', mode: 'write' },
          { name: 'account-b', mode: 'write' },
        ],
      });
      await both.untilQueued(1);
      // The free lock is kept for it: a try on it fails, and the multi-lock holds nothing yet.
      await expect(
        engine.acquire(
          { name: 'account-b', mode: 'mutex', waitTimeoutMs: 0 },
          { withdrawal: new Withdrawal() },
        ),
      ).rejects.toMatchObject({ code: 'TIMEOUT' });
      expect(both.granted).toBe(false);
      await release('x', other);
      const lease = await both.lease;
      expect(lease.tokens?.map(({ name }) => name)).toEqual(['account-a', 'account-b']);
      expect(lease.tokens![0]!.token).toBeGreaterThan(other.fencingToken);
      await release('m', lease);
      expect(story()).toEqual(['x held', 'x released', 'm held', 'm released']);
      // Released together: both are free.
      await release('a', await hold('a', { name: 'account-a', waitTimeoutMs: 0 }));
      await release('b', await hold('b', { name: 'account-b', waitTimeoutMs: 0 }));
    });

    it('ends a multi-lock that times out with TIMEOUT, leaving no node on any of its locks', async () => {
      const other = await hold('x', { name: 'left-a' });
      const both = request('m', {
        name: 'a+b',
        waitTimeoutMs: 50,
        locks: [
          { name: 'left-a', mode: 'mutex' },
          { name: 'left-b', mode: 'mutex' },
        ],
      });
      await expect(both.lease).rejects.toMatchObject({ code: 'TIMEOUT' });
      expect(await nodesOf('left-a')).toHaveLength(1);
      expect(await nodesOf('left-b')).toEqual([]);
      await release('x', other);
      expect(story()).toEqual(['x held', 'x released']);
    });

    it('try-lock (waitTimeoutMs 0): grants a free lock and a reader beside readers; fails at once on a held lock or behind a waiting writer, leaving no node', async () => {
      const free = await hold('free', { name: 'try', waitTimeoutMs: 0 });
      await expect(hold('taken', { name: 'try', waitTimeoutMs: 0 })).rejects.toMatchObject({
        code: 'TIMEOUT',
        message: expect.stringMatching(/lock "try" is not free \(1 ahead\) and wait_timeout is 0/),
      });
      expect(await nodesOf('try')).toHaveLength(1);
      await release('free', free);

      const reader = await hold('r1', { name: 'try-read', mode: 'read' });
      const beside = await hold('r2', { name: 'try-read', mode: 'read', waitTimeoutMs: 0 });
      const writer = await queue('w', { name: 'try-read', mode: 'write' }, 2);
      // Readers hold, but a try never jumps the queue: the writer is ahead of it.
      await expect(hold('r3', { name: 'try-read', mode: 'read', waitTimeoutMs: 0 })).rejects.toMatchObject({
        code: 'TIMEOUT',
      });
      expect(await nodesOf('try-read')).toHaveLength(3);
      await release('r1', reader);
      await release('r2', beside);
      await release('w', await writer.lease);
      expect(story()).toEqual([
        'free held',
        'free released',
        'r1 held',
        'r2 held',
        'r1 released',
        'r2 released',
        'w held',
        'w released',
      ]);
    });
  });
}
