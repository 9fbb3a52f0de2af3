import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { Metrics } from '../../src/server/observability/metrics.js';
import { NodeFollow, createSequential } from '../../src/server/stores/store.js';
import type { RequestTimer } from '../../src/server/stores/zookeeper/session-requests.js';
import { ZooKeeperStore } from '../../src/server/stores/zookeeper/zookeeper-store.js';
import { deferred } from '../support/lock-caller.js';
import { RawZooKeeper } from '../support/raw-zookeeper.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { TcpProxy } from '../support/tcp-proxy.js';

/**
 * The ZooKeeper store with the lock tree watched (`locksPath`, one persistent recursive watch):
 * a create needs no listing behind it and a node no watch of its own, and what changed while
 * the connection was away (ZooKeeper does not replay it to a persistent watch) is read again.
 */
const connectString = requireZooKeeper(inject('zookeeperConnectString'));

const cleanups: Array<() => Promise<unknown> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function watchedStore(
  root: string,
  through = connectString,
  timeRequest?: RequestTimer,
): Promise<ZooKeeperStore> {
  const store = await ZooKeeperStore.connect({
    connectString: through,
    sessionTimeoutMs: 10_000,
    connectTimeoutMs: 10_000,
    logger: pino({ level: 'silent' }),
    locksPath: `${root}/locks`,
    ...(timeRequest ? { timeRequest } : {}),
  });
  cleanups.push(() => store.close());
  return store;
}

async function raw(): Promise<RawZooKeeper> {
  const connection = await RawZooKeeper.connect(connectString);
  cleanups.push(() => connection.close());
  return connection;
}

function follow(onData: (data: Uint8Array) => void, onDeleted: () => void): NodeFollow {
  return new NodeFollow({ onData, onDeleted });
}

const NO_DATA = new Uint8Array();

