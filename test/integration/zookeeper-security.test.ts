import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { LockClient } from '../../src/client/index.js';
import { loadConfig } from '../../src/server/config.js';
import { encodeLockName } from '../../src/server/engine/lock-nodes.js';
import { startServer, type RunningServer } from '../../src/server/main.js';
import { zk } from '../../src/server/stores/zookeeper/zookeeper-client.js';
import { ZOOKEEPER_CLIENTS } from '../../src/server/stores/zookeeper/zookeeper-link.js';
import { deferred } from '../support/lock-caller.js';
import { RawZooKeeper } from '../support/raw-zookeeper.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

let dir: string;
const digestFile = (name: string, credentials: string): Promise<string> => {
  const path = join(dir, name);
  return writeFile(path, `${credentials}\n`).then(() => path);
};
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'lockstream-zk-digest-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const cleanups: Array<() => Promise<unknown> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function serve(args: string[]): Promise<RunningServer> {
  const server = await startServer(loadConfig({}, ['--port', '0', ...args]), pino({ level: 'silent' }));
  cleanups.push(() => server.stop());
  return server;
}

async function raw(connect: string, digest?: string): Promise<RawZooKeeper> {
  const client = await RawZooKeeper.connect(connect, digest);
  cleanups.push(() => client.close());
  return client;
}

describe('lockstream nodes protected by ZooKeeper digest credentials and ACLs', () => {
  it.each(ZOOKEEPER_CLIENTS)(
    'let no other ZooKeeper user list, create, read, change or delete lock nodes, each protected from its create on, while lockstream works as usual (%s client)',
    async (client) => {
      const root = `/secured-${randomUUID()}`;
      const credentials = `lockstream:${randomUUID()}`;
      // An earlier, unprotected deployment left a lock parent behind: it gets protected too.
      const before = await raw(connectString);
      expect((await before.create(root)).rc).toBe(zk.ZOK);
      expect((await before.create(`${root}/locks`)).rc).toBe(zk.ZOK);
      expect((await before.create(`${root}/locks/${encodeLockName('left-over')}`)).rc).toBe(zk.ZOK);

      const server = await serve([
        '--zookeeper',
        connectString,
        '--root',
        root,
        '--zookeeper-digest-file',
        await digestFile('lockstream', credentials),
        '--zookeeper-client',
        client,
      ]);
      const locker = new LockClient(`127.0.0.1:${server.port}`);
      cleanups.push(() => locker.close());
      const revokeRequests: unknown[] = [];
      const holder = await locker.acquire('guarded', {
        onRevokeRequested: (request) => revokeRequests.push(request),
      });
      const queued = deferred<number>();
      const waiting = locker.acquire('guarded', { onQueued: queued.resolve });
      expect(await queued.promise).toBe(1);

      const locks = `${root}/locks`;
      const parent = `${locks}/${encodeLockName('guarded')}`;
      const insider = await raw(connectString, credentials);
      const nodes = (await insider.children(parent)).value ?? [];
      expect(nodes).toHaveLength(2);
      const holderNode = `${parent}/${[...nodes].sort((a, b) => a.slice(-10).localeCompare(b.slice(-10)))[0]}`;

      for (const outsider of [
        await raw(connectString),
        await raw(connectString, `someone:${randomUUID()}`),
      ]) {
        expect((await outsider.children(locks)).rc).toBe(zk.ZNOAUTH);
        expect((await outsider.children(parent)).rc).toBe(zk.ZNOAUTH);
        expect((await outsider.children(`${locks}/${encodeLockName('left-over')}`)).rc).toBe(zk.ZNOAUTH);
        expect((await outsider.create(`${locks}/${encodeLockName('squatted')}`)).rc).toBe(zk.ZNOAUTH);
        expect((await outsider.create(`${parent}/mutex-ghost-`, zk.ZOO_EPHEMERAL_SEQUENTIAL)).rc).toBe(
          zk.ZNOAUTH,
        );
        expect((await outsider.delete(holderNode)).rc).toBe(zk.ZNOAUTH);
        // A request node itself: its record, and a revoke record written there, stay lockstream's.
        expect((await outsider.getData(holderNode)).rc).toBe(zk.ZNOAUTH);
        expect((await outsider.setData(holderNode, '{"revoke":{"reason":"outsider"}}')).rc).toBe(zk.ZNOAUTH);
        expect((await outsider.delete(`${locks}/${encodeLockName('left-over')}`)).rc).toBe(zk.ZNOAUTH);
        expect((await outsider.setData(root, 'mine now')).rc).toBe(zk.ZNOAUTH);
      }
      for (const node of [parent, holderNode]) {
        expect((await insider.acl(node)).value).toEqual([
          { perms: zk.ZOO_PERM_ALL, scheme: 'digest', auth: expect.stringMatching(/^lockstream:/) },
        ]);
      }

      // The lock went on as if nothing had been tried.
      expect(holder.lost.aborted).toBe(false);
      await holder.release();
      await (await waiting).release();
      expect(revokeRequests).toEqual([]);
    },
  );

  it('refuse to start on a root that other credentials protect, and say so', async () => {
    const root = `/taken-${randomUUID()}`;
    await serve([
      '--zookeeper',
      connectString,
      '--root',
      root,
      '--zookeeper-digest-file',
      await digestFile('first', `first:${randomUUID()}`),
    ]);
    await expect(
      serve([
        '--zookeeper',
        connectString,
        '--root',
        root,
        '--zookeeper-digest-file',
        await digestFile('second', `second:${randomUUID()}`),
      ]),
    ).rejects.toThrow(/belongs to other credentials \(NOAUTH\)/);
  });
});

describe('a ZooKeeper connect string with a chroot', () => {
  it('keeps every lockstream node under the chroot', async () => {
    const chroot = `/tenant-${randomUUID()}`;
    const outside = await raw(connectString);
    expect((await outside.create(chroot)).rc).toBe(zk.ZOK);
    const server = await serve(['--zookeeper', `${connectString}${chroot}`, '--root', '/lockstream']);
    const client = new LockClient(`127.0.0.1:${server.port}`);
    cleanups.push(() => client.close());
    await using _held = await client.acquire('in-a-chroot');
    const parent = `${chroot}/lockstream/locks/${encodeLockName('in-a-chroot')}`;
    expect((await outside.children(parent)).value).toHaveLength(1);
    expect((await outside.children('/lockstream/locks')).rc).not.toBe(zk.ZOK);
  });

  it('that does not exist stops start-up with a message that says how to fix it', async () => {
    const chroot = `/missing-${randomUUID()}`;
    await expect(
      serve(['--zookeeper', `${connectString}${chroot}`, '--connect-timeout', '5s']),
    ).rejects.toThrow(`the chroot ${chroot} of the ZooKeeper connect string does not exist`);
  });
});
