import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LockEngine } from '../../src/server/engine/lock-engine.js';
import { Withdrawal, type AcquireRequest } from '../../src/server/engine/lock-request.js';
import type { RequestTag } from '../../src/server/engine/lock-request.js';
import { sessionsOfNodes } from '../../src/server/engine/request-nodes.js';
import { resumeKey } from '../../src/server/engine/resume-token.js';
import { MemoryStore } from '../../src/server/stores/memory/memory-store.js';
import { joinPath, type OwnedNode } from '../../src/server/stores/store.js';

/*
 * What an instance that took a store session over makes of its nodes: the lockstream sessions
 * they belong to, and requests that carry on (held with their token, waiting in their place)
 * on another engine. The store session itself moving is the ZooKeeper store's part, tested
 * there; here one memory store stands for the session both engines share.
 */

const silent = pino({ level: 'silent' });
const ROOT = '/adoption';

describe('session adoption', () => {
  let store: MemoryStore;
  let first: LockEngine;
  let taker: LockEngine;

  beforeEach(() => {
    store = new MemoryStore();
    first = new LockEngine({
      store,
      replacement: store,
      rootPath: ROOT,
      logger: silent,
      instanceId: 'first',
    });
    taker = new LockEngine({
      store,
      replacement: store,
      rootPath: ROOT,
      logger: silent,
      instanceId: 'taker',
    });
  });
  afterEach(async () => store.close());

  /** Every lock node under the root, as a takeover reads them. */
  async function ownedNodes(): Promise<OwnedNode[]> {
    const nodes: OwnedNode[] = [];
    for (const lock of await store.children(first.locksPath)) {
      const dir = joinPath(first.locksPath, lock);
      for (const name of await store.children(dir)) {
        const path = joinPath(dir, name);
        const data = await store.nodeData(path);
        if (data) nodes.push({ path, ...data });
      }
    }
    return nodes;
  }

  function tag(token: string, id: number): RequestTag {
    return { key: resumeKey(token), id, kind: 'session', grace: 30_000, caller: 'billing' };
  }

  it('finds each session and request in the nodes, and leaves out requests of no resumable session', async () => {
    const value = Buffer.from('v1');
    await first.acquire(
      { name: 'orders', mode: 'write', owner: 'o', value },
      { withdrawal: new Withdrawal(), tag: tag('a.one', 1) },
    );
    await first.acquire(
      {
        name: 'set',
        mode: 'mutex',
        locks: [
          { name: 'x', mode: 'mutex' },
          { name: 'y', mode: 'semaphore', limit: 3, weight: 2 },
        ],
      },
      { withdrawal: new Withdrawal(), tag: tag('a.one', 2) },
    );
    await first.acquire({ name: 'plain', mode: 'mutex' }, { withdrawal: new Withdrawal() });
    const { sessions, untagged } = sessionsOfNodes(await ownedNodes(), first.locksPath);
    expect(untagged.map((node) => node.path)).toEqual([expect.stringContaining('/plain/')]);
    expect(sessions).toHaveLength(1);
    const [session] = sessions;
    expect(session).toMatchObject({
      key: resumeKey('a.one'),
      kind: 'session',
      graceMs: 30_000,
      callerName: 'billing',
    });
    const byId = new Map(session!.requests.map((request) => [request.id, request]));
    expect(byId.get(1)!.request).toMatchObject({ name: 'orders', mode: 'write', owner: 'o' });
    expect(Buffer.from(byId.get(1)!.request.value!).toString()).toBe('v1');
    const multi = byId.get(2)!;
    expect(multi.request).toMatchObject({
      name: 'set',
      locks: [
        { name: 'x', mode: 'mutex' },
        { name: 'y', mode: 'semaphore', limit: 3, weight: 2 },
      ],
    });
    expect(multi.nodes.map((node) => node.path)).toEqual([
      expect.stringContaining('/x/'),
      expect.stringContaining('/y/'),
    ]);
  });

  it('carries on a held lock with its token and a waiter in its place, on the taking engine', async () => {
    const held = await first.acquire(
      { name: 'job', mode: 'mutex' },
      { withdrawal: new Withdrawal(), tag: tag('a.s', 1) },
    );
    const queued: number[] = [];
    const waiting = first.acquire(
      { name: 'job', mode: 'mutex' },
      { withdrawal: new Withdrawal(), tag: tag('a.s', 2), onQueued: (ahead) => queued.push(ahead) },
    );
    await expect.poll(() => queued).toEqual([1]);
    // The first engine's instance is gone: its own lease and wait are never used again.
    void waiting.catch(() => {});
    const [session] = sessionsOfNodes(await ownedNodes(), first.locksPath).sessions;
    const request = (id: number): { request: AcquireRequest; nodes: OwnedNode[] } =>
      session!.requests.find((found) => found.id === id)!;

    const adoptedHolder = await taker.adopt(request(1).request, request(1).nodes, {
      withdrawal: new Withdrawal(),
    });
    expect(adoptedHolder.fencingToken).toBe(held.fencingToken);
    const aheads: number[] = [];
    let granted = false;
    const adoptedWaiter = taker
      .adopt(request(2).request, request(2).nodes, {
        withdrawal: new Withdrawal(),
        onQueued: (ahead) => aheads.push(ahead),
      })
      .then((lease) => {
        granted = true;
        return lease;
      });
    await expect.poll(() => aheads).toEqual([1]);
    expect(granted).toBe(false);
    await adoptedHolder.release();
    const next = await adoptedWaiter;
    expect(next.fencingToken).toBeGreaterThan(held.fencingToken);
    expect(await store.children(first.lockPath('job'))).toHaveLength(1);
    await next.release();
    expect(await store.children(first.lockPath('job'))).toEqual([]);
  });

  it('fails a request whose node is gone, and keeps what is left of a wait timeout', async () => {
    await first.acquire(
      { name: 'gone', mode: 'mutex' },
      { withdrawal: new Withdrawal(), tag: tag('a.t', 1) },
    );
    const nodes = await ownedNodes();
    await store.delete(nodes[0]!.path);
    const [session] = sessionsOfNodes(nodes, first.locksPath).sessions;
    const { request, nodes: its } = session!.requests[0]!;
    await expect(taker.adopt(request, its, { withdrawal: new Withdrawal() })).rejects.toMatchObject({
      code: 'LOCK_LOST',
    });

    await first.acquire({ name: 'busy', mode: 'mutex' }, { withdrawal: new Withdrawal() });
    void first
      .acquire(
        { name: 'busy', mode: 'mutex', waitTimeoutMs: 60_000 },
        { withdrawal: new Withdrawal(), tag: tag('a.u', 1) },
      )
      .catch(() => {});
    await expect.poll(async () => (await store.children(first.lockPath('busy'))).length).toBe(2);
    const waiter = sessionsOfNodes(await ownedNodes(), first.locksPath).sessions.find(
      (found) => found.key === resumeKey('a.u'),
    )!.requests[0]!;
    expect(waiter.request.waitTimeoutMs).toBeGreaterThan(50_000);
    expect(waiter.request.waitTimeoutMs).toBeLessThanOrEqual(60_000);
  });
});
