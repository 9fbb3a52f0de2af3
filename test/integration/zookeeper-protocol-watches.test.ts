import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { ZooKeeperConnection } from '../../src/server/stores/zookeeper/protocol/connection.js';
import type { PersistentWatcher } from '../../src/server/stores/zookeeper/protocol/persistent-watches.js';
import {
  AddWatchMode,
  CreateMode,
  ErrorCode,
  EventType,
  OPEN_ACL_UNSAFE,
  type WatcherEvent,
} from '../../src/server/stores/zookeeper/protocol/records.js';
import type { ZooKeeperError } from '../../src/server/stores/zookeeper/protocol/zookeeper-error.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { watchesUnder } from '../support/zookeeper-watches.js';

/**
 * Persistent watches (addWatch, ZooKeeper 3.6+) of the TypeScript ZooKeeper client, against a
 * real ZooKeeper: not used up by their events, set again on a new connection (with the gap
 * reported), and told in zxid order with the session's replies.
 */

const connectString = requireZooKeeper(inject('zookeeperConnectString'));
const servers = connectString.split(',');
const zookeeperPort = Number(connectString.split(':')[1]);
const closers: Array<() => Promise<void>> = [];

async function connect(through: string[] = servers): Promise<ZooKeeperConnection> {
  const connection = await ZooKeeperConnection.connect({ servers: through, sessionTimeoutMs: 10_000 });
  closers.push(() => connection.close());
  return connection;
}

/** A persistent watcher that records what it hears, and resolves waits for what it expects. */
class Recorder implements PersistentWatcher {
  readonly events: Array<Pick<WatcherEvent, 'type' | 'path'>> = [];
  resumes = 0;
  ends: ZooKeeperError[] = [];
  readonly #waits: Array<{ readonly done: () => boolean; readonly wake: () => void }> = [];

  changed({ type, path }: WatcherEvent): void {
    this.events.push({ type, path });
    this.#check();
  }

  resumed(): void {
    this.resumes += 1;
    this.#check();
  }

  ended(reason: ZooKeeperError): void {
    this.ends.push(reason);
    this.#check();
  }

