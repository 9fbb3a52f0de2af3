import { createHash, randomUUID } from 'node:crypto';
import { afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { ZooKeeperConnection } from '../../src/server/stores/zookeeper/protocol/connection.js';
import { ZooKeeperError } from '../../src/server/stores/zookeeper/protocol/zookeeper-error.js';
import {
  CreateMode,
  ErrorCode,
  EventType,
  OPEN_ACL_UNSAFE,
  Perms,
  type WatcherEvent,
} from '../../src/server/stores/zookeeper/protocol/records.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';

/** The TypeScript ZooKeeper client against a real ZooKeeper (the test setup's standalone server). */

const connectString = requireZooKeeper(inject('zookeeperConnectString'));
const servers = connectString.split(',');
const opened: ZooKeeperConnection[] = [];

async function connect(auth?: string): Promise<ZooKeeperConnection> {
  const connection = await ZooKeeperConnection.connect({
    servers,
    sessionTimeoutMs: 10_000,
    ...(auth === undefined ? {} : { auth: [{ scheme: 'digest', credentials: auth }] }),
  });
  opened.push(connection);
  return connection;
}

function nextEvent(): { watcher: (event: WatcherEvent) => void; event: Promise<WatcherEvent> } {
  let watcher!: (event: WatcherEvent) => void;
  const event = new Promise<WatcherEvent>((resolve) => (watcher = resolve));
  return { watcher, event };
}

const text = (value: string): Buffer => Buffer.from(value, 'utf8');

describe('ZooKeeperConnection (wire protocol in TypeScript)', () => {
  let root: string;

  beforeAll(async () => {
    root = `/protocol-${randomUUID()}`;
    const zk = await connect();
    await zk.create(root, text(''), OPEN_ACL_UNSAFE, CreateMode.persistent);
  });

  afterEach(async () => {
    await Promise.all(opened.splice(0).map((connection) => connection.close()));
  });

  it('creates a node and answers with its Stat (create2): the czxid is the one a read sees, as a bigint', async () => {
    const zk = await connect();
    expect(zk.sessionId).toBeGreaterThan(0n);
    expect(zk.sessionTimeoutMs).toBeGreaterThan(0);
    const created = await zk.create(
      `${root}/lock-`,
      text('me'),
      OPEN_ACL_UNSAFE,
      CreateMode.ephemeralSequential,
    );
    expect(created.path).toMatch(new RegExp(`^${root}/lock-\\d{10}$`));
    expect(typeof created.stat.czxid).toBe('bigint');
    expect(created.stat.ephemeralOwner).toBe(zk.sessionId);
    const read = await zk.getData(created.path);
    expect(read.data.toString()).toBe('me');
    expect(read.stat.czxid).toBe(created.stat.czxid);
    expect(zk.lastZxid).toBeGreaterThanOrEqual(created.stat.czxid);
    await zk.delete(created.path);
    await expect(zk.getData(created.path)).rejects.toMatchObject({ code: ErrorCode.noNode });
  });

  it('answers requests issued together in order, in one batch each way', async () => {
    const zk = await connect();
    const creates = Array.from({ length: 300 }, (_, i) =>
      zk.create(`${root}/batch-`, text(String(i)), OPEN_ACL_UNSAFE, CreateMode.ephemeralSequential),
    );
    const created = await Promise.all(creates);
    const sequence = created.map((node) => Number(node.path.slice(-10)));
    expect(sequence).toEqual([...sequence].sort((a, b) => a - b));
    expect(new Set(sequence).size).toBe(300);
    const czxids = created.map((node) => node.stat.czxid);
    for (let i = 1; i < czxids.length; i += 1) expect(czxids[i]!).toBeGreaterThan(czxids[i - 1]!);
    const data = await Promise.all(created.map((node) => zk.getData(node.path)));
    expect(data.map((read) => read.data.toString())).toEqual(created.map((_, i) => String(i)));
  });

  it('delivers data, existence and child watches once each', async () => {
    const zk = await connect();
    const other = await connect();
    const path = `${root}/watched-${randomUUID()}`;
    const created = nextEvent();
    expect(await zk.exists(path, created.watcher)).toBeNull();
    const children = nextEvent();
    await zk.getChildren(root, children.watcher);
    await other.create(path, text('a'), OPEN_ACL_UNSAFE, CreateMode.persistent);
    expect(await created.event).toMatchObject({ type: EventType.nodeCreated, path });
    expect(await children.event).toMatchObject({ type: EventType.nodeChildrenChanged, path: root });

    const changed = nextEvent();
    await zk.getData(path, changed.watcher);
    await other.setData(path, text('b'));
    expect(await changed.event).toMatchObject({ type: EventType.nodeDataChanged, path });

    const deleted = nextEvent();
    expect((await zk.getData(path, deleted.watcher)).data.toString()).toBe('b');
    await other.delete(path);
    expect(await deleted.event).toMatchObject({ type: EventType.nodeDeleted, path });
  });

  it('arms watches on requests pipelined with the changes they watch for', async () => {
    const zk = await connect();
    const path = `${root}/behind-${randomUUID()}`;
    // One batch each way: exists (NONODE, arms an existence watch), the create it watches for,
    // a getData watch on it and a getChildren watch on its parent, then the delete; the
    // watches are armed as their replies are read, before anything read after them.
    const created = nextEvent();
    const deleted = nextEvent();
    const childrenChanged = nextEvent();
    const [missing] = await Promise.all([
      zk.exists(path, created.watcher),
      zk.create(path, text('x'), OPEN_ACL_UNSAFE, CreateMode.persistent),
      zk.getData(path, deleted.watcher),
      zk.getChildren(root, childrenChanged.watcher),
      zk.delete(path),
    ]);
    expect(missing).toBeNull();
    expect(await created.event).toMatchObject({ type: EventType.nodeCreated, path });
    expect(await deleted.event).toMatchObject({ type: EventType.nodeDeleted, path });
    expect(await childrenChanged.event).toMatchObject({ type: EventType.nodeChildrenChanged, path: root });
  });

  it('creates a node with its ACL in the create itself: other identities cannot read or write it', async () => {
    const credentials = `lockstream:${randomUUID()}`;
    const [user] = credentials.split(':');
    const hash = createHash('sha1').update(credentials, 'utf8').digest('base64');
    const acl = [{ perms: Perms.all, scheme: 'digest', id: `${user}:${hash}` }];
    const owner = await connect(credentials);
    const stranger = await connect();
    const wrong = await connect(`lockstream:not-${randomUUID()}`);
    // Deleting a node takes DELETE on its parent: lockstream's parents carry the ACL too.
    const parent = await owner.create(
      `${root}/protected-${randomUUID()}`,
      text(''),
      acl,
      CreateMode.container,
    );
    const node = await owner.create(
      `${parent.path}/lock-`,
      text('secret'),
      acl,
      CreateMode.ephemeralSequential,
    );
    expect((await owner.getACL(node.path)).acl).toEqual(acl);
    expect((await owner.getData(node.path)).data.toString()).toBe('secret');
    for (const outsider of [stranger, wrong]) {
      await expect(outsider.getData(node.path)).rejects.toMatchObject({ code: ErrorCode.noAuth });
      await expect(outsider.setData(node.path, text('revoke'))).rejects.toMatchObject({
        code: ErrorCode.noAuth,
      });
      await expect(outsider.delete(node.path)).rejects.toMatchObject({ code: ErrorCode.noAuth });
    }
    await expect(stranger.getChildren(parent.path)).rejects.toMatchObject({ code: ErrorCode.noAuth });
    // Existence is not protected by ZooKeeper's ACLs.
    expect(await stranger.exists(node.path)).not.toBeNull();
    expect((await owner.getData(node.path)).data.toString()).toBe('secret');
  });

  it('applies a multi atomically: all of its operations, or none', async () => {
    const zk = await connect();
    const base = `${root}/multi-${randomUUID()}`;
    const results = await zk.multi([
      { op: 'create', path: base, data: text(''), acl: OPEN_ACL_UNSAFE, mode: CreateMode.persistent },
      {
        op: 'create',
        path: `${base}/a-`,
        data: text('x'),
        acl: OPEN_ACL_UNSAFE,
        mode: CreateMode.ephemeralSequential,
      },
      { op: 'check', path: base, version: 0 },
    ]);
    expect(results.map((result) => result.op)).toEqual(['create', 'create', 'check']);
    const child = results[1];
    if (child?.op !== 'create') throw new Error('INVARIANT: not a create');
    expect(child.path).toMatch(/\/a-\d{10}$/);
    expect((await zk.getData(child.path)).stat.czxid).toBe(child.czxid);

    const failing = zk.multi([
      { op: 'create', path: `${base}/b`, data: text(''), acl: OPEN_ACL_UNSAFE, mode: CreateMode.persistent },
      { op: 'create', path: base, data: text(''), acl: OPEN_ACL_UNSAFE, mode: CreateMode.persistent },
    ]);
    await expect(failing).rejects.toBeInstanceOf(ZooKeeperError);
    await expect(failing).rejects.toMatchObject({ code: ErrorCode.nodeExists });
    expect(await zk.exists(`${base}/b`)).toBeNull();
  });

  it('reads the children of many nodes in one multiRead, each path failing alone', async () => {
    const zk = await connect();
    const base = `${root}/multi-read-${randomUUID()}`;
    await zk.create(base, text(''), OPEN_ACL_UNSAFE, CreateMode.persistent);
    await Promise.all(
      ['a', 'b', 'empty'].map((name) =>
        zk.create(`${base}/${name}`, text(''), OPEN_ACL_UNSAFE, CreateMode.persistent),
      ),
    );
    await Promise.all(
      ['a/1', 'a/2', 'b/3'].map((name) =>
        zk.create(`${base}/${name}`, text(''), OPEN_ACL_UNSAFE, CreateMode.persistent),
      ),
    );
    const credentials = `lockstream:${randomUUID()}`;
    const hash = createHash('sha1').update(credentials, 'utf8').digest('base64');
    const closed = await zk.create(
      `${base}/closed`,
      text(''),
      [{ perms: Perms.all, scheme: 'digest', id: `lockstream:${hash}` }],
      CreateMode.persistent,
    );

    const results = await zk.multiGetChildren([
      `${base}/a`,
      `${base}/missing`,
      `${base}/b`,
      closed.path,
      `${base}/empty`,
      `${base}/a`,
    ]);
    expect(
      results.map((result) => ('children' in result ? [...result.children].sort() : result.err)),
    ).toEqual([['1', '2'], ErrorCode.noNode, ['3'], ErrorCode.noAuth, [], ['1', '2']]);
    expect(await zk.multiGetChildren([])).toEqual([]);
  });

  it("lists a session's own ephemeral nodes under a prefix (getEphemerals), also under a chroot", async () => {
    const zk = await connect();
    const other = await connect();
    const base = `${root}/ephemerals-${randomUUID()}`;
    await zk.create(base, text(''), OPEN_ACL_UNSAFE, CreateMode.persistent);
    await Promise.all(
      ['a', 'b'].map((name) =>
        zk.create(`${base}/${name}`, text(''), OPEN_ACL_UNSAFE, CreateMode.persistent),
      ),
    );
    const mine = await Promise.all([
      zk.create(`${base}/a/n-`, text(''), OPEN_ACL_UNSAFE, CreateMode.ephemeralSequential),
      zk.create(`${base}/a/n-`, text(''), OPEN_ACL_UNSAFE, CreateMode.ephemeralSequential),
      zk.create(`${base}/b/n-`, text(''), OPEN_ACL_UNSAFE, CreateMode.ephemeralSequential),
    ]);
    const theirs = await other.create(
      `${base}/a/n-`,
      text(''),
      OPEN_ACL_UNSAFE,
      CreateMode.ephemeralSequential,
    );
    await zk.create(`${base}/a/persistent`, text(''), OPEN_ACL_UNSAFE, CreateMode.persistent);

    expect((await zk.getEphemerals(`${base}/a/`)).sort()).toEqual([mine[0].path, mine[1].path].sort());
    expect((await zk.getEphemerals(base)).sort()).toEqual(mine.map((node) => node.path).sort());
    expect(await other.getEphemerals(base)).toEqual([theirs.path]);
    expect(await zk.getEphemerals('/')).toEqual(expect.arrayContaining(mine.map((node) => node.path)));

    const chrooted = await ZooKeeperConnection.connect({ servers, sessionTimeoutMs: 10_000, chroot: base });
    opened.push(chrooted);
    const inside = await chrooted.create('/b/n-', text(''), OPEN_ACL_UNSAFE, CreateMode.ephemeralSequential);
    expect(inside.path).toMatch(/^\/b\/n-\d{10}$/);
    expect(await chrooted.getEphemerals('/')).toEqual([inside.path]);
    expect(await chrooted.getEphemerals('/a')).toEqual([]);
  });

  it('creates containers, which ZooKeeper may remove once empty', async () => {
    const zk = await connect();
    const path = `${root}/container-${randomUUID()}`;
    const created = await zk.create(path, text(''), OPEN_ACL_UNSAFE, CreateMode.container);
    expect(created.path).toBe(path);
    await expect(zk.create(path, text(''), OPEN_ACL_UNSAFE, CreateMode.container)).rejects.toMatchObject({
      code: ErrorCode.nodeExists,
    });
  });

  it('creates a container and its first child in one multi; ZooKeeper removes the container once the child is gone', async () => {
    const zk = await connect();
    const path = `${root}/container-${randomUUID()}`;
    const [parent, child] = await zk.multi([
      { op: 'create', path, data: text(''), acl: OPEN_ACL_UNSAFE, mode: CreateMode.container },
      {
        op: 'create',
        path: `${path}/n-`,
        data: text(''),
        acl: OPEN_ACL_UNSAFE,
        mode: CreateMode.ephemeralSequential,
      },
    ]);
    expect(parent).toMatchObject({ op: 'create', path });
    expect(child).toMatchObject({ op: 'create', path: `${path}/n-0000000000` });
    const gone = nextEvent();
    expect(await zk.exists(path, gone.watcher)).not.toBeNull();
    await zk.delete(`${path}/n-0000000000`, -1);
    // The tests' ZooKeeper looks for empty containers every second; a plain node would stay.
    expect(await gone.event).toMatchObject({ type: EventType.nodeDeleted, path });
  });

  it('ends the session on close: its ephemeral nodes are gone for everyone', async () => {
    const zk = await connect();
    const observer = await connect();
    const node = await zk.create(
      `${root}/ephemeral-`,
      text(''),
      OPEN_ACL_UNSAFE,
      CreateMode.ephemeralSequential,
    );
    const gone = nextEvent();
    expect(await observer.exists(node.path, gone.watcher)).not.toBeNull();
    await zk.close();
    expect(await gone.event).toMatchObject({ type: EventType.nodeDeleted, path: node.path });
    await expect(zk.getData(node.path)).rejects.toMatchObject({ code: ErrorCode.sessionExpired });
  });
});