describe('the ZooKeeper store with its lock tree watched', () => {
  it('creates on a lock used before with no listing and no watch: its queue comes from the watch', async () => {
    const root = `/tree-view-${randomUUID()}`;
    const store = await watchedStore(root);
    const dir = `${root}/locks/used`;
    // The first create lists the new parent (or sees it made); every later one is the create alone.
    const first = await createSequential(store, dir, `first-${randomUUID()}-`, NO_DATA);
    const before = { ...store.stats };
    const second = await createSequential(store, dir, `second-${randomUUID()}-`, NO_DATA);
    expect(store.stats.childrenListings - before.childrenListings).toBe(0);
    expect(store.stats.watchesArmed - before.watchesArmed).toBe(0);
    expect(second.siblings.sort()).toEqual([first.path, second.path].map((p) => p.split('/').pop()).sort());

    // A waiter's predecessor, known to exist: its deletion comes from the tree's watch.
    const woken = deferred<void>();
    store.onceDeleted(first.path, () => woken.resolve());
    await store.delete(first.path);
    await woken.promise;
    expect(store.stats.watchesArmed - before.watchesArmed).toBe(0);
    await store.delete(second.path);
  });

  it('creates on a lock never used without a listing, its parent in the same multi: the scan of the locks path says the parent is missing', async () => {
    const root = `/tree-view-${randomUUID()}`;
    const store = await watchedStore(root);
    const seed = await createSequential(store, `${root}/locks/seed`, `seed-${randomUUID()}-`, NO_DATA);
    await store.delete(seed.path);
    const before = { ...store.stats };
    const dir = `${root}/locks/fresh-${randomUUID()}`;
    const created = await createSequential(store, dir, `first-${randomUUID()}-`, NO_DATA);
    expect(store.stats.childrenListings - before.childrenListings).toBe(0);
    expect(created.siblings).toEqual([created.path.split('/').pop()]);
    // One transaction: the parent and the node share their zxid.
    expect(await store.creationId(dir)).toBe(created.creationId);
    await store.delete(created.path);
  });

  it("tells a queue's watchers of another session's changes and answers its waiters' listings from the watch: no request", async () => {
    const root = `/tree-view-${randomUUID()}`;
    const store = await watchedStore(root);
    const other = await watchedStore(root);
    const dir = `${root}/locks/watched`;
    const mine = await createSequential(store, dir, `mine-${randomUUID()}-`, NO_DATA);
    const before = { ...store.stats };
    let changes = 0;
    let onChange = (): void => {};
    const unwatch = store.watchChildren(dir, () => {
      changes += 1;
      onChange();
    });
    const nextChange = (): Promise<void> => {
      const seen = changes;
      return new Promise((resolve) => (onChange = () => changes > seen && resolve()));
    };
    const nameOf = (path: string): string => path.split('/').pop()!;

    let changed = nextChange();
    const theirs = await createSequential(other, dir, `theirs-${randomUUID()}-`, NO_DATA);
    await changed;
    expect((await store.children(dir, { asTold: true })).sort()).toEqual(
      [nameOf(mine.path), nameOf(theirs.path)].sort(),
    );
    changed = nextChange();
    await other.delete(theirs.path);
    await changed;
    expect(await store.children(dir, { asTold: true })).toEqual([nameOf(mine.path)]);
    unwatch();
    expect(store.stats.childrenListings - before.childrenListings).toBe(0);
    await store.delete(mine.path);
  });

  it("times a waiter's listing as a request only when the store had to ask ZooKeeper", async () => {
    const root = `/tree-view-${randomUUID()}`;
    const metrics = new Metrics({ backend: 'zookeeper', confirmed: () => true });
    const store = await watchedStore(root, connectString, (operation, seconds, answered) =>
      metrics.storeOperation(operation, seconds, answered),
    );
    const listingsTimed = async (): Promise<number> => {
      const text = await metrics.registry.metrics();
      const line = /^lockstream_store_operation_seconds_count\{operation="getChildren",result="ok"\} (\d+)$/m;
      return Number(line.exec(text)?.[1] ?? 0);
    };
    const dir = `${root}/locks/timed`;
    const mine = await createSequential(store, dir, `mine-${randomUUID()}-`, NO_DATA);
    const before = { ...store.stats };
    // The tree watch's own listings so far (its start) are requests too.
    const timedBefore = await listingsTimed();
    // In step (its create was read with the watch on): the view answers, nothing is asked.
    expect(await store.children(dir, { asTold: true })).toEqual([mine.path.split('/').pop()]);
    expect(await listingsTimed()).toBe(timedBefore);
    // Outside the watched tree: asked, and timed like any listing.
    expect(await store.children(root, { asTold: true })).toEqual(['locks']);
    expect(await listingsTimed()).toBe(timedBefore + 1);
    expect(store.stats.childrenListings - before.childrenListings).toBe(1);
    await store.delete(mine.path);
  });

  it('sees nodes of another session in the siblings of a create, as a listing would', async () => {
    const root = `/tree-view-${randomUUID()}`;
    const store = await watchedStore(root);
    const other = await watchedStore(root);
    const dir = `${root}/locks/shared`;
    await createSequential(store, dir, `seed-${randomUUID()}-`, NO_DATA);
    for (let i = 0; i < 20; i += 1) {
      const [mine, theirs] = await Promise.all([
        createSequential(store, dir, `mine-${i}-`, NO_DATA),
        createSequential(other, dir, `theirs-${i}-`, NO_DATA),
      ]);
      const listed = await store.children(dir);
      // Everything created before mine is in my siblings (later ones may be too, behind it, as
      // in a listing sent after the create): theirs whenever it came first.
      const nameOf = (path: string): string => path.split('/').pop()!;
      const sequence = (path: string): string => nameOf(path).slice(-10);
      const ahead = listed.filter((name) => name.slice(-10) < sequence(mine.path));
      expect(mine.siblings).toEqual(expect.arrayContaining([...ahead, nameOf(mine.path)]));
      if (sequence(theirs.path) < sequence(mine.path)) expect(mine.siblings).toContain(nameOf(theirs.path));
    }
  });

  it('wakes a waiter whose predecessor went while the connection was away, once it is back', async () => {
    const root = `/tree-view-${randomUUID()}`;
    const proxy = await TcpProxy.start(connectString);
    cleanups.push(() => proxy.close());
    const store = await watchedStore(root, proxy.address);
    const zk = await raw();
    const dir = `${root}/locks/gap`;
    const ahead = await createSequential(store, dir, `ahead-${randomUUID()}-`, NO_DATA);
    const behind = await createSequential(store, dir, `behind-${randomUUID()}-`, NO_DATA);
    expect(behind.siblings).toHaveLength(2);
    const woken = deferred<void>();
    store.onceDeleted(ahead.path, () => woken.resolve());

    // Away: the deletion is made by someone else and nobody tells the store's session of it.
    proxy.freeze();
    expect((await zk.delete(ahead.path)).rc).toBe(0);
    proxy.severAll();
    // The same session on a new connection: the watch is set again, and what it missed is read.
    await woken.promise;
    await store.delete(behind.path);
  });

  it('tells a follower of a change made while the connection was away, once it is back', async () => {
    const root = `/tree-view-${randomUUID()}`;
    const proxy = await TcpProxy.start(connectString);
    cleanups.push(() => proxy.close());
    const store = await watchedStore(root, proxy.address);
    const zk = await raw();
    const dir = `${root}/locks/followed`;
    await createSequential(store, dir, `seed-${randomUUID()}-`, NO_DATA);
    const changed = deferred<string>();
    const created = await createSequential(
      store,
      dir,
      `held-${randomUUID()}-`,
      new TextEncoder().encode('start'),
      follow(
        (data) => changed.resolve(new TextDecoder().decode(data)),
        () => changed.resolve('deleted'),
      ),
    );
    expect(created.followed).toMatchObject({ version: 0 });

    proxy.freeze();
    expect((await zk.setData(created.path, 'asked back')).rc).toBe(0);
    proxy.severAll();
    expect(await changed.promise).toBe('asked back');
    await store.delete(created.path);
  });
});
