import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ClaimRegistry, type Claim, type ClaimObserver } from '../../src/server/engine/claims.js';
import { LockEngine } from '../../src/server/engine/lock-engine.js';
import { Withdrawal } from '../../src/server/engine/lock-request.js';
import { LockError } from '../../src/server/lock-error.js';
import { MemoryStore } from '../../src/server/stores/memory/memory-store.js';
import { SessionState } from '../../src/server/stores/session-state.js';

const silent = pino({ level: 'silent' });

/** An observer that records what a stream attached to the claim would be told. */
function recorder(): ClaimObserver & { events: string[] } {
  const events: string[] = [];
  return {
    events,
    queued: (ahead) => events.push(`queued ${ahead}`),
    confirmedChange: (confirmed) => events.push(confirmed ? 'confirmed' : 'in doubt'),
    replaced: () => events.push('replaced'),
  };
}

describe('claims: lock requests that outlive their stream for a resume grace', () => {
  let store: MemoryStore;
  let engine: LockEngine;
  let claims: ClaimRegistry;

  const open = (name: string, graceMs: number): Claim =>
    claims.open({ name, mode: 'mutex' }, graceMs, silent);

  beforeEach(() => {
    store = new MemoryStore();
    engine = new LockEngine({ store, rootPath: '/claims', logger: silent, instanceId: 'test' });
    claims = new ClaimRegistry({
      engine,
      logger: silent,
      instanceId: 'instance-a',
      maxResumeGraceMs: 60_000,
    });
  });

  afterEach(async () => {
    await claims.close();
    await store.close();
  });

  it('issues a resume token only with a grace, caps the grace at the maximum, and forgets ended claims', async () => {
    const plain = open('plain', 0);
    expect(plain.resumeToken).toBeUndefined();
    const capped = open('capped', 3_600_000);
    expect(capped.graceMs).toBe(60_000);
    expect(capped.resumeToken).toMatch(/^instance-a\.[A-Za-z0-9_-]{32}$/);
    expect(claims.resume(capped.resumeToken!)).toBe(capped);
    expect(claims.size).toBe(1);
    await Promise.all([plain.granted, capped.granted]);
    await capped.end(new LockError('CANCELLED', 'done'));
    expect(claims.size).toBe(0);
    expect(() => claims.resume(capped.resumeToken!)).toThrow(/unknown/);
    expect(() => claims.resume('instance-b.secret')).toThrow(/issued by lockstream instance "instance-b"/);
    await plain.end(new LockError('CANCELLED', 'done'));

    const off = new ClaimRegistry({ engine, logger: silent, instanceId: 'instance-a', maxResumeGraceMs: 0 });
    const never = off.open({ name: 'off', mode: 'mutex' }, 10_000, silent);
    expect([never.resumeToken, never.graceMs, off.size]).toEqual([undefined, 0, 0]);
    await never.end(new LockError('CANCELLED', 'done'));
  });

  it('keeps a detached holder for its grace (nobody else is granted), then releases it', async () => {
    const holder = open('delayed', 200);
    const lease = await holder.granted;
    const waiter = open('delayed', 0);
    const waiting = recorder();
    waiter.attach(waiting);
    const detachedAt = performance.now();
    holder.detach();
    await waiter.granted;
    expect(performance.now() - detachedAt).toBeGreaterThanOrEqual(200);
    expect(lease.lost.aborted).toBe(false);
    expect(waiting.events).toEqual(['queued 1']);
    await waiter.end(new LockError('CANCELLED', 'done'));
  });

  it('ends the grace when a stream attaches, and tells a stream it replaced', async () => {
    const claim = open('resumed', 60_000);
    await claim.granted;
    const first = recorder();
    const isFirstAttached = claim.attach(first);
    claim.detach();
    const second = recorder();
    const isSecondAttached = claim.attach(second);
    const third = recorder();
    claim.attach(third);
    expect([first.events, second.events, isFirstAttached(), isSecondAttached()]).toEqual([
      [],
      ['replaced'],
      false,
      false,
    ]);
    // Still held: a try-lock fails.
    await expect(
      engine.acquire({ name: 'resumed', mode: 'mutex', waitTimeoutMs: 0 }, { withdrawal: new Withdrawal() }),
    ).rejects.toThrow(/not free/);
    await claim.end(new LockError('CANCELLED', 'done'));
  });

  it('withdraws a detached waiter when its grace passes, and keeps no session listener after it ends', async () => {
    const session = store.session;
    if (!(session instanceof SessionState)) throw new Error('INVARIANT: memory sessions are SessionStates');
    const holder = open('listeners', 60_000);
    await holder.granted;
    const baseline = session.listenerCount;
    for (let i = 0; i < 20; i += 1) {
      const claim = open(`other-${i}`, 60_000);
      await claim.granted;
      await claim.end(new LockError('CANCELLED', 'done'));
    }
    expect(session.listenerCount).toBe(baseline);

    const waiter = open('listeners', 50);
    waiter.detach();
    await expect(waiter.granted).rejects.toThrow(/not resumed within its 50 ms grace/);
    expect(await store.children(engine.lockPath('listeners'))).toHaveLength(1);
    await holder.end(new LockError('CANCELLED', 'done'));
    expect(session.listenerCount).toBe(baseline - 1);
  });

  it('ends every claim, attached or detached, on close', async () => {
    const held = open('closing', 60_000);
    await held.granted;
    const queued = open('closing', 60_000);
    queued.detach();
    await claims.close();
    await expect(queued.granted).rejects.toThrow(/shutting down/);
    expect(await store.children(engine.lockPath('closing'))).toEqual([]);
    expect(() => open('after', 1_000)).toThrow(/shutting down/);
  });
});
