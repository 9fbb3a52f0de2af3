import { createSequential } from '../../src/server/stores/store.js';
import { randomUUID } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { pino } from 'pino';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../src/server/config.js';
import { startServer, type RunningServer } from '../../src/server/main.js';
import { ZooKeeperStore } from '../../src/server/stores/zookeeper/zookeeper-store.js';
import { watchesUnder } from '../support/zookeeper-watches.js';
import { LockCaller, LockMode, type RequestStream } from '../support/lock-caller.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { TcpProxyProcess } from '../support/tcp-proxy-process.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));
const zookeeperPort = Number(connectString.split(':')[1]);
const silent = pino({ level: 'silent' });

/**
 * ZooKeeper arms a watch a moment after the `queued` message was sent, and has no event for it:
 * ask its watch table until it shows `count` watches under `prefix`.
 */
async function watchesWhenCount(prefix: string, count: number): Promise<Map<string, string[]>> {
  for (let attempt = 0; ; attempt += 1) {
    const watches = await watchesUnder(zookeeperPort, prefix);
    if (watches.size === count || attempt === 200) return watches;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe('the ZooKeeper lock recipe, seen from ZooKeeper', () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** `watch`: how the server hears of nodes (see --zookeeper-watch). */
  async function server(
    rootPath: string,
    watch: 'tree' | 'nodes' = 'tree',
  ): Promise<{ server: RunningServer; caller: LockCaller }> {
    const config = loadConfig({}, [
      '--port',
      '0',
      '--root',
      rootPath,
      '--zookeeper',
      connectString,
      '--zookeeper-watch',
      watch,
    ]);
    const running = await startServer(config, silent);
    const caller = new LockCaller(`127.0.0.1:${running.port}`);
    cleanups.push(
      () => running.stop(),
      () => caller.close(),
    );
    return { server: running, caller };
  }

  // The recipe with a watch per node: ZooKeeper 3.5, the addon client, and --zookeeper-watch nodes.
  it('has each waiter watch only its predecessor: one watch per waiting node, none on the lock itself', async () => {
    const root = `/recipe-${randomUUID()}`;
    const { server: running, caller } = await server(root, 'nodes');
    const lockDir = `${root}/locks/herd`;
    const holder = caller.open({ name: 'herd' });
    await holder.acquired();
    const queuing = { ...running.store.stats };
    const waiters: RequestStream[] = [];
    for (let i = 0; i < 30; i += 1) {
      const waiter = caller.open({ name: 'herd', mode: i % 3 === 0 ? LockMode.WRITE : LockMode.MUTEX });
      cleanups.push(() => waiter.cancel());
      expect(await waiter.queued()).toBe(i + 1);
      waiters.push(waiter);
    }

    const queue = (await running.store.children(lockDir)).sort((a, b) =>
      a.slice(-10).localeCompare(b.slice(-10)),
    );
    expect(queue).toHaveLength(31);
    const watched = await watchesWhenCount(root, 31);
    // Every node is watched by its own request (for its token, and to hear of its deletion or a
    // revocation), and each waiter armed one deletion watch, on the node ahead of it; the same
    // session's watches on one path are one watch in ZooKeeper. No waiter watches the lock's
    // parent node (`wchp` lists node watches; the one children watch this server keeps on the
    // parent while its requests wait, to keep their positions right, is the server's, not theirs).
    expect([...watched.keys()].sort()).toEqual(queue.map((node) => `${lockDir}/${node}`).sort());
    for (const sessions of watched.values()) expect(sessions).toHaveLength(1);
    expect(watched.has(lockDir)).toBe(false);
    expect(running.store.stats.watchesArmed - queuing.watchesArmed).toBe(30);

    const before = { ...running.store.stats };
    await holder.release();
    await waiters[0]!.acquired();
    const after = { ...running.store.stats };
    // One deletion notification, one waiter woken, no new watch; the queue is listed by this
    // server to tell the other 29 waiters their new places, not once per waiter (once, or twice
    // if a listing for an earlier change was still due).
    expect(after.waitersWoken - before.waitersWoken).toBe(1);
    expect(after.childrenListings - before.childrenListings).toBeLessThanOrEqual(2);
    expect(after.watchesArmed - before.watchesArmed).toBe(0);
    expect((await watchesUnder(zookeeperPort, root)).size).toBe(30);
    expect(waiters.filter((w) => w.isAcquired)).toHaveLength(1);

    // The next waiter was not behind the head when it listed the queue, but its predecessor was
    // an exclusive holder of this server, released: it holds without listing the queue itself
    // (the server lists it for the others' places, as above).
    const second = { ...running.store.stats };
    await waiters[0]!.release();
    await waiters[1]!.acquired();
    expect(running.store.stats.waitersWoken - second.waitersWoken).toBe(1);
    expect(running.store.stats.childrenListings - second.childrenListings).toBeLessThanOrEqual(2);
    expect(waiters.slice(2).filter((w) => w.isAcquired)).toHaveLength(0);
  });

  it('has a reader watch the last writer ahead of it, not its immediate predecessor', async () => {
    const root = `/recipe-${randomUUID()}`;
    const { server: running, caller } = await server(root, 'nodes');
    const lockDir = `${root}/locks/doc`;
    const writer = caller.open({ name: 'doc', mode: LockMode.WRITE });
    await writer.acquired();
    const queuing = { ...running.store.stats };
    const readers = [0, 1, 2].map(() => caller.open({ name: 'doc', mode: LockMode.READ }));
    for (const reader of readers) {
      cleanups.push(() => reader.cancel());
      await reader.queued();
    }
    const queue = await running.store.children(lockDir);
    const watched = await watchesWhenCount(root, 4);
    // Three readers wait for the one writer: a single deletion watch, shared, on its node (the
    // other watches are each request's own).
    expect([...watched.keys()].sort()).toEqual(queue.map((node) => `${lockDir}/${node}`).sort());
    expect(running.store.stats.watchesArmed - queuing.watchesArmed).toBe(1);
    await writer.release();
    await Promise.all(readers.map((r) => r.acquired()));
    expect(running.store.stats.waitersWoken - queuing.waitersWoken).toBe(3);
  });

  it('with the lock tree watched, keeps one watch in ZooKeeper for every lock, and wakes one waiter per release', async () => {
    const root = `/recipe-${randomUUID()}`;
    const { server: running, caller } = await server(root, 'tree');
    const holder = caller.open({ name: 'herd' });
    await holder.acquired();
    const queuing = { ...running.store.stats };
    const waiters: RequestStream[] = [];
    for (let i = 0; i < 30; i += 1) {
      const waiter = caller.open({ name: 'herd', mode: i % 3 === 0 ? LockMode.WRITE : LockMode.MUTEX });
      cleanups.push(() => waiter.cancel());
      expect(await waiter.queued()).toBe(i + 1);
      waiters.push(waiter);
    }
    // The instance's one persistent recursive watch, on the locks path: ZooKeeper sends this
    // session one event per change, whoever waits for it; no node or lock has a watch of its own.
    expect([...(await watchesUnder(zookeeperPort, root)).keys()]).toEqual([`${root}/locks`]);
    expect(running.store.stats.watchesArmed - queuing.watchesArmed).toBe(0);

    const before = { ...running.store.stats };
    await holder.release();
    await waiters[0]!.acquired();
    const after = { ...running.store.stats };
    expect(after.waitersWoken - before.waitersWoken).toBe(1);
    expect(after.watchesArmed - before.watchesArmed).toBe(0);
    expect(waiters.slice(1).filter((w) => w.isAcquired)).toHaveLength(0);
  });

  it('hands out czxids as tokens: unique across lock names, in creation order, not per-lock sequences', async () => {
    const root = `/recipe-${randomUUID()}`;
    const { server: running, caller } = await server(root);
    const tokens: bigint[] = [];
    for (const name of ['alpha', 'beta', 'alpha', 'gamma', 'beta']) {
      const holder = caller.open({ name });
      tokens.push(await holder.acquired());
      const [node] = await running.store.children(`${root}/locks/${name}`);
      // Each of these is the first node in its lock's queue at the time (sequence 0 or 1), but
      // the tokens keep growing across names: they come from ZooKeeper's global zxid.
      expect(Number(node!.slice(-10))).toBeLessThan(2);
      await holder.release();
    }
    expect([...tokens].sort((x, y) => (x < y ? -1 : 1))).toEqual(tokens);
    expect(new Set(tokens).size).toBe(tokens.length);
  });
});

describe('lockstream processes sharing one ZooKeeper', () => {
  const processes: ServerProcess[] = [];
  const callers: LockCaller[] = [];
  afterEach(async () => {
    for (const caller of callers.splice(0)) caller.close();
    await Promise.all(processes.splice(0).map((p) => p.kill('SIGTERM')));
  });

  async function serve(root: string): Promise<LockCaller> {
    const server = await startServerProcess([
      '--zookeeper',
      connectString,
      '--root',
      root,
      '--session-timeout',
      '2s',
    ]);
    processes.push(server);
    const caller = new LockCaller(server.address);
    callers.push(caller);
    return caller;
  }

  it("exclude each other's clients, in one FIFO queue across servers", async () => {
    const root = `/shared-${randomUUID()}`;
    const [a, b] = await Promise.all([serve(root), serve(root)]);
    const first = a.open({ name: 'shared', owner: 'a1' });
    const firstToken = await first.acquired();
    const second = b.open({ name: 'shared', owner: 'b1' });
    expect(await second.queued()).toBe(1);
    const third = a.open({ name: 'shared', owner: 'a2' });
    expect(await third.queued()).toBe(2);
    const tryOnB = b.open({ name: 'shared', waitTimeout: { seconds: 0n, nanos: 0 } });
    expect((await tryOnB.outcome).code).toBe(status.DEADLINE_EXCEEDED);
    // Either instance describes the whole queue, whichever instance serves each request.
    const watchOnB = b.watch('shared');
    const [fromA, fromB] = await Promise.all([a.describe('shared'), b.describe('shared')]);
    expect(fromB).toEqual(fromA);
    expect(fromA.holders.map((h) => h.owner)).toEqual(['a1']);
    expect(fromA.waiters.map((w) => w.owner)).toEqual(['b1', 'a2']);
    expect(fromA.holders[0]!.instance).toBe(fromA.waiters[1]!.instance);
    expect(fromA.waiters[0]!.instance).not.toBe(fromA.holders[0]!.instance);
    expect(await b.checkToken('shared', firstToken)).toBe(true);
    expect((await b.list({ prefix: 'shared' })).locks).toEqual([
      { name: 'shared', holders: 1, waiters: 2, heldMode: LockMode.MUTEX, limit: 0, usedWeight: 0 },
    ]);
    // A revocation asked on one instance reaches a holder served by the other.
    expect(await b.revoke('shared', 'handover')).toBe(1);
    await first.receipt('revokeRequested');

    await first.release();
    const secondToken = await second.acquired();
    // A watch on one instance follows grants made by the other.
    await watchOnB.until((s) => s.holders.map((h) => h.owner).join() === 'b1' && s.waiters.length === 1);
    watchOnB.cancel();
    expect(secondToken).toBeGreaterThan(firstToken);
    expect(third.isAcquired).toBe(false);
    await second.release();
    expect(await third.acquired()).toBeGreaterThan(secondToken);
    await third.release();
  });

  it('free the locks of a server that dies, once its ZooKeeper session expires', async () => {
    const root = `/shared-${randomUUID()}`;
    const doomedCaller = await serve(root);
    const doomed = processes.at(-1)!;
    const survivor = await serve(root);
    const holder = doomedCaller.open({ name: 'orphan' });
    const orphanToken = await holder.acquired();
    const waiter = survivor.open({ name: 'orphan' });
    expect(await waiter.queued()).toBe(1);

    await doomed.kill('SIGKILL');
    processes.splice(processes.indexOf(doomed), 1);
    expect((await holder.outcome).code).toBe(status.UNAVAILABLE);
    // No one released anything: ZooKeeper deleted the dead server's node when its 2 s session
    // expired, and the waiter on the other server was woken by its predecessor watch.
    expect(await waiter.acquired()).toBeGreaterThan(orphanToken);
    await waiter.release();
  });
});

describe('ZooKeeper store under connection loss', () => {
  it('finds its own node after a create whose reply was lost, instead of leaving a ghost', async () => {
    const proxy = await TcpProxyProcess.start(connectString);
    const store = await ZooKeeperStore.connect({
      connectString: proxy.address,
      sessionTimeoutMs: 10_000,
      connectTimeoutMs: 10_000,
      logger: silent,
    });
    try {
      const dir = `/ghost-${randomUUID()}/locks/job`;
      // Someone already queues there, so the lock's parent exists and one create is all it takes.
      const ahead = await createSequential(store, dir, `mutex-${randomUUID()}-`, new Uint8Array());
      const prefix = `mutex-${randomUUID()}-`;
      await proxy.holdReplies();
      const created = createSequential(store, dir, prefix, new Uint8Array());
      // The create's reply carries the new node's path: ZooKeeper has applied it. Lose the reply.
      await proxy.heldReplyContaining(prefix);
      await proxy.severAll();
      const node = await created;

      const children = await store.children(dir);
      expect(children.filter((child) => child.startsWith(prefix))).toEqual([node.path.slice(dir.length + 1)]);
      expect(children).toHaveLength(2);
      expect(node.session.lost.aborted).toBe(false);
      await store.delete(node.path);
      await store.delete(ahead.path);
      expect(await store.children(dir)).toEqual([]);
    } finally {
      await store.close();
      await proxy.close();
    }
  });
});
