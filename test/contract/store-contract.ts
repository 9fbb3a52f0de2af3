import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isLockError, LockError } from '../../src/server/lock-error.js';
import {
  NodeFollow,
  waitUntilDeleted,
  type StoreBackend,
  type StoreStats,
  createSequential,
} from '../../src/server/stores/store.js';
import { scaled } from '../support/timing.js';
import { describeRecordContract } from './record-contract.js';

/** A store under test, and how to end its current session as an expiry would. */
export interface StoreUnderTest {
  readonly store: StoreBackend;
  readonly expireSession: () => Promise<void>;
  /** False for a store that cannot replace a node atomically (it must say UNSUPPORTED). */
  readonly replaces?: boolean;
}

const NO_DATA = new Uint8Array();

/** A prefix that is unique per call, as the contract requires. */
function uniquePrefix(label = 'node'): string {
  return `${label}-${randomUUID()}-`;
}

/** The sequence number of a node created with `prefix`. */
function sequenceOf(name: string, prefix: string): number {
  expect(name.startsWith(prefix)).toBe(true);
  const suffix = name.slice(prefix.length);
  expect(suffix).toMatch(/^\d{10}$/);
  return Number(suffix);
}

function nameOf(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

/** A promise whose settlement can be inspected without waiting for it. */
interface Tracked<T> {
  readonly promise: Promise<T>;
  readonly state: () => 'pending' | 'resolved' | 'rejected';
}

function track<T>(promise: Promise<T>): Tracked<T> {
  let state: 'pending' | 'resolved' | 'rejected' = 'pending';
  promise.then(
    () => {
      state = 'resolved';
    },
    () => {
      state = 'rejected';
    },
  );
  return { promise, state: () => state };
}

function delta(before: Readonly<StoreStats>, after: Readonly<StoreStats>): Record<keyof StoreStats, number> {
  return {
    creates: after.creates - before.creates,
    childrenListings: after.childrenListings - before.childrenListings,
    creationIdReads: after.creationIdReads - before.creationIdReads,
    deletes: after.deletes - before.deletes,
    watchesArmed: after.watchesArmed - before.watchesArmed,
    waitersWoken: after.waitersWoken - before.waitersWoken,
  };
}

function neverAborted(): AbortSignal {
  return new AbortController().signal;
}

/**
 * The StoreBackend contract (see src/server/stores/store.ts), written once and run against
 * every store. The lock engine relies on exactly these properties; a store that fails a case
 * would break the lock recipe on it.
 */
/**
 * `makeStore` gets the root path of the test's nodes: locks go in `<root>/locks/<name>`, as
 * lockstream lays them out.
 */
export function describeStoreContract(
  name: string,
  makeStore: (root: string) => Promise<StoreUnderTest>,
): void {
  describe(`the ${name} coordination store`, () => {
    describeRecordContract(makeStore);
    let store: StoreBackend;
    let expireSession: () => Promise<void>;
    let replaces = true;
    let root: string;
    let dir: string;

    /** Creates a node under `parent` (default: the test's lock dir) and returns its name. */
    const create = async (
      parent = dir,
      prefix = uniquePrefix(),
    ): Promise<{ path: string; name: string; prefix: string }> => {
      const created = await createSequential(store, parent, prefix, NO_DATA);
      return { path: created.path, name: nameOf(created.path), prefix };
    };

    /**
     * One more round trip after the calls already issued: the store answers in order, so once it
     * returns, every earlier request (a watch being armed, a deletion) has been answered.
     */
    const roundTrip = async (): Promise<void> => {
      await store.children(dir);
    };

    beforeEach(async () => {
      root = `/store-test-${randomUUID()}`;
      dir = `${root}/locks/name`;
      const made = await makeStore(root);
      ({ store, expireSession } = made);
      replaces = made.replaces ?? true;
    });

    afterEach(async () => {
      await store.close();
    });

    describe('createSequential', () => {
      it('names a node by its prefix followed by a 10-digit sequence number', async () => {
        const prefix = uniquePrefix('mutex');
        const created = await createSequential(store, dir, prefix, new TextEncoder().encode('data'));
        expect(created.path).toMatch(new RegExp(`^${dir}/${prefix}\\d{10}$`));
        expect(created.session).toBe(store.session);
        expect(created.session.lost.aborted).toBe(false);
      });

      it('gives growing sequence numbers per parent, in creation order', async () => {
        const sequences: number[] = [];
        for (let i = 0; i < 5; i += 1) {
          const node = await create();
          sequences.push(sequenceOf(node.name, node.prefix));
        }
        for (let i = 1; i < sequences.length; i += 1) {
          expect(sequences[i]).toBeGreaterThan(sequences[i - 1]!);
        }
      });

      it('queues creates on a missing parent in the order they were made, also those made while the parent is being created', async () => {
        for (let round = 0; round < 10; round += 1) {
          const parent = `${root}/locks/order-${round}`;
          const prefixes: string[] = [];
          const creating: Array<Promise<{ path: string }>> = [];
          const make = (): void => {
            const prefix = uniquePrefix();
            prefixes.push(prefix);
            creating.push(createSequential(store, parent, prefix, NO_DATA));
          };
          for (let i = 0; i < 4; i += 1) make();
          // Later creates, made while the first ones are being answered (parent missing).
          await new Promise((resolve) => setImmediate(resolve));
          make();
          await new Promise((resolve) => setTimeout(resolve, round));
          make();
          const paths = (await Promise.all(creating)).map((node) => nameOf(node.path));
          const sequences = paths.map((name, i) => sequenceOf(name, prefixes[i]!));
          expect(sequences, `round ${round}`).toEqual([...sequences].sort((x, y) => x - y));
        }
      });

      it('keeps one sequence per parent: a new parent starts from 0000000000 whatever its siblings did', async () => {
        for (let i = 0; i < 3; i += 1) await create(`${root}/locks/a`);
        const first = await create(`${root}/locks/b`);
        expect(first.name).toBe(`${first.prefix}0000000000`);
        const second = await create(`${root}/locks/a`);
        expect(sequenceOf(second.name, second.prefix)).toBeGreaterThanOrEqual(3);
      });

      it('keeps growing when earlier nodes of the same parent have been deleted', async () => {
        const keep = await create();
        const gone = await create();
        await store.delete(gone.path);
        const later = await create();
        expect(sequenceOf(later.name, later.prefix)).toBeGreaterThan(sequenceOf(gone.name, gone.prefix));
        expect(sequenceOf(later.name, later.prefix)).toBeGreaterThan(sequenceOf(keep.name, keep.prefix));
      });

      it('creates missing parents, however deep', async () => {
        const deep = `${root}/locks/x/y/z`;
        const node = await create(deep);
        expect(node.path).toBe(`${deep}/${node.name}`);
        expect(await store.children(deep)).toEqual([node.name]);
        expect(await store.creationId(node.path)).not.toBeNull();
        expect(await store.children(`${root}/locks/x/y`)).toEqual(['z']);
      });

      it('creates the lock parent under an existing root without disturbing its other lock parents', async () => {
        const a = await create(`${root}/locks/a`);
        const b = await create(`${root}/locks/b`);
        expect((await store.children(`${root}/locks`)).sort()).toEqual(['a', 'b']);
        expect(await store.children(`${root}/locks/a`)).toEqual([a.name]);
        expect(await store.children(`${root}/locks/b`)).toEqual([b.name]);
      });

      it('lists the siblings behind the create, and follows the new node from the start when asked', async () => {
        const followedDir = `${root}/locks/followed`;
        const plain = await createSequential(store, followedDir, uniquePrefix(), Buffer.alloc(0));
        expect(plain.siblings).toEqual([plain.path.slice(followedDir.length + 1)]);
        expect(plain.followed).toBeUndefined();
        await store.delete(plain.path);
        const events: string[] = [];
        let heard = (): void => {};
        const nextEvent = (): Promise<void> => new Promise((resolve) => (heard = resolve));
        const following = new NodeFollow({
          onData: (data: Uint8Array) => {
            events.push(`data ${Buffer.from(data).toString()}`);
            heard();
          },
          onDeleted: () => {
            events.push('deleted');
            heard();
          },
        });
        // Under a parent new to it, a store reads the node after its create; under one it knows
        // (ZooKeeper), within the create's round trip, on the path the node is expected to get.
        for (const [round, under] of [
          [1, dir],
          [2, dir],
          [3, followedDir],
        ] as const) {
          const created = await createSequential(
            store,
            under,
            uniquePrefix(),
            Buffer.from(`v${round}`),
            following,
          );
          expect(created.siblings).toEqual([created.path.slice(under.length + 1)]);
          expect(created.followed?.creationId).toBe(await store.creationId(created.path));
          expect(Buffer.from(created.followed!.data).toString()).toBe(`v${round}`);
          let event = nextEvent();
          await store.setData(created.path, Buffer.from('revoked'));
          await event;
          event = nextEvent();
          await store.delete(created.path);
          await event;
        }
        expect(events).toEqual(Array.from({ length: 3 }, () => ['data revoked', 'deleted']).flat());
        // Once the follower stops, nothing more reaches it. A later request's answer comes after
        // any event the change caused (a store reports a session's events in order).
        const last = await createSequential(store, dir, uniquePrefix(), Buffer.from('v4'), following);
        following.stop();
        await store.setData(last.path, Buffer.from('revoked'));
        await store.delete(last.path);
        await store.children(dir);
        expect(events).toHaveLength(6);
      });
    });

    describe('children', () => {
      it('returns the names of the children, not their paths (in no promised order)', async () => {
        const names: string[] = [];
        for (let i = 0; i < 4; i += 1) names.push((await create()).name);
        const children = await store.children(dir);
        expect(children.every((child) => !child.includes('/'))).toBe(true);
        expect([...children].sort()).toEqual([...names].sort());
      });

      it('returns [] for a directory that does not exist', async () => {
        expect(await store.children(`${root}/locks/never-created`)).toEqual([]);
        expect(await store.children(`/store-test-${randomUUID()}`)).toEqual([]);
      });

      it('no longer lists a deleted node', async () => {
        const a = await create();
        const b = await create();
        await store.delete(a.path);
        expect(await store.children(dir)).toEqual([b.name]);
      });
    });

    describe('childrenAsTold', () => {
      it('holds every change its caller was told of: a deletion that woke a waiter, a create its watch told', async () => {
        const a = await create();
        const b = await create();
        const woken = new Promise<void>((resolve) => store.onceDeleted(a.path, () => resolve()));
        void store.delete(a.path);
        await woken;
        expect(await store.children(dir, { asTold: true })).toEqual([b.name]);

        let told!: () => void;
        const changed = new Promise<void>((resolve) => (told = resolve));
        const unwatch = store.watchChildren(dir, () => told());
        await roundTrip();
        const c = await createSequential(store, dir, uniquePrefix(), NO_DATA);
        await changed;
        unwatch();
        expect([...(await store.children(dir, { asTold: true }))].sort()).toEqual(
          [b.name, nameOf(c.path)].sort(),
        );
      });

      it('returns [] for a directory that does not exist', async () => {
        expect(await store.children(`${root}/locks/never-created`, { asTold: true })).toEqual([]);
      });
    });

    describe('childrenOfEach', () => {
      it("lists each directory's children in the directories' order, [] for one that does not exist", async () => {
        const a = [await create(`${root}/locks/a`), await create(`${root}/locks/a`)];
        const b = await create(`${root}/locks/b`);
        const gone = await create(`${root}/locks/gone`);
        await store.delete(gone.path);
        const listed = await store.childrenOfEach([
          `${root}/locks/a`,
          `${root}/locks/never-created`,
          `${root}/locks/b`,
          `${root}/locks/gone`,
          `${root}/locks/a`,
        ]);
        expect(listed.map((children) => [...children].sort())).toEqual([
          a.map((node) => node.name).sort(),
          [],
          [b.name],
          [],
          a.map((node) => node.name).sort(),
        ]);
      });

      it('lists thousands of directories with long names, in their order, as one call each would', async () => {
        // 2,500 paths of over 600 bytes: more paths, and more bytes, than one ZooKeeper request takes.
        const dirs = Array.from({ length: 2500 }, (_, i) => `${root}/locks/${'n'.repeat(600)}-${i}`);
        const used = [0, 999, 1000, 1001, 2499];
        const names = new Map<number, string>();
        for (const index of used) names.set(index, (await create(dirs[index])).name);
        const before = { ...store.stats };
        const listed = await store.childrenOfEach(dirs);
        expect(listed).toHaveLength(dirs.length);
        expect(listed.map((children, index) => (children.length === 0 ? [] : [index, ...children]))).toEqual(
          dirs.map((_, index) => (names.has(index) ? [index, names.get(index)] : [])),
        );
        expect(delta(before, store.stats).childrenListings).toBe(dirs.length);
        expect(await store.childrenOfEach([])).toEqual([]);
      });
    });

    describe('nodeData', () => {
      it('reads the creation id and the data written at creation; null once the node is gone', async () => {
        const created = await createSequential(store, dir, uniquePrefix(), Buffer.from('{"owner":"ops"}'));
        const read = await store.nodeData(created.path);
        expect(read?.creationId).toBe(await store.creationId(created.path));
        expect(Buffer.from(read!.data).toString()).toBe('{"owner":"ops"}');
        await store.delete(created.path);
        expect(await store.nodeData(created.path)).toBeNull();
        expect(await store.nodeData(`/store-test-${randomUUID()}/a/b`)).toBeNull();
      });
    });

    describe('createSequentialAll', () => {
      it('creates a node under each parent (made as needed) in one step: listings see all or none, and two calls are ordered alike in every parent they share', async () => {
        const dirs = [`${root}/locks/all-a`, `${root}/locks/all-b`, `${root}/locks/all-c`];
        const entries = (label: string): Array<{ dir: string; prefix: string; data: Uint8Array }> =>
          dirs.map((each) => ({ dir: each, prefix: uniquePrefix(label), data: Buffer.from(label) }));
        if (!replaces) {
          await expect(store.createNodes(entries('none'))).rejects.toMatchObject({
            code: 'UNSUPPORTED',
            message: expect.stringMatching(/multi/),
          });
          return;
        }
        const first = entries('first');
        const second = entries('second');
        const [createdFirst, createdSecond] = await Promise.all([
          store.createNodes(first),
          store.createNodes(second),
        ]);
        for (const [created, asked] of [
          [createdFirst, first],
          [createdSecond, second],
        ] as const) {
          expect(created.map((node) => node.path.slice(0, node.path.lastIndexOf('/')))).toEqual(dirs);
          created.forEach((node, i) => {
            expect(nameOf(node.path).startsWith(asked[i]!.prefix)).toBe(true);
            expect(node.siblings).toContain(nameOf(node.path));
          });
          // One transaction, one creation id.
          const ids = await Promise.all(created.map((node) => store.creationId(node.path)));
          expect(new Set(ids.map(String)).size).toBe(1);
        }
        // The same order in every parent: whichever call went first there went first everywhere.
        const firstAhead = await Promise.all(
          dirs.map(async (each, i) => {
            const children = await store.children(each);
            const a = children.find((child) => child.startsWith(first[i]!.prefix))!;
            const b = children.find((child) => child.startsWith(second[i]!.prefix))!;
            return sequenceOf(a, first[i]!.prefix) < sequenceOf(b, second[i]!.prefix);
          }),
        );
        expect(new Set(firstAhead).size).toBe(1);
        const [idFirst, idSecond] = await Promise.all([
          store.creationId(createdFirst[0]!.path),
          store.creationId(createdSecond[0]!.path),
        ]);
        expect(idFirst! < idSecond!).toBe(firstAhead[0]);
        // Ephemeral, as createSequential's: gone with the session.
        await expireSession();
        for (const each of dirs) expect(await store.children(each)).toEqual([]);
      });
    });

    describe('deleteAll', () => {
      it('deletes several nodes, waking their waiters; a node already gone is not an error', async () => {
        const nodes = await Promise.all([create(), create(`${root}/locks/other`), create()]);
        const woken = nodes.map((node) =>
          track(waitUntilDeleted(store, node.path, { signal: neverAborted() })),
        );
        await roundTrip();
        await store.delete(nodes.map((node) => node.path));
        await Promise.all(woken.map((wait) => wait.promise));
        expect(await store.children(dir)).toEqual([]);
        const [kept, gone] = await Promise.all([create(), create()]);
        await store.delete(gone.path);
        await store.delete([kept.path, gone.path]);
        expect(await store.children(dir)).toEqual([]);
      });
    });

    describe('replaceNode', () => {
      const events: string[] = [];
      let heard: () => void = () => {};
      const nextEvent = (): Promise<void> => new Promise((resolve) => (heard = resolve));
      const following = (): NodeFollow =>
        new NodeFollow({
          onData: (data) => {
            events.push(`data ${Buffer.from(data).toString()}`);
            heard();
          },
          onDeleted: () => {
            events.push('deleted');
            heard();
          },
        });

      it('replaces a node by one of another name in one step, follows the new one, and wakes waiters of the old', async () => {
        const created = await createSequential(store, dir, 'write-', Buffer.from('record'));
        const node = (await store.nodeData(created.path))!;
        const replacement = `read-${nameOf(created.path).slice('write-'.length)}`;
        if (!replaces) {
          await expect(
            store.replaceNode(created.path, replacement, NO_DATA, node.version, store.session, following()),
          ).rejects.toMatchObject({ code: 'UNSUPPORTED', message: expect.stringMatching(/multi/) });
          return;
        }
        const woken = track(waitUntilDeleted(store, created.path, { signal: neverAborted() }));
        await roundTrip();
        events.length = 0;
        // Listings sent around the replacement see the old node or the new one, never both or neither.
        const listings = Array.from({ length: 20 }, () => store.children(dir));
        const replaced = store.replaceNode(
          created.path,
          replacement,
          Buffer.from('copied'),
          node.version,
          store.session,
          following(),
        );
        listings.push(...Array.from({ length: 20 }, () => store.children(dir)));
        const result = await replaced;
        if (typeof result === 'string') throw new Error(`not replaced: ${result}`);
        expect(result.path).toBe(`${dir}/${replacement}`);
        expect(result.creationId).toBeGreaterThan(node.creationId);
        for (const listing of await Promise.all(listings)) {
          expect(
            listing.filter((child) => child === nameOf(created.path) || child === replacement),
          ).toHaveLength(1);
        }
        await woken.promise;
        const read = await store.nodeData(result.path);
        expect([Buffer.from(read!.data).toString(), read!.creationId]).toEqual(['copied', result.creationId]);
        let event = nextEvent();
        await store.setData(result.path, Buffer.from('revoked'));
        await event;
        event = nextEvent();
        await store.delete(result.path);
        await event;
        expect(events).toEqual(['data revoked', 'deleted']);
      });

      it('says conflict when the node was written since its version was read, and missing when it is gone', async () => {
        const created = await createSequential(store, dir, 'write-', NO_DATA);
        const replacement = `read-${nameOf(created.path).slice('write-'.length)}`;
        if (!replaces) return;
        await store.setData(created.path, Buffer.from('revoke'));
        expect(
          await store.replaceNode(created.path, replacement, NO_DATA, 0, store.session, following()),
        ).toBe('conflict');
        expect(await store.children(dir)).toEqual([nameOf(created.path)]);
        await store.delete(created.path);
        expect(
          await store.replaceNode(created.path, replacement, NO_DATA, 1, store.session, following()),
        ).toBe('missing');
        expect(await store.children(dir)).toEqual([]);
      });

      it('says missing for a node of a session that was lost, and creates nothing', async () => {
        const created = await createSequential(store, dir, 'write-', NO_DATA);
        const lostSession = store.session;
        if (!replaces) return;
        await expireSession();
        const replacement = `read-${nameOf(created.path).slice('write-'.length)}`;
        expect(await store.replaceNode(created.path, replacement, NO_DATA, 0, lostSession, following())).toBe(
          'missing',
        );
        expect(await store.children(dir)).toEqual([]);
      });
    });

    describe('setData', () => {
      it('replaces the data and counts versions from 0; with a version, only if nobody wrote in between', async () => {
        const created = await createSequential(store, dir, uniquePrefix(), Buffer.from('v0'));
        expect((await store.nodeData(created.path))?.version).toBe(0);
        expect(await store.setData(created.path, Buffer.from('v1'))).toBe('set');
        const read = await store.nodeData(created.path);
        expect([Buffer.from(read!.data).toString(), read!.version]).toEqual(['v1', 1]);
        // Two writers read version 1; the first to write wins, the second is told.
        expect(await store.setData(created.path, Buffer.from('mine'), 1)).toBe('set');
        expect(await store.setData(created.path, Buffer.from('theirs'), 1)).toBe('conflict');
        const after = await store.nodeData(created.path);
        expect([Buffer.from(after!.data).toString(), after!.version]).toEqual(['mine', 2]);
        await store.delete(created.path);
        expect(await store.setData(created.path, Buffer.from('late'))).toBe('missing');
        expect(await store.setData(created.path, Buffer.from('late'), 2)).toBe('missing');
      });
    });

    describe('creationId', () => {
      it('grows with every creation, across different parents', async () => {
        const parents = [
          `${root}/locks/a`,
          `${root}/locks/b`,
          `${root}/locks/a`,
          `${root}/other/c`,
          `${root}/locks/b`,
        ];
        const ids: bigint[] = [];
        for (const parent of parents) {
          const node = await create(parent);
          const id = await store.creationId(node.path);
          expect(id).not.toBeNull();
          ids.push(id!);
        }
        for (let i = 1; i < ids.length; i += 1) expect(ids[i]).toBeGreaterThan(ids[i - 1]!);
      });

      it('stays the same for one node however often it is read', async () => {
        const node = await create();
        const first = await store.creationId(node.path);
        await create();
        expect(await store.creationId(node.path)).toBe(first);
      });

      it('is null for a node that does not exist, or no longer exists', async () => {
        expect(await store.creationId(`${dir}/missing-0000000000`)).toBeNull();
        expect(await store.creationId(`/store-test-${randomUUID()}/a/b`)).toBeNull();
        const node = await create();
        await store.delete(node.path);
        expect(await store.creationId(node.path)).toBeNull();
      });
    });

    describe('delete', () => {
      it('removes the node', async () => {
        const node = await create();
        await store.delete(node.path);
        expect(await store.children(dir)).toEqual([]);
      });

      it('does not fail for a missing node, twice deleted or under a missing parent', async () => {
        const node = await create();
        await store.delete(node.path);
        await expect(store.delete(node.path)).resolves.toBeUndefined();
        await expect(store.delete(`/store-test-${randomUUID()}/a/b-0000000000`)).resolves.toBeUndefined();
      });
    });

    describe('onceDeleted (and waitUntilDeleted on it)', () => {
      it('resolves when the node is deleted, and not before', async () => {
        const node = await create();
        const before = { ...store.stats };
        const wait = track(waitUntilDeleted(store, node.path, { signal: neverAborted() }));
        await roundTrip();
        expect(wait.state()).toBe('pending');
        await store.delete(node.path);
        await expect(wait.promise).resolves.toBeUndefined();
        const counted = delta(before, store.stats);
        expect(counted.waitersWoken).toBe(1);
        // One watch for the path at most: a store that watches the whole lock tree arms none.
        expect(counted.watchesArmed).toBeLessThanOrEqual(1);
      });

      it('resolves at once for a node that is already gone (it vanished before the watch was set)', async () => {
        const node = await create();
        await store.delete(node.path);
        const before = { ...store.stats };
        await expect(waitUntilDeleted(store, node.path, { signal: neverAborted() })).resolves.toBeUndefined();
        await expect(
          waitUntilDeleted(store, `/store-test-${randomUUID()}/never/existed`, { signal: neverAborted() }),
        ).resolves.toBeUndefined();
        // A wait that found nothing to wait for woke nobody.
        expect(delta(before, store.stats).waitersWoken).toBe(0);
      });

      it('resolves when the deletion races with setting the watch', async () => {
        const node = await create();
        // The deletion is issued first and the wait right behind it, without waiting in between.
        const deleted = store.delete(node.path);
        const wait = waitUntilDeleted(store, node.path, { signal: neverAborted() });
        await deleted;
        await expect(wait).resolves.toBeUndefined();
      });

      it("rejects with the signal's reason when the signal aborts, and leaves other waiters on the path waiting", async () => {
        const node = await create();
        const controller = new AbortController();
        const aborted = track(waitUntilDeleted(store, node.path, { signal: controller.signal }));
        const other = track(waitUntilDeleted(store, node.path, { signal: neverAborted() }));
        await roundTrip();
        const reason = new Error('the caller gave up');
        controller.abort(reason);
        await expect(aborted.promise).rejects.toBe(reason);
        await roundTrip();
        expect(other.state()).toBe('pending');
        await store.delete(node.path);
        await expect(other.promise).resolves.toBeUndefined();
      });

      it('never calls a cancelled onceDeleted, and still calls the other callers of the path, once each', async () => {
        const node = await create();
        const calls: string[] = [];
        const cancel = store.onceDeleted(node.path, () => calls.push('cancelled'));
        const kept = track(
          new Promise<void>((resolve) =>
            store.onceDeleted(node.path, (error) => {
              calls.push(error ? `kept: ${String(error)}` : 'kept');
              resolve();
            }),
          ),
        );
        await roundTrip();
        cancel();
        await store.delete(node.path);
        await kept.promise;
        await roundTrip();
        expect(calls).toEqual(['kept']);
      });

      it("rejects with the signal's reason when the signal has already aborted, without throwing synchronously", async () => {
        const node = await create();
        const reason = new Error('aborted before the call');
        let returned: Promise<void> | undefined;
        expect(() => {
          returned = waitUntilDeleted(store, node.path, { signal: AbortSignal.abort(reason) });
        }).not.toThrow();
        await expect(returned).rejects.toBe(reason);
      });

      it('wakes every waiter on a path with one deletion, on one shared watch', async () => {
        const node = await create();
        const before = { ...store.stats };
        const waits = [1, 2, 3].map(() =>
          track(waitUntilDeleted(store, node.path, { signal: neverAborted() })),
        );
        await roundTrip();
        expect(waits.map((w) => w.state())).toEqual(['pending', 'pending', 'pending']);
        await store.delete(node.path);
        await Promise.all(waits.map((w) => w.promise));
        const counted = delta(before, store.stats);
        expect(counted.waitersWoken).toBe(3);
        // One watch for the path at most: a store that watches the whole lock tree arms none.
        expect(counted.watchesArmed).toBeLessThanOrEqual(1);
      });

      it('arms one watch for waiters that come after another waiter on the same path gave up', async () => {
        const node = await create();
        const before = { ...store.stats };
        const controller = new AbortController();
        const first = waitUntilDeleted(store, node.path, { signal: controller.signal });
        await roundTrip();
        controller.abort(new Error('gone'));
        await expect(first).rejects.toThrow('gone');
        const second = waitUntilDeleted(store, node.path, { signal: neverAborted() });
        await roundTrip();
        await store.delete(node.path);
        await expect(second).resolves.toBeUndefined();
        expect(delta(before, store.stats).waitersWoken).toBe(1);
      });

      it('wakes only the waiters of the deleted path: deleting a sibling wakes nobody else', async () => {
        const a = await create();
        const b = await create();
        const before = { ...store.stats };
        const waitA = track(waitUntilDeleted(store, a.path, { signal: neverAborted() }));
        const waitB = track(waitUntilDeleted(store, b.path, { signal: neverAborted() }));
        await roundTrip();
        await store.delete(b.path);
        await waitB.promise;
        // Anything the deletion of b set off has been delivered once a later request is answered.
        await roundTrip();
        expect(waitA.state()).toBe('pending');
        expect(delta(before, store.stats).waitersWoken).toBe(1);
        expect(await store.creationId(a.path)).not.toBeNull();
        await store.delete(a.path);
        await waitA.promise;
        expect(delta(before, store.stats).waitersWoken).toBe(2);
      });

      it('wakes waiters in the order the deletions happened', async () => {
        const nodes = [await create(), await create(), await create()];
        const woken: string[] = [];
        const waits = nodes.map((node) =>
          waitUntilDeleted(store, node.path, { signal: neverAborted() }).then(() => {
            woken.push(node.name);
          }),
        );
        await roundTrip();
        const order = [nodes[2]!, nodes[0]!, nodes[1]!];
        await Promise.all(order.map((node) => store.delete(node.path)));
        await Promise.all(waits);
        expect(woken).toEqual(order.map((node) => node.name));
      });
    });

    describe('sessions', () => {
      it('on expiry removes every ephemeral node of the session at once and aborts session.lost with LOCK_LOST', async () => {
        const session = store.session;
        const a = await create(`${root}/locks/a`);
        const b = await create(`${root}/locks/a`);
        const c = await create(`${root}/locks/c`);
        expect(session.lost.aborted).toBe(false);

        await expireSession();

        expect(session.lost.aborted).toBe(true);
        const reason: unknown = session.lost.reason;
        expect(reason).toBeInstanceOf(LockError);
        expect(isLockError(reason, 'LOCK_LOST')).toBe(true);
        for (const node of [a, b, c]) expect(await store.creationId(node.path)).toBeNull();
        expect(await store.children(`${root}/locks/a`)).toEqual([]);
        expect(await store.children(`${root}/locks/c`)).toEqual([]);
      });

      it(
        'on expiry wakes the waiters on the deleted nodes',
        async () => {
          const a = await create();
          const b = await create();
          const waitA = waitUntilDeleted(store, a.path, { signal: neverAborted() });
          const waitB = waitUntilDeleted(store, b.path, { signal: neverAborted() });
          await roundTrip();
          await expireSession();
          await expect(Promise.all([waitA, waitB])).resolves.toEqual([undefined, undefined]);
        },
        scaled(15_000),
      );

      it('replaces the lost session with a new one, whose nodes survive', async () => {
        const old = store.session;
        const before = await create();
        await expireSession();

        const fresh = store.session;
        expect(fresh).not.toBe(old);
        expect(fresh.lost.aborted).toBe(false);
        const created = await createSequential(store, dir, uniquePrefix(), NO_DATA);
        expect(created.session).toBe(store.session);
        expect(created.session).not.toBe(old);
        expect(created.session.lost.aborted).toBe(false);

        expect(await store.creationId(before.path)).toBeNull();
        expect(await store.creationId(created.path)).not.toBeNull();
        expect(await store.children(dir)).toEqual([nameOf(created.path)]);
        // The old session is the one that was lost; the new one stays alive.
        expect(old.lost.aborted).toBe(true);
        expect(store.session.lost.aborted).toBe(false);
      });
    });

    describe('lock parents (containers)', () => {
      it('can be created again after the last child is deleted, with a larger creation id', async () => {
        const first = await create();
        const firstId = await store.creationId(first.path);
        await store.delete(first.path);
        expect(await store.children(dir)).toEqual([]);

        if (store.kind === 'memory') {
          // The embedded store drops an empty parent at once, so its sequence restarts.
          expect(await store.children(`${root}/locks`)).toEqual([]);
        } else {
          // ZooKeeper reaps an empty container (the test ZooKeeper looks every second); a
          // persistent parent would stay, and this wait would end only with its timeout.
          await waitUntilDeleted(store, dir, { signal: AbortSignal.timeout(20_000) });
          expect(await store.children(`${root}/locks`)).not.toContain(dir.slice(`${root}/locks/`.length));
        }
        // ZooKeeper removes the empty container a little later; creating must work either way.
        const again = await create();
        expect(again.path).toBe(`${dir}/${again.name}`);
        if (store.kind === 'memory') expect(again.name).toBe(`${again.prefix}0000000000`);
        expect(await store.children(dir)).toEqual([again.name]);
        const againId = await store.creationId(again.path);
        expect(againId).not.toBeNull();
        expect(againId!).toBeGreaterThan(firstId!);
      });
    });

    describe('close', () => {
      it('is idempotent, ends the session, and makes later operations reject with UNAVAILABLE', async () => {
        const node = await create();
        const session = store.session;
        await store.close();
        await expect(store.close()).resolves.toBeUndefined();
        expect(session.lost.aborted).toBe(true);

        const unavailable = (error: unknown): boolean => isLockError(error, 'UNAVAILABLE');
        const outcomes = await Promise.allSettled([
          createSequential(store, dir, uniquePrefix(), NO_DATA),
          store.children(dir),
          store.creationId(node.path),
          store.delete(node.path),
          waitUntilDeleted(store, node.path, { signal: neverAborted() }),
        ]);
        for (const outcome of outcomes) {
          expect(outcome.status).toBe('rejected');
          if (outcome.status === 'rejected') expect(unavailable(outcome.reason)).toBe(true);
        }
      });
    });
  });
}
