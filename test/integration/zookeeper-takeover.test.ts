import { createSequential } from '../../src/server/stores/store.js';
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { pino, type Logger } from 'pino';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { isLockError } from '../../src/server/lock-error.js';
import { parseConnectString } from '../../src/server/stores/zookeeper/protocol/connection-options.js';
import { ZooKeeperConnection } from '../../src/server/stores/zookeeper/protocol/connection.js';
import {
  CreateMode,
  ErrorCode,
  EventType,
  OPEN_ACL_UNSAFE,
} from '../../src/server/stores/zookeeper/protocol/records.js';
import { ZooKeeperError } from '../../src/server/stores/zookeeper/protocol/zookeeper-error.js';
import {
  ZooKeeperStore,
  type ZooKeeperStoreOptions,
} from '../../src/server/stores/zookeeper/zookeeper-store.js';
import type { StoreBackend, StoreSession } from '../../src/server/stores/store.js';
import { describeStoreContract } from '../contract/store-contract.js';
import { sendFourLetterWord } from '../setup/zookeeper-process.js';
import { deferred } from '../support/lock-caller.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { expireZooKeeperSession } from '../support/zookeeper-faults.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));
const { servers } = parseConnectString(connectString);
const zookeeperPort = Number(servers[0]!.split(':')[1]);

/** Short, so that "outlives the session timeout" is seen in a test's time. */
const SESSION_TIMEOUT_MS = 3000;
/** Longer than one tick of the test ZooKeeper (200 ms): see witnessExpiry. */
const WITNESS_LAG_MS = 600;
const silent = pino({ level: 'silent' });

const cleanups: Array<() => Promise<unknown> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function bytes(text: string): Uint8Array {
  return Buffer.from(text, 'utf8');
}

function prefix(): string {
  return `node-${randomUUID()}-`;
}

/** A lockstream root of its own, removed (with whatever is left in it) after the test. */
function newRoot(): string {
  const root = `/takeover-${randomUUID()}`;
  cleanups.push(async () => {
    const raw = await rawConnection();
    await removeTree(raw, root);
    await raw.close();
  });
  return root;
}

async function rawConnection(digest?: string): Promise<ZooKeeperConnection> {
  return ZooKeeperConnection.connect({
    servers,
    sessionTimeoutMs: 10_000,
    ...(digest === undefined ? {} : { auth: [{ scheme: 'digest', credentials: digest }] }),
  });
}

async function removeTree(raw: ZooKeeperConnection, path: string): Promise<void> {
  const children = await raw.getChildren(path).catch(() => []);
  for (const child of children) await removeTree(raw, `${path}/${child}`);
  await raw.delete(path).catch(() => {});
}

/** A store publishing its sessions under `root` as `owner` (not publishing without one). */
async function connect(
  root: string,
  owner: string | undefined,
  extra: Partial<ZooKeeperStoreOptions> = {},
): Promise<ZooKeeperStore> {
  const store = await ZooKeeperStore.connect({
    connectString,
    sessionTimeoutMs: SESSION_TIMEOUT_MS,
    connectTimeoutMs: 5000,
    logger: silent,
    ...(owner === undefined ? {} : { publish: { root, owner } }),
    ...extra,
  });
  cleanups.push(() => store.close());
  return store;
}

