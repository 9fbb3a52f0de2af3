import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  LockEngine,
  LockSessions,
  type AcquireRequest,
  type LockSession,
  type RequestAccounting,
  type RequestListener,
  type RequestNews,
} from '../../src/server/engine/index.js';
import { Withdrawal } from '../../src/server/engine/lock-request.js';
import { LockError } from '../../src/server/lock-error.js';
import { MemoryStore } from '../../src/server/stores/memory/memory-store.js';
import { SessionState } from '../../src/server/stores/session-state.js';
import { waitUntilDeleted } from '../../src/server/stores/store.js';

const silent = pino({ level: 'silent' });

const noAccounting: RequestAccounting = {
  waiting: () => {},
  waitEnded: () => {},
  granted: () => {},
  holdEnded: () => {},
  notGranted: () => {},
  termBegan: () => {},
};

/** A stream attached to a session, as the transport's would be: records each request's news. */
class Recorder implements RequestListener {
  readonly events: string[] = [];
  readonly #waiters: Array<{ match: (event: string) => boolean; resolve: () => void }> = [];

  tell(id: number, _request: AcquireRequest, news: RequestNews): void {
    const event =
      news.kind === 'waiting'
        ? `${id} waiting ${news.ahead}`
        : news.kind === 'ended' || news.kind === 'lost'
          ? `${id} ${news.kind}${news.error instanceof Error ? `: ${news.error.message}` : ''}`
          : `${id} ${news.kind}`;
    this.#record(event);
  }

  replaced(): void {
    this.#record('replaced');
  }

  handedOver(): void {
    this.#record('handed over');
  }

  #record(event: string): void {
    this.events.push(event);
    for (const waiter of [...this.#waiters]) {
      if (!waiter.match(event)) continue;
      this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
  }

  /** Resolves once an event starting with `prefix` was recorded (at once if it was). */
  until(prefix: string): Promise<void> {
    const match = (event: string): boolean => event.startsWith(prefix);
    if (this.events.some(match)) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ match, resolve }));
  }
}