  /** Resolves once `done()` holds (checked now and after each thing heard). */
  until(done: () => boolean): Promise<void> {
    if (done()) return Promise.resolve();
    return new Promise((wake) => this.#waits.push({ done, wake }));
  }

  /** Resolves once `count` events were heard. */
  heard(count: number): Promise<void> {
    return this.until(() => this.events.length >= count);
  }

  #check(): void {
    for (const wait of [...this.#waits]) {
      if (!wait.done()) continue;
      this.#waits.splice(this.#waits.indexOf(wait), 1);
      wait.wake();
    }
  }
}

const empty = Buffer.alloc(0);
const created = (path: string): Pick<WatcherEvent, 'type' | 'path'> => ({
  type: EventType.nodeCreated,
  path,
});
const deleted = (path: string): Pick<WatcherEvent, 'type' | 'path'> => ({
  type: EventType.nodeDeleted,
  path,
});

describe('ZooKeeperConnection persistent watches (addWatch)', () => {
  let root: string;

  beforeAll(async () => {
    root = `/persistent-watches-${randomUUID()}`;
    const zk = await connect();
    await zk.create(root, empty, OPEN_ACL_UNSAFE, CreateMode.persistent);
  });

  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  it('hears every creation, change and deletion below its path, again and again, until removed', async () => {
    const zk = await connect();
    const other = await connect();
    const base = `${root}/recursive-${randomUUID()}`;
    const watcher = new Recorder();
    // The node need not exist: its own creation is heard too.
    await zk.addWatch(base, AddWatchMode.persistentRecursive, watcher);
    expect([...(await watchesUnder(zookeeperPort, base)).keys()]).toEqual([base]);

    await other.create(base, empty, OPEN_ACL_UNSAFE, CreateMode.persistent);
    await other.create(`${base}/a`, empty, OPEN_ACL_UNSAFE, CreateMode.persistent);
    await other.create(`${base}/a/b`, empty, OPEN_ACL_UNSAFE, CreateMode.persistent);
    await other.setData(`${base}/a/b`, Buffer.from('1'));
    await other.setData(`${base}/a/b`, Buffer.from('2'));
    await other.delete(`${base}/a/b`);
    await other.create(`${base}/a/b`, empty, OPEN_ACL_UNSAFE, CreateMode.persistent);
    await other.create(`${root}/beside-${randomUUID()}`, empty, OPEN_ACL_UNSAFE, CreateMode.ephemeral);
    await other.delete(`${base}/a/b`);
    await watcher.heard(8);
    // No NodeChildrenChanged (recursive watches never hear them), nothing from beside the path.
    expect(watcher.events).toEqual([
      created(base),
      created(`${base}/a`),
      created(`${base}/a/b`),
      { type: EventType.nodeDataChanged, path: `${base}/a/b` },
      { type: EventType.nodeDataChanged, path: `${base}/a/b` },
      deleted(`${base}/a/b`),
      created(`${base}/a/b`),
      deleted(`${base}/a/b`),
    ]);

    // Removed: the server forgets it. A change below it, then one under a watch still set (events
    // come in order): the second is heard, the first is not.
    const still = new Recorder();
    await zk.addWatch(`${root}/still`, AddWatchMode.persistentRecursive, still);
    await zk.removeWatches(base, watcher);
    expect((await watchesUnder(zookeeperPort, base)).size).toBe(0);
    await other.create(`${base}/after-removal`, empty, OPEN_ACL_UNSAFE, CreateMode.ephemeral);
    await other.create(`${root}/still`, empty, OPEN_ACL_UNSAFE, CreateMode.ephemeral);
    await still.heard(1);
    expect(watcher.events).toHaveLength(8);
    await zk.removeWatches(`${root}/still`, still);
  });

  it('hears only its own node, children changes included, with mode PERSISTENT', async () => {
    const zk = await connect();
    const other = await connect();
    const base = `${root}/persistent-${randomUUID()}`;
    const watcher = new Recorder();
    await zk.addWatch(base, AddWatchMode.persistent, watcher);
    await other.create(base, empty, OPEN_ACL_UNSAFE, CreateMode.persistent);
    await other.create(`${base}/child`, empty, OPEN_ACL_UNSAFE, CreateMode.persistent);
    await other.create(`${base}/child/grandchild`, empty, OPEN_ACL_UNSAFE, CreateMode.persistent);
    await other.setData(base, Buffer.from('x'));
    await other.delete(`${base}/child/grandchild`);
    await other.delete(`${base}/child`);
    await other.delete(base);
    await watcher.heard(5);
    expect(watcher.events).toEqual([
      created(base),
      { type: EventType.nodeChildrenChanged, path: base },
      { type: EventType.nodeDataChanged, path: base },
      { type: EventType.nodeChildrenChanged, path: base },
      deleted(base),
    ]);
  });

  it('refuses, without asking the server, a watch that would end another on ZooKeeper 3.6 to 3.8', async () => {
    const zk = await connect();
    const path = `${root}/modes-${randomUUID()}`;
    await zk.addWatch(path, AddWatchMode.persistentRecursive, new Recorder());
    await expect(zk.addWatch(path, AddWatchMode.persistent, new Recorder())).rejects.toThrow(
      /watches it PERSISTENT_RECURSIVE already \(ZooKeeper 3\.6 to 3\.8 keep one watch mode/,
    );
    await expect(zk.exists(path, () => {})).rejects.toThrow(/watches .* persistently/);
    const oneShot = `${root}/one-shot-${randomUUID()}`;
    await zk.exists(oneShot, () => {});
    await expect(zk.addWatch(oneShot, AddWatchMode.persistent, new Recorder())).rejects.toThrow(
      /has a one-shot watch on it/,
    );
    // A second watcher in the same mode shares the server's watch.
    const second = new Recorder();
    await zk.addWatch(path, AddWatchMode.persistentRecursive, second);
    await (await connect()).create(path, empty, OPEN_ACL_UNSAFE, CreateMode.ephemeral);
    await second.heard(1);
  });

  it('is set again after a reconnect, and tells its owner of the gap before any later reply', async () => {
    const proxy = await TcpProxy.start(servers[0]!);
    closers.push(() => proxy.close());
    const zk = await connect([proxy.address]);
    const other = await connect();
    const base = `${root}/gap-${randomUUID()}`;
    await other.create(base, empty, OPEN_ACL_UNSAFE, CreateMode.persistent);
    const watcher = new Recorder();
    await zk.addWatch(base, AddWatchMode.persistentRecursive, watcher);
    const oneShot: WatcherEvent[] = [];
    const oneShotPath = `${root}/gap-one-shot-${randomUUID()}`;
    expect(await zk.exists(oneShotPath, (event) => oneShot.push(event))).toBeNull();

    // The link goes silent; what changes meanwhile is told on the old connection, which is then
    // cut with it (the proxy drops what it held).
    proxy.freeze();
    await other.create(`${base}/missed`, empty, OPEN_ACL_UNSAFE, CreateMode.persistent);
    await other.create(oneShotPath, empty, OPEN_ACL_UNSAFE, CreateMode.ephemeral);
    const disconnected = once(zk, 'disconnected');
    proxy.severAll();
    await disconnected;
    await once(zk, 'connected');
    // Sent right behind the SetWatches2 the connection restores its watches with.
    const resumesAtReply = await zk.getData(base).then(() => watcher.resumes);
    expect(resumesAtReply).toBe(1);
    // ZooKeeper replays a one-shot watch's change relative to the last zxid seen, and not a
    // persistent watch's (DataTree.setWatches): the owner re-reads after `resumed`.
    expect(oneShot.map(({ type, path }) => ({ type, path }))).toEqual([created(oneShotPath)]);
    expect(watcher.events).toEqual([]);
    expect(await zk.getChildren(base)).toEqual(['missed']);

    await other.create(`${base}/after`, empty, OPEN_ACL_UNSAFE, CreateMode.persistent);
    await other.delete(`${base}/after`);
    await watcher.heard(2);
    expect(watcher.events).toEqual([created(`${base}/after`), deleted(`${base}/after`)]);
    expect(watcher.ends).toEqual([]);
  });

  it('tells each creation and deletion before any reply with a higher zxid, with two sessions racing', async () => {
    // ZooKeeper Programmer's Guide, "What ZooKeeper Guarantees about Watches": "Watches are
    // ordered with respect to other events, other watches, and asynchronous replies", and "a
    // client will see a watch event for a znode it is watching before seeing the new data that
    // corresponds to that znode". One session hears its events and replies in zxid order: when
    // A reads a reply with zxid z, every change under its watch with a lower zxid, its own or
    // B's, has been told to A already. The connection raises `lastZxid` as it reads each reply,
    // before the reply's promise settles, so the `lastZxid` an event finds is the highest zxid
    // of the replies read before it: it must be lower than the event's own change.
    const a = await connect();
    const b = await connect();
    const parent = `${root}/race-${randomUUID()}`;
    await a.create(parent, empty, OPEN_ACL_UNSAFE, CreateMode.persistent);
    const perSession = 300;
    const total = 2 * 2 * perSession;
    const heard: Array<{ readonly key: string; readonly repliesUpTo: bigint }> = [];
    let allHeard!: () => void;
    const complete = new Promise<void>((resolve) => (allHeard = resolve));
    await a.addWatch(parent, AddWatchMode.persistentRecursive, {
      changed: ({ type, path }) => {
        heard.push({ key: `${type} ${path}`, repliesUpTo: a.lastZxid });
        if (heard.length === total) allHeard();
      },
      resumed: () => {},
      ended: () => {},
    });

    // Both sessions pipeline their creates in the same turn: ZooKeeper interleaves them.
    const createAll = (
      zk: ZooKeeperConnection,
      owner: string,
    ): Array<Promise<{ path: string; czxid: bigint }>> =>
      Array.from({ length: perSession }, () =>
        zk
          .create(`${parent}/${owner}-`, empty, OPEN_ACL_UNSAFE, CreateMode.ephemeralSequential)
          .then(({ path, stat }) => ({ path, czxid: stat.czxid })),
      );
    const [ofA, ofB] = await Promise.all([Promise.all(createAll(a, 'a')), Promise.all(createAll(b, 'b'))]);
    const zxidOf = new Map<string, bigint>();
    for (const { path, czxid } of [...ofA, ...ofB]) zxidOf.set(`${EventType.nodeCreated} ${path}`, czxid);
    const lastOfA = ofA.at(-1)!.czxid;
    expect(ofB.some(({ czxid }) => czxid > ofA[0]!.czxid && czxid < lastOfA)).toBe(true);

    // Each session deletes every other node, A's and B's alike, again in the same turn.
    const nodes = [...ofA, ...ofB].sort((x, y) => (x.czxid < y.czxid ? -1 : 1));
    const deleteShare = (zk: ZooKeeperConnection, share: number): Array<Promise<void>> =>
      nodes
        .filter((_, index) => index % 2 === share)
        .map(({ path }) =>
          zk.delete(path).then((zxid) => void zxidOf.set(`${EventType.nodeDeleted} ${path}`, zxid)),
        );
    await Promise.all([...deleteShare(a, 0), ...deleteShare(b, 1)]);
    await complete;

    expect(heard.map(({ key }) => key).sort()).toEqual([...zxidOf.keys()].sort());
    const toldLate = heard.filter(({ key, repliesUpTo }) => repliesUpTo >= zxidOf.get(key)!);
    expect(toldLate).toEqual([]);
    const order = heard.map(({ key }) => zxidOf.get(key)!);
    expect(order).toEqual([...order].sort((x, y) => (x < y ? -1 : 1)));
  });

  it('ends with its session, and tells its owner', async () => {
    const zk = await connect();
    const watcher = new Recorder();
    await zk.addWatch(`${root}/expiring-${randomUUID()}`, AddWatchMode.persistentRecursive, watcher);
    const expired = once(zk, 'expired');
    // Another connection on the same session closes it: ZooKeeper expires it for this one. If this
    // one takes the session back first, the close misses: then again (as zookeeper-faults does).
    const session = { id: zk.sessionId, password: zk.sessionPassword };
    let isExpired = false;
    void expired.then(() => (isExpired = true));
    for (let attempt = 1; !isExpired; attempt += 1) {
      if (attempt > 20) throw new Error(`session did not expire after ${attempt - 1} closes`);
      const twin = await ZooKeeperConnection.connect({ servers, sessionTimeoutMs: 10_000, session }).catch(
        () => undefined,
      );
      await twin?.close();
      await Promise.race([expired, new Promise((resolve) => setTimeout(resolve, 500))]);
    }
    expect(watcher.ends.map((reason) => reason.code)).toEqual([ErrorCode.sessionExpired]);
  });
});