/** A logger whose lines are kept, parsed, in `lines`. */
function recordingLogger(): { logger: Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino(
    { level: 'info' },
    { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  return { logger, lines };
}

/** The node's data and version, or null when it does not exist. */
async function read(
  raw: ZooKeeperConnection,
  path: string,
): Promise<{ data: string; version: number } | null> {
  try {
    const { data, stat } = await raw.getData(path);
    return { data: data.toString('utf8'), version: stat.version };
  } catch (error) {
    if (error instanceof ZooKeeperError && error.code === ErrorCode.noNode) return null;
    throw error;
  }
}

/** Resolves once `path` is gone, polling; rejects if it is still there after `withinMs`. */
async function untilGone(raw: ZooKeeperConnection, path: string, withinMs: number): Promise<number> {
  const start = performance.now();
  for (;;) {
    const elapsedMs = performance.now() - start;
    if ((await raw.exists(path)) === null) return elapsedMs;
    if (elapsedMs > withinMs) throw new Error(`${path} still exists ${Math.round(elapsedMs)} ms later`);
    await delay(25);
  }
}

/**
 * Starts a witness: a session of its own, heard from by ZooKeeper now and never again, with a
 * session timeout a whole `WITNESS_LAG_MS` longer than SESSION_TIMEOUT_MS. Resolves, once the
 * witness is set, with `expired` (its ephemeral node deleted, seen by `raw`).
 * ZooKeeper expires sessions a tick-rounded bucket at a time, in order, and the witness's bucket
 * is a later one than that of any session of SESSION_TIMEOUT_MS last heard from before this
 * call: by the time the witness has expired, such a session, left alone, has expired too.
 */
async function witnessExpiry(raw: ZooKeeperConnection): Promise<{ readonly expired: Promise<void> }> {
  const witness = await ZooKeeperConnection.connect({
    servers,
    sessionTimeoutMs: SESSION_TIMEOUT_MS + WITNESS_LAG_MS,
  });
  expect(witness.sessionTimeoutMs).toBe(SESSION_TIMEOUT_MS + WITNESS_LAG_MS);
  const node = `/takeover-witness-${randomUUID()}`;
  // The create is the last the witness's session is heard from.
  await witness.create(node, Buffer.alloc(0), OPEN_ACL_UNSAFE, CreateMode.ephemeral);
  const expired = deferred();
  const stat = await raw.exists(node, (event) => {
    if (event.type === EventType.nodeDeleted) expired.resolve();
  });
  expect(stat?.ephemeralOwner).toBe(witness.sessionId);
  witness.drop();
  return { expired: expired.promise };
}

/** Resolves when `session` is lost, with the reason. */
function whenLost(session: StoreSession): Promise<unknown> {
  return new Promise((resolve) =>
    session.lost.addEventListener('abort', () => resolve(session.lost.reason), { once: true }),
  );
}

/** Resolves once `session` is confirmed; rejects after `withinMs`. */
async function untilConfirmed(session: StoreSession, withinMs: number): Promise<void> {
  if (session.confirmed) return;
  const confirmed = deferred();
  const stop = session.onConfirmedChange((now) => now && confirmed.resolve());
  try {
    await Promise.race([
      confirmed.promise,
      delay(withinMs).then(() => {
        throw new Error(`session ${session.id} not confirmed within ${withinMs} ms`);
      }),
    ]);
  } finally {
    stop();
  }
}

/** The connections ZooKeeper holds for `sessionId`, per its `cons` four-letter word. */
async function connectionsOf(sessionId: bigint): Promise<Array<{ recved: number }>> {
  const cons = await sendFourLetterWord(zookeeperPort, 'cons', 5000);
  const sid = `sid=0x${sessionId.toString(16)}`;
  return cons
    .split('\n')
    .filter((line) => line.includes(`${sid},`) || line.includes(`${sid})`))
    .map((line) => ({ recved: Number(/recved=(\d+)/.exec(line)?.[1]) }));
}

function lockLost(error: unknown): boolean {
  return isLockError(error, 'LOCK_LOST');
}

describeStoreContract('ZooKeeper (published sessions, every write fenced)', async () => {
  const store = await ZooKeeperStore.connect({
    connectString,
    sessionTimeoutMs: 4000,
    connectTimeoutMs: 5000,
    logger: silent,
    publish: { root: '/takeover-contract', owner: 'contract' },
  });
  return { store, expireSession: () => expireZooKeeperSession(store, connectString), replaces: true };
});

describe('a ZooKeeper session taken over by another store', () => {
  it('hands every node over, with its data and creation id; they outlive the previous owner, and go when the taker closes', async () => {
    const root = newRoot();
    const digest = `lockstream:${randomUUID()}`;
    const protection = { protection: { digest, root } };
    const { logger, lines } = recordingLogger();
    const a = await connect(root, 'instance-a', protection);
    const b = await connect(root, 'instance-b', { ...protection, logger });
    const raw = await rawConnection(digest);
    cleanups.push(() => raw.close());

    const first = await createSequential(a, `${root}/locks/one`, prefix(), bytes('first'));
    const second = await createSequential(a, `${root}/locks/two`, prefix(), bytes('second'));
    const name = a.takeover!.publishedAs;
    expect(name).toBe(a.sessionCredentials.id.toString(16).padStart(16, '0'));
    const recordPath = `${root}/sessions/${name}`;
    const record = JSON.parse((await read(raw, recordPath))!.data) as Record<string, string>;
    expect(record).toMatchObject({
      session: a.sessionCredentials.id.toString(16),
      password: Buffer.from(a.sessionCredentials.password).toString('base64'),
      owner: 'instance-a',
    });
    // Only lockstream's credentials can read what it takes to attach to the session.
    const stranger = await rawConnection();
    cleanups.push(() => stranger.close());
    await expect(stranger.getData(recordPath)).rejects.toMatchObject({ code: ErrorCode.noAuth });

    await expect(b.takeover!.takeOver('0000000000000000')).resolves.toBeUndefined();
    await expect(b.takeover!.takeOver('not-a-session')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });

    const handedOver = a.session;
    await a.takeover!.handOver();
    expect(handedOver.lost.aborted).toBe(true);
    // A is not heard from any more: a witness left alone from now on expires after A's session
    // would have, had nobody taken it.
    const pastExpiryOfA = await witnessExpiry(raw);
    const taken = (await b.takeover!.takeOver(name))!;
    cleanups.push(() => taken.store.close());

    expect(taken.nodes).toEqual([
      { path: first.path, creationId: first.creationId, data: bytes('first'), version: 0 },
      { path: second.path, creationId: second.creationId, data: bytes('second'), version: 0 },
    ]);
    expect(taken.store.takeover!.publishedAs).toBe(name);
    expect(JSON.parse((await read(raw, recordPath))!.data)).toMatchObject({ owner: 'instance-b' });
    expect(lines).toContainEqual(
      expect.objectContaining({
        msg: 'took a ZooKeeper session over',
        publishedAs: name,
        owner: 'instance-b',
      }),
    );

    // A's session would have expired by now had nobody taken it: the nodes are still there.
    await pastExpiryOfA.expired;
    expect(await read(raw, first.path)).toEqual({ data: 'first', version: 0 });
    expect(taken.store.session.confirmed).toBe(true);

    await taken.store.delete(first.path);
    expect(await read(raw, first.path)).toBeNull();
    // Closing the taken store ends the session at once, well before it could expire.
    await taken.store.close();
    expect(await untilGone(raw, second.path, SESSION_TIMEOUT_MS / 2)).toBeLessThan(SESSION_TIMEOUT_MS / 2);
    await expect(taken.store.children(`${root}/locks/two`)).rejects.toMatchObject({ code: 'UNAVAILABLE' });
  });

  it('changes nothing for an owner that was paused: its writes reject, and it goes on in a new session', async () => {
    const root = newRoot();
    // A reaches ZooKeeper through a proxy that can stand still, as a paused process does.
    const proxy = await TcpProxy.start(connectString);
    cleanups.push(() => proxy.close());
    const { logger, lines } = recordingLogger();
    const a = await connect(root, 'instance-a', { connectString: proxy.address, logger });
    const b = await connect(root, 'instance-b');
    const raw = await rawConnection();
    cleanups.push(() => raw.close());

    const dir = `${root}/locks/paused`;
    const held = await createSequential(a, dir, prefix(), bytes('held'));
    const other = await createSequential(a, `${root}/locks/other`, prefix(), bytes('other'));
    const name = a.takeover!.publishedAs;
    const oldSession = a.session;
    const events: string[] = [];
    a.takeover!.onTakenOver((by) => events.push(`taken over by ${by}`));
    const lost = whenLost(oldSession).then((reason) => {
      events.push('lost');
      return reason;
    });

    proxy.freeze();
    const writes = [
      a.delete(held.path),
      a.setData(other.path, bytes('changed')),
      createSequential(a, dir, prefix(), bytes('late')),
    ];
    const taken = (await b.takeover!.takeOver(name))!;
    cleanups.push(() => taken.store.close());
    proxy.thaw();

    const outcomes = await Promise.allSettled(writes);
    for (const outcome of outcomes) {
      expect(outcome.status).toBe('rejected');
      expect(outcome.status === 'rejected' && lockLost(outcome.reason)).toBe(true);
    }
    expect(await lost).toMatchObject({
      code: 'LOCK_LOST',
      message: expect.stringMatching(/taken over by instance-b/),
    });
    expect(events).toEqual(['taken over by instance-b', 'lost']);
    expect(lines).toContainEqual(expect.objectContaining({ level: 40, by: 'instance-b', publishedAs: name }));

    // Nothing changed: the taker has both nodes as they were, and nothing else was created.
    expect(taken.nodes.map((node) => node.path)).toEqual([held.path, other.path]);
    expect(await read(raw, held.path)).toEqual({ data: 'held', version: 0 });
    expect(await read(raw, other.path)).toEqual({ data: 'other', version: 0 });
    expect(await raw.getChildren(dir)).toEqual([held.path.slice(dir.length + 1)]);

    // A goes on in a new session, published under another name.
    const fresh = await createSequential(a, dir, prefix(), bytes('fresh'));
    expect(fresh.session).not.toBe(oldSession);
    expect(a.takeover!.publishedAs).toMatch(/^[0-9a-f]{16}$/);
    expect(a.takeover!.publishedAs).not.toBe(name);
    await a.delete(fresh.path);
    await taken.store.delete(held.path);
    expect(await read(raw, held.path)).toBeNull();
  });

  it('stops a write whose check finds the record taken, without a retry, and the owner goes on in a new session', async () => {
    const root = newRoot();
    const a = await connect(root, 'instance-a');
    const raw = await rawConnection();
    cleanups.push(() => raw.close());
    const node = await createSequential(a, `${root}/locks/checked`, prefix(), bytes('kept'));
    const name = a.takeover!.publishedAs;
    const oldSession = a.session;
    const takenBy = deferred<string>();
    a.takeover!.onTakenOver((by) => takenBy.resolve(by));

    // Another instance's claim, as it looks to the owner whose link never dropped: the record's
    // version moved on.
    const recordPath = `${root}/sessions/${name}`;
    const record = JSON.parse((await read(raw, recordPath))!.data) as Record<string, string>;
    await raw.setData(recordPath, bytes(JSON.stringify({ ...record, owner: 'intruder' })), 0);

    await expect(a.delete(node.path)).rejects.toMatchObject({ code: 'LOCK_LOST' });
    expect(await takenBy.promise).toBe('intruder');
    expect(oldSession.lost.aborted).toBe(true);
    expect(oldSession.lost.reason).toMatchObject({
      message: expect.stringMatching(/taken over by intruder/),
    });
    expect(await read(raw, node.path)).toEqual({ data: 'kept', version: 0 });

    const fresh = await createSequential(a, `${root}/locks/checked`, prefix(), bytes('fresh'));
    expect(fresh.session).not.toBe(oldSession);
    expect(a.takeover!.publishedAs).not.toBe(name);
    await a.delete(fresh.path);
  });

  it('does not move back to a live owner: its link is dropped, and the taker stays connected', async () => {
    const root = newRoot();
    const a = await connect(root, 'instance-a');
    const b = await connect(root, 'instance-b');
    const node = await createSequential(a, `${root}/locks/live`, prefix(), bytes('live'));
    const name = a.takeover!.publishedAs;
    const sessionId = a.sessionCredentials.id;
    const noticed = deferred<string>();
    a.takeover!.onTakenOver((by) => noticed.resolve(by));

    const started = performance.now();
    const taken = (await b.takeover!.takeOver(name))!;
    cleanups.push(() => taken.store.close());
    expect(taken.nodes.map(({ path }) => path)).toEqual([node.path]);

    // ZooKeeper closed A's connection when B attached; A reconnected, found the record taken,
    // and let go; B's connection, closed by that reconnection, came back and stays.
    expect(await noticed.promise).toBe('instance-b');
    await untilConfirmed(taken.store.session, 3000);
    expect(performance.now() - started).toBeLessThan(3000);
    let wavered = 0;
    taken.store.session.onConfirmedChange((confirmed) => {
      if (!confirmed) wavered += 1;
    });
    // A goes on in a session of its own. Its store drops the link of the taken session before it
    // dials for the next one, and a dropped link never dials again: once A has written in its
    // next session, nothing of A's can take the session back. B's write, answered after that,
    // finds B's connection as it was.
    const fresh = await createSequential(a, `${root}/locks/live`, prefix(), bytes('after'));
    expect(a.sessionCredentials.id).not.toBe(sessionId);
    await a.delete(fresh.path);
    expect(await taken.store.setData(node.path, bytes('still b'))).toBe('set');
    expect(wavered).toBe(0);
    expect(taken.store.session.confirmed).toBe(true);
    expect(taken.store.session.lost.aborted).toBe(false);
    expect(await connectionsOf(sessionId)).toHaveLength(1);
    expect(a.session.id).not.toBe(taken.store.session.id);
    // B still owns the session's node, and writes in it.
    expect(await taken.store.setData(node.path, bytes('written by b'))).toBe('set');
  });

  it('can be taken over again from the taker, which then lets go in turn', async () => {
    const root = newRoot();
    const a = await connect(root, 'instance-a');
    const b = await connect(root, 'instance-b');
    const c = await connect(root, 'instance-c');
    const node = await createSequential(a, `${root}/locks/twice`, prefix(), bytes('twice'));
    const name = a.takeover!.publishedAs;
    await a.takeover!.handOver();
    const byB = (await b.takeover!.takeOver(name))!;
    cleanups.push(() => byB.store.close());
    const lostByB = whenLost(byB.store.session);
    const byC = (await c.takeover!.takeOver(name))!;
    cleanups.push(() => byC.store.close());
    expect(byC.nodes.map(({ path }) => path)).toEqual([node.path]);
    expect(await lostByB).toMatchObject({ code: 'LOCK_LOST' });
    // A taken store opens no other session.
    await expect(byB.store.delete(node.path)).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    await expect(
      createSequential(byB.store, `${root}/locks/twice`, prefix(), bytes('x')),
    ).rejects.toMatchObject({
      code: 'UNAVAILABLE',
    });
    expect(await byC.store.children(`${root}/locks/twice`)).toEqual([
      node.path.slice(node.path.lastIndexOf('/') + 1),
    ]);
  });

  it('answers undefined for a session that expired before it could be taken', async () => {
    const root = newRoot();
    const a = await connect(root, 'instance-a');
    const b = await connect(root, 'instance-b');
    await createSequential(a, `${root}/locks/expired`, prefix(), bytes('x'));
    const name = a.takeover!.publishedAs;
    const raw = await rawConnection();
    cleanups.push(() => raw.close());
    const recordPath = `${root}/sessions/${name}`;
    const record = (await read(raw, recordPath))!;
    await a.takeover!.handOver();
    // Gone with its session: the record too.
    await untilGone(raw, recordPath, SESSION_TIMEOUT_MS + 2000);
    await expect(b.takeover!.takeOver(name)).resolves.toBeUndefined();
    expect(record.version).toBe(0);
  });
});

describe('writes of a published session', () => {
  it('cost one request each, as without publishing: the check goes in the same multi', async () => {
    const root = newRoot();
    const options = { sessionTimeoutMs: 30_000 };
    const published = await connect(root, 'instance-a', options);
    const plain = await connect(root, undefined, options);
    expect(plain.takeover).toBeUndefined();

    /** Requests ZooKeeper received for one create (with its listing) and delete: the fewest of three tries. */
    async function requestsPerCycle(store: ZooKeeperStore): Promise<number> {
      const id = store.sessionCredentials.id;
      let fewest = Infinity;
      for (let i = 0; i < 3; i += 1) {
        const [before] = await connectionsOf(id);
        const { path } = await createSequential(store, `${root}/locks/count`, prefix(), bytes('x'));
        await store.delete(path);
        const [after] = await connectionsOf(id);
        fewest = Math.min(fewest, after!.recved - before!.recved);
      }
      return fewest;
    }

    expect(await requestsPerCycle(plain)).toBe(3);
    expect(await requestsPerCycle(published)).toBe(3);
  });

  it('find their own node after a fenced create whose reply was lost, instead of leaving a ghost', async () => {
    const root = newRoot();
    const proxy = await TcpProxy.start(connectString);
    cleanups.push(() => proxy.close());
    const store = await connect(root, 'instance-a', {
      connectString: proxy.address,
      sessionTimeoutMs: 10_000,
    });
    const dir = `${root}/locks/ghost`;
    // Someone already queues there, so the lock's parent exists and one create is all it takes.
    const ahead = await createSequential(store, dir, prefix(), bytes('ahead'));
    const name = store.takeover!.publishedAs;
    const mine = prefix();
    proxy.holdReplies();
    const created = createSequential(store, dir, mine, bytes('mine'));
    // The multi's reply carries the new node's path: ZooKeeper has applied it. Lose the reply.
    await proxy.heldReplyContaining(mine);
    proxy.severAll();
    const node = await created;

    const children = await store.children(dir);
    expect(children.filter((child) => child.startsWith(mine))).toEqual([node.path.slice(dir.length + 1)]);
    expect(children).toHaveLength(2);
    // Same session, still owned: the reconnection found the record as it left it.
    expect(node.session).toBe(ahead.session);
    expect(node.session.lost.aborted).toBe(false);
    expect(store.takeover!.publishedAs).toBe(name);
    await store.delete([node.path, ahead.path]);
    expect(await store.children(dir)).toEqual([]);
  });
});

describe('a published session the store gives up', () => {
  it('is dropped, not closed: a taker can still take it over, else it expires within its timeout', async () => {
    const root = newRoot();
    const proxy = await TcpProxy.start(connectString);
    cleanups.push(() => proxy.close());
    const a = await connect(root, 'instance-a', { connectString: proxy.address, connectTimeoutMs: 10_000 });
    const b = await connect(root, 'instance-b');
    const raw = await rawConnection();
    cleanups.push(() => raw.close());
    const { path, session } = await createSequential(a, `${root}/locks/given-up`, prefix(), bytes('x'));
    const name = a.takeover!.publishedAs;

    // Replies lag ever more until A gives the session up (two thirds of its timeout).
    const lost = whenLost(session);
    proxy.lagReplies();
    expect(await lost).toMatchObject({ message: expect.stringMatching(/no reply from ZooKeeper/) });
    proxy.endLag();

    // Not closed: the node is still there, for an instance the clients resume on to take.
    expect(await read(raw, path)).toEqual({ data: 'x', version: 0 });
    const taken = (await b.takeover!.takeOver(name))!;
    cleanups.push(() => taken.store.close());
    expect(taken.nodes.map((node) => node.path)).toEqual([path]);
    await untilConfirmed(taken.store.session, 3000);
    // A goes on in a new session.
    expect(a.takeover!.publishedAs).not.toBe(name);
    const fresh = await createSequential(a, `${root}/locks/given-up`, prefix(), bytes('y'));
    await a.delete(fresh.path);
  });

  it('expires within its timeout when nobody takes it over', async () => {
    const root = newRoot();
    const proxy = await TcpProxy.start(connectString);
    cleanups.push(() => proxy.close());
    const a = await connect(root, 'instance-a', { connectString: proxy.address, connectTimeoutMs: 10_000 });
    const raw = await rawConnection();
    cleanups.push(() => raw.close());
    const { path, session } = await createSequential(a, `${root}/locks/given-up`, prefix(), bytes('x'));
    const sessionTimeoutMs = a.negotiatedSessionTimeoutMs;
    const lost = whenLost(session);
    proxy.lagReplies();
    await lost;
    proxy.endLag();
    await untilGone(raw, path, sessionTimeoutMs + 1000);
  });
});

describe('the ZooKeeper addon store', () => {
  it('offers no takeover, even when asked to publish', async () => {
    const root = newRoot();
    const store: StoreBackend = await connect(root, 'instance-a', { client: 'addon' });
    expect(store.takeover).toBeUndefined();
    const { path } = await createSequential(store, `${root}/locks/addon`, prefix(), bytes('x'));
    await store.delete(path);
  });
});