describe('lock sessions: requests that outlive their stream for a resume grace', () => {
  let store: MemoryStore;
  let engine: LockEngine;
  let sessions: LockSessions;

  /** A session of one request (as an Acquire stream makes), attached to a new recorder. */
  const open = (
    name: string,
    graceMs: number,
    registry = sessions,
  ): { session: LockSession; stream: Recorder } => {
    const session = registry.open({
      kind: 'acquire',
      graceMs,
      callerName: undefined,
      accounting: noAccounting,
      logger: silent,
    });
    const stream = new Recorder();
    void session.attach(stream);
    session.acquire(1, { name, mode: 'mutex' });
    return { session, stream };
  };

  beforeEach(() => {
    store = new MemoryStore();
    engine = new LockEngine({
      store,
      replacement: store,
      rootPath: '/sessions',
      logger: silent,
      instanceId: 'test',
    });
    sessions = new LockSessions({
      engine,
      logger: silent,
      instanceId: 'instance-a',
      maxResumeGraceMs: 60_000,
    });
  });

  afterEach(async () => {
    await sessions.close();
    await store.close();
  });

  it('issues a resume token only with a grace, caps the grace at the maximum, and forgets ended sessions', async () => {
    const plain = open('plain', 0);
    expect(plain.session.resumeToken).toBeUndefined();
    const capped = open('capped', 3_600_000);
    expect(capped.session.graceMs).toBe(60_000);
    const token = capped.session.resumeToken!;
    expect(token).toMatch(/^instance-a\.[A-Za-z0-9_-]{32}$/);
    await expect(sessions.resume(token, 'acquire', undefined)).resolves.toBe(capped.session);
    // Only by the RPC and the caller that opened it.
    await expect(sessions.resume(token, 'session', undefined)).rejects.toThrow(/unknown/);
    await expect(sessions.resume(token, 'acquire', 'someone-else')).rejects.toThrow(/unknown/);
    expect(sessions.size).toBe(2);
    await Promise.all([plain.stream.until('1 granted'), capped.stream.until('1 granted')]);
    await capped.session.end(new LockError('CANCELLED', 'done'));
    expect(sessions.size).toBe(1);
    await expect(sessions.resume(token, 'acquire', undefined)).rejects.toThrow(/unknown/);
    await expect(sessions.resume('instance-b.secret', 'acquire', undefined)).rejects.toThrow(
      /issued by lockstream instance "instance-b"/,
    );
    await plain.session.end(new LockError('CANCELLED', 'done'));

    const off = new LockSessions({ engine, logger: silent, instanceId: 'instance-a', maxResumeGraceMs: 0 });
    const never = open('off', 10_000, off);
    expect([never.session.resumeToken, never.session.graceMs]).toEqual([undefined, 0]);
    await off.close();
  });

  it('keeps a detached holder for its grace (nobody else is granted), then releases it', async () => {
    const holder = open('delayed', 200);
    await holder.stream.until('1 granted');
    const waiter = open('delayed', 0);
    await waiter.stream.until('1 waiting 1');
    const detachedAt = performance.now();
    holder.session.detach();
    await waiter.stream.until('1 granted');
    expect(performance.now() - detachedAt).toBeGreaterThanOrEqual(200);
    expect(holder.stream.events).toEqual(['1 granted']);
    expect(waiter.stream.events).toEqual(['1 waiting 1', '1 granted']);
    await waiter.session.end(new LockError('CANCELLED', 'done'));
  });

  it('ends the grace when a stream attaches, tells a stream it replaced, and tells the new one where its request stands', async () => {
    const { session, stream: first } = open('resumed', 60_000);
    await first.until('1 granted');
    session.detach();
    const second = new Recorder();
    await session.attach(second);
    const third = new Recorder();
    await session.attach(third);
    expect([first.events, second.events, third.events]).toEqual([
      ['1 granted'],
      ['1 granted', 'replaced'],
      ['1 granted'],
    ]);
    expect([session.isAttached(second), session.isAttached(third)]).toEqual([false, true]);
    // Still held: a try-lock fails.
    await expect(
      engine.acquire({ name: 'resumed', mode: 'mutex', waitTimeoutMs: 0 }, { withdrawal: new Withdrawal() }),
    ).rejects.toThrow(/not free/);
    await session.end(new LockError('CANCELLED', 'done'));
  });

  it('withdraws a detached waiter when its grace passes, and keeps no session listener after it ends', async () => {
    const storeSession = store.session;
    if (!(storeSession instanceof SessionState))
      throw new Error('INVARIANT: memory sessions are SessionStates');
    const holder = open('listeners', 60_000);
    await holder.stream.until('1 granted');
    const baseline = storeSession.listenerCount;
    for (let i = 0; i < 20; i += 1) {
      const other = open(`other-${i}`, 60_000);
      await other.stream.until('1 granted');
      await other.session.end(new LockError('CANCELLED', 'done'));
    }
    expect(storeSession.listenerCount).toBe(baseline);

    const waiter = open('listeners', 50);
    await waiter.stream.until('1 waiting 1');
    const lockPath = engine.lockPath('listeners');
    const nodes = await store.children(lockPath);
    expect(nodes).toHaveLength(2);
    waiter.session.detach();
    // Its node goes when the grace has passed, and nobody is told (no stream is attached).
    const newest = nodes.sort((a, b) => Number(a.slice(-10)) - Number(b.slice(-10)))[1]!;
    await waitUntilDeleted(store, `${lockPath}/${newest}`, { signal: new AbortController().signal });
    expect(await store.children(lockPath)).toHaveLength(1);
    expect(waiter.stream.events).toEqual(['1 waiting 1']);
    await holder.session.end(new LockError('CANCELLED', 'done'));
    expect(storeSession.listenerCount).toBe(baseline - 1);
  });

  it('ends every session, attached or detached, on close', async () => {
    const held = open('closing', 60_000);
    await held.stream.until('1 granted');
    const queued = open('closing', 60_000);
    await queued.stream.until('1 waiting 1');
    queued.session.detach();
    await sessions.close();
    expect(await store.children(engine.lockPath('closing'))).toEqual([]);
    expect(sessions.size).toBe(0);
    expect(() => open('after', 1_000)).toThrow(/shutting down/);
  });
});
