import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZooKeeperConnection } from '../../src/server/stores/zookeeper/protocol/connection.js';
import {
  CreateMode,
  ErrorCode,
  EventType,
  KeeperState,
  OPEN_ACL_UNSAFE,
  type WatcherEvent,
} from '../../src/server/stores/zookeeper/protocol/records.js';
import { startZooKeeperEnsemble, type ZooKeeperEnsemble } from '../setup/zookeeper-ensemble.js';
import { scaled } from '../support/timing.js';

/**
 * The TypeScript ZooKeeper client on a real three-member ensemble: when its member dies it
 * moves to another with the same session, its ephemeral nodes and its watches (set again from
 * the last zxid it saw, so a change made while it was away still fires), and an expired
 * session ends it for good.
 */

function pick({ type, state, path }: WatcherEvent): Partial<WatcherEvent> {
  return type === EventType.none ? { type, state, path } : { type, path };
}

function nextEvent(): { watcher: (event: WatcherEvent) => void; event: Promise<WatcherEvent> } {
  let watcher!: (event: WatcherEvent) => void;
  const event = new Promise<WatcherEvent>((resolve) => (watcher = resolve));
  return { watcher, event };
}

describe('ZooKeeperConnection on a three-member ensemble', () => {
  let ensemble: ZooKeeperEnsemble;

  beforeAll(async () => {
    ensemble = await startZooKeeperEnsemble();
  }, scaled(100_000));

  afterAll(async () => {
    await ensemble?.stop();
  });

  it(
    'moves to another member with its session, ephemerals and watches when its member dies',
    async () => {
      const servers = ensemble.members.map((member) => member.connectString);
      // The client starts at the first member it is given; the observer at another one.
      const zk = await ZooKeeperConnection.connect({ servers, sessionTimeoutMs: 20_000 });
      const observer = await ZooKeeperConnection.connect({
        servers: [servers[1]!, servers[2]!],
        sessionTimeoutMs: 20_000,
      });
      try {
        const base = `/moves-${randomUUID()}`;
        await zk.create(base, Buffer.alloc(0), OPEN_ACL_UNSAFE, CreateMode.persistent);
        const mine = await zk.create(
          `${base}/lock-`,
          Buffer.from('mine'),
          OPEN_ACL_UNSAFE,
          CreateMode.ephemeralSequential,
        );
        const other = await observer.create(
          `${base}/other`,
          Buffer.from('1'),
          OPEN_ACL_UNSAFE,
          CreateMode.persistent,
        );
        const changed = nextEvent();
        await zk.getData(other.path, changed.watcher);
        const children = nextEvent();
        await zk.getChildren(base, children.watcher);
        const sessionId = zk.sessionId;

        const disconnected = once(zk, 'disconnected');
        const reconnected = once(zk, 'connected');
        await ensemble.members[0]!.kill();
        await disconnected;
        // While it is away: a request fails with CONNECTIONLOSS, and the watched node changes.
        await expect(zk.exists(base)).rejects.toMatchObject({ code: ErrorCode.connectionLoss });
        await observer.setData(other.path, Buffer.from('2'));
        await reconnected;
        expect(zk.sessionId).toBe(sessionId);
        // The change made while it was away fires the watch set before (setWatches from the last zxid seen).
        expect(await changed.event).toMatchObject({ type: EventType.nodeDataChanged, path: other.path });
        // Its ephemeral node lived through the move; a child watch set before still fires.
        expect((await observer.getData(mine.path)).stat.ephemeralOwner).toBe(sessionId);
        await observer.create(`${base}/late`, Buffer.alloc(0), OPEN_ACL_UNSAFE, CreateMode.persistent);
        expect(await children.event).toMatchObject({ type: EventType.nodeChildrenChanged, path: base });
      } finally {
        await zk.close();
        await observer.close();
        await ensemble.members[0]!.restart();
      }
    },
    scaled(60_000),
  );

  it(
    'leaves a frozen member within two thirds of the session timeout, keeping its session',
    async () => {
      const servers = ensemble.members.map((member) => member.connectString);
      const zk = await ZooKeeperConnection.connect({
        servers: [servers[1]!, servers[2]!],
        sessionTimeoutMs: 9_000,
      });
      const frozen = ensemble.members[1]!;
      try {
        const node = await zk.create(
          `/frozen-${randomUUID()}`,
          Buffer.alloc(0),
          OPEN_ACL_UNSAFE,
          CreateMode.ephemeral,
        );
        const sessionId = zk.sessionId;
        const disconnected = once(zk, 'disconnected');
        const reconnected = once(zk, 'connected');
        const frozenAt = performance.now();
        frozen.pause();
        await disconnected;
        // Its socket is open and silent: only the receive timeout can notice.
        expect(performance.now() - frozenAt).toBeLessThan(zk.sessionTimeoutMs);
        await reconnected;
        expect(zk.sessionId).toBe(sessionId);
        expect((await zk.exists(node.path))?.ephemeralOwner).toBe(sessionId);
      } finally {
        frozen.resume();
        await zk.close();
      }
    },
    scaled(60_000),
  );

  it(
    'passes over a frozen member while it dials: each member gets its share of the session timeout',
    async () => {
      const servers = ensemble.members.map((member) => member.connectString);
      const frozen = ensemble.members[0]!;
      frozen.pause();
      try {
        // The frozen member's kernel accepts the TCP connection; the handshake is never answered.
        const startedAt = performance.now();
        const zk = await ZooKeeperConnection.connect({ servers, sessionTimeoutMs: 9_000 });
        try {
          expect(performance.now() - startedAt).toBeLessThan(9_000);
          const node = await zk.create(
            `/past-frozen-${randomUUID()}`,
            Buffer.alloc(0),
            OPEN_ACL_UNSAFE,
            CreateMode.ephemeral,
          );
          expect((await zk.exists(node.path))?.ephemeralOwner).toBe(zk.sessionId);
        } finally {
          await zk.close();
        }
      } finally {
        frozen.resume();
      }
    },
    scaled(60_000),
  );

  it(
    'ends for good when its session expires: expired, requests refused, watches told, ephemerals gone',
    async () => {
      const servers = ensemble.members.map((member) => member.connectString);
      const zk = await ZooKeeperConnection.connect({ servers, sessionTimeoutMs: 20_000 });
      const observer = await ZooKeeperConnection.connect({ servers, sessionTimeoutMs: 20_000 });
      try {
        const node = await zk.create(
          `/expiring-${randomUUID()}`,
          Buffer.alloc(0),
          OPEN_ACL_UNSAFE,
          CreateMode.ephemeral,
        );
        const told = nextEvent();
        await zk.getData(node.path, told.watcher);
        const expired = once(zk, 'expired');
        // Another connection on the same session closes it: ZooKeeper expires it as it would a silent one.
        const twin = await ZooKeeperConnection.connect({
          servers: [servers[2]!],
          sessionTimeoutMs: 20_000,
          session: { id: zk.sessionId, password: zk.sessionPassword },
        });
        await twin.close();
        await expired;
        // The watch fires once: with the node's deletion when the closing session's delete reaches
        // this connection's member before the connection learns of the expiry, else with the expiry.
        expect([
          { type: EventType.nodeDeleted, path: node.path },
          { type: EventType.none, state: KeeperState.expired, path: '' },
        ]).toContainEqual(pick(await told.event));
        await expect(zk.exists('/')).rejects.toMatchObject({ code: ErrorCode.sessionExpired });
        expect(await observer.exists(node.path)).toBeNull();
      } finally {
        await zk.close();
        await observer.close();
      }
    },
    scaled(60_000),
  );
});
