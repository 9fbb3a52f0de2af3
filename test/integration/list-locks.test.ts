import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { afterEach, describe, expect, inject, it } from 'vitest';
import type { ListLocksResponse, LockSummary } from '../../src/gen/lockstream/v1/lockstream.js';
import { loadConfig } from '../../src/server/config.js';
import { encodeLockName } from '../../src/server/engine/lock-nodes.js';
import { startServer } from '../../src/server/main.js';
import { zk } from '../../src/server/stores/zookeeper/zookeeper-client.js';
import { ZOOKEEPER_CLIENTS } from '../../src/server/stores/zookeeper/zookeeper-link.js';
import { LockCaller, LockMode } from '../support/lock-caller.js';
import { RawZooKeeper } from '../support/raw-zookeeper.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));
const silent = pino({ level: 'silent' });

/** Every page of a listing, each as the names it holds, and the locks of all of them. */
async function allPages(
  caller: LockCaller,
  request: { prefix: string; pageSize: number },
): Promise<{ pages: string[][]; locks: LockSummary[] }> {
  const pages: string[][] = [];
  const locks: LockSummary[] = [];
  let page: ListLocksResponse | undefined;
  do {
    page = await caller.list({ ...request, pageToken: page?.nextPageToken ?? '' });
    pages.push(page.locks.map((lock) => lock.name));
    locks.push(...page.locks);
  } while (page.nextPageToken !== '');
  return { pages, locks };
}

const mutex = (name: string, waiters = 0): LockSummary => ({
  name,
  holders: 1,
  waiters,
  heldMode: LockMode.MUTEX,
  limit: 0,
  usedWeight: 0,
});

describe.each(ZOOKEEPER_CLIENTS)('ListLocks on ZooKeeper (%s client)', (client) => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function serve(root: string): Promise<LockCaller> {
    const config = loadConfig({}, [
      '--port',
      '0',
      '--root',
      root,
      '--zookeeper',
      connectString,
      '--zookeeper-client',
      client,
    ]);
    const running = await startServer(config, silent);
    const caller = new LockCaller(`127.0.0.1:${running.port}`);
    cleanups.push(
      () => running.stop(),
      () => caller.close(),
    );
    return caller;
  }

  it('lists the locks held through every instance on the root, page after page, and never an empty lock parent', async () => {
    const root = `/list-${randomUUID()}`;
    const [a, b] = await Promise.all([serve(root), serve(root)]);
    // Lock parents left empty by names used before, more of them than ListLocks reads at once.
    // ZooKeeper removes empty lock parents (containers) only a while later; these are plain
    // nodes, which stay for the whole test.
    const raw = await RawZooKeeper.connect(connectString);
    cleanups.push(() => raw.close());
    const used = Array.from({ length: 2500 }, (_, i) => `list/${String(i).padStart(4, '0')}`);
    const usedPaths = used.map((name) => `${root}/locks/${encodeLockName(name)}`);
    for (const path of [root, `${root}/locks`])
      expect([zk.ZOK, zk.ZNODEEXISTS]).toContain((await raw.create(path)).rc);
    expect(
      (await Promise.all(usedPaths.map((path) => raw.create(path)))).every(({ rc }) => rc === zk.ZOK),
    ).toBe(true);
    cleanups.push(async () => {
      await Promise.all(usedPaths.map((path) => raw.delete(path)));
    });

    // Held through b among the empty parents, at the first and last of them and around the
    // first thousand; through a, one among them and one on a new name.
    const throughB = ['list/0000', 'list/0999', 'list/1000', 'list/2499', 'other/x'].map((name) =>
      b.open({ name }),
    );
    const throughA = ['list/1500', 'list/zz'].map((name) => a.open({ name }));
    const holders = [...throughB, ...throughA];
    await Promise.all(holders.map((holder) => holder.acquired()));
    const waiter = a.open({ name: 'list/1000', mode: LockMode.READ });
    cleanups.push(() => waiter.cancel());
    await waiter.queued();

    const listed = [
      mutex('list/0000'),
      mutex('list/0999'),
      mutex('list/1000', 1),
      mutex('list/1500'),
      mutex('list/2499'),
      mutex('list/zz'),
    ];
    for (const lister of [a, b]) {
      expect(await allPages(lister, { prefix: 'list/', pageSize: 2 })).toEqual({
        pages: [
          ['list/0000', 'list/0999'],
          ['list/1000', 'list/1500'],
          ['list/2499', 'list/zz'],
        ],
        locks: listed,
      });
      expect(await lister.list({ prefix: 'list/', pageSize: 1000 })).toEqual({
        locks: listed,
        nextPageToken: '',
      });
      expect((await lister.list({ pageSize: 5 })).locks).toEqual([...listed.slice(0, 5)]);
      expect(await lister.list({ pageSize: 1000 })).toEqual({
        locks: [...listed, mutex('other/x')],
        nextPageToken: '',
      });
    }

    await Promise.all(holders.map((holder) => holder.release()));
    await waiter.acquired();
    await waiter.release();
    for (const lister of [a, b])
      expect(await lister.list({ pageSize: 1000 })).toEqual({ locks: [], nextPageToken: '' });
  });
});
