import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isLockError } from '../../src/server/lock-error.js';
import { createSequential, type StoreBackend } from '../../src/server/stores/store.js';

// The RecordTransactions contract (src/server/stores/store.ts), run by describeStoreContract
// against every store: persistent records written in one step with checks of other nodes.

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
const text = (data: Uint8Array | undefined): string | undefined =>
  data === undefined ? undefined : new TextDecoder().decode(data);

/** `makeStore` as describeStoreContract's; `replaces` false for a store without multi (UNSUPPORTED). */
export function describeRecordContract(
  makeStore: (root: string) => Promise<{
    readonly store: StoreBackend;
    readonly expireSession: () => Promise<void>;
    readonly replaces?: boolean;
  }>,
): void {
  describe('records written in one step (RecordTransactions)', () => {
    let store: StoreBackend;
    let expireSession: () => Promise<void>;
    let supported = true;
    let root: string;
    let dir: string;

    beforeEach(async () => {
      root = `/record-test-${randomUUID()}`;
      dir = `${root}/elections/name`;
      const made = await makeStore(root);
      ({ store, expireSession } = made);
      supported = made.replaces ?? true;
    });

    afterEach(async () => {
      await store.close();
    });

    /** An ephemeral node of the store's session, as a lock request's. */
    const holder = async (): Promise<string> =>
      (await createSequential(store, `${root}/locks/name`, `mutex-${randomUUID()}-`, new Uint8Array())).path;

    it('creates records under made directories, only while a checked node exists, all or nothing', async () => {
      if (!supported) {
        await expect(store.makeDirs(dir).then(() => store.transact([]))).rejects.toSatisfy((error) =>
          isLockError(error, 'UNSUPPORTED'),
        );
        return;
      }
      await store.makeDirs(dir);
      await store.makeDirs(dir); // again: nothing to do
      expect(await store.children(dir)).toEqual([]);
      const node = await holder();
      expect(
        await store.transact([
          { op: 'check', path: node },
          { op: 'create', path: `${dir}/a`, data: bytes('first') },
          { op: 'create', path: `${dir}/b`, data: bytes('second') },
        ]),
      ).toEqual({ kind: 'done' });
      expect((await store.children(dir)).sort()).toEqual(['a', 'b']);
      expect(text((await store.nodeData(`${dir}/a`))?.data)).toBe('first');

      // A failing op applies nothing before it either.
      expect(
        await store.transact([
          { op: 'check', path: node },
          { op: 'create', path: `${dir}/c`, data: bytes('third') },
          { op: 'create', path: `${dir}/a`, data: bytes('again') },
        ]),
      ).toEqual({ kind: 'failed', index: 2, reason: 'exists' });
      expect((await store.children(dir)).sort()).toEqual(['a', 'b']);

      await store.delete(node);
      expect(
        await store.transact([
          { op: 'check', path: node },
          { op: 'create', path: `${dir}/c`, data: bytes('third') },
        ]),
      ).toEqual({ kind: 'failed', index: 0, reason: 'missing' });
      expect(await store.transact([{ op: 'create', path: `${dir}/missing/x`, data: bytes('x') }])).toEqual({
        kind: 'failed',
        index: 0,
        reason: 'missing',
      });
      expect((await store.children(dir)).sort()).toEqual(['a', 'b']);
    });

    it('sets data by version (compare-and-set), checks versions, and deletes records', async () => {
      if (!supported) return;
      await store.makeDirs(dir);
      const path = `${dir}/r`;
      expect(await store.transact([{ op: 'create', path, data: bytes('v0') }])).toEqual({ kind: 'done' });
      expect(await store.transact([{ op: 'set', path, data: bytes('v1'), version: 0 }])).toEqual({
        kind: 'done',
      });
      expect(await store.transact([{ op: 'set', path, data: bytes('lost'), version: 0 }])).toEqual({
        kind: 'failed',
        index: 0,
        reason: 'conflict',
      });
      expect(await store.transact([{ op: 'check', path, version: 0 }])).toEqual({
        kind: 'failed',
        index: 0,
        reason: 'conflict',
      });
      const read = await store.nodeData(path);
      expect(text(read?.data)).toBe('v1');
      expect(read?.version).toBe(1);
      expect(await store.transact([{ op: 'set', path, data: bytes('v2') }])).toEqual({ kind: 'done' });
      expect(
        await store.transact([
          { op: 'delete', path },
          { op: 'delete', path: `${dir}/none` },
        ]),
      ).toEqual({ kind: 'failed', index: 1, reason: 'missing' });
      expect(text((await store.nodeData(path))?.data)).toBe('v2');
      expect(await store.transact([{ op: 'delete', path }])).toEqual({ kind: 'done' });
      expect(await store.nodeData(path)).toBeNull();
      expect(await store.children(dir)).toEqual([]);
    });

    it('tells followers of a record of its changes, and children watchers of new records', async () => {
      if (!supported) return;
      await store.makeDirs(dir);
      const path = `${dir}/watched`;
      const created = new Promise<void>((resolve) => {
        const stop = store.watchChildren(dir, () => {
          stop();
          resolve();
        });
      });
      expect(await store.transact([{ op: 'create', path, data: bytes('v0') }])).toEqual({ kind: 'done' });
      await created;
    });

    it('keeps records (and their directories) when the session that wrote them ends', async () => {
      if (!supported) return;
      await store.makeDirs(dir);
      const node = await holder();
      expect(
        await store.transact([
          { op: 'check', path: node },
          { op: 'create', path: `${dir}/kept`, data: bytes('kept') },
        ]),
      ).toEqual({ kind: 'done' });
      await expireSession();
      await expect
        .poll(async () => text((await store.nodeData(`${dir}/kept`))?.data), { timeout: 10_000 })
        .toBe('kept');
      expect(await store.nodeData(node)).toBeNull();
      expect(await store.transact([{ op: 'delete', path: `${dir}/kept` }])).toEqual({ kind: 'done' });
      // The directory stays, empty.
      expect(await store.children(dir)).toEqual([]);
      expect(await store.transact([{ op: 'create', path: `${dir}/again`, data: bytes('') }])).toEqual({
        kind: 'done',
      });
    });
  });
}
