import { randomUUID } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  RECORD_KEY_MAX_BYTES,
  RECORD_REQUEST_ID_MAX_BYTES,
  RECORD_VALUE_MAX_BYTES,
  RECORDS_PER_LOCK_MAX,
} from '../../src/common/limits.js';
import { ElectionCaller } from '../support/election-caller.js';
import { LockCaller, LockMode, type RequestStream } from '../support/lock-caller.js';
import { RawZooKeeper } from '../support/raw-zookeeper.js';
import { RecordCaller, refusalOf } from '../support/record-caller.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { TcpProxy } from '../support/tcp-proxy.js';

/*
 * The RecordService's promises (proto/lockstream/v1/records.proto), against a server in its own
 * process on both stores: only a current holder's token writes, every other token is refused
 * and nothing is written; revisions start at 1 and strictly grow per key, across deletes too; a
 * write conditioned on a revision commits only at that revision; records outlive their writer;
 * bad input is refused with a message that names it.
 */

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

const text = (value: Uint8Array): string => Buffer.from(value).toString();

for (const store of ['embedded', 'zookeeper'] as const) {
  describe(`guarded records on the ${store} store`, () => {
    let server: ServerProcess;
    let locks: LockCaller;
    let records: RecordCaller;
    const open: RequestStream[] = [];
    const hold = async (name: string, mode = LockMode.MUTEX, extra: object = {}): Promise<bigint> => {
      const stream = locks.open({ name, mode, ...extra });
      open.push(stream);
      return stream.acquired();
    };

    const root = `/records-${randomUUID()}`;
    beforeAll(async () => {
      server = await startServerProcess(
        store === 'embedded' ? [] : ['--zookeeper', connectString, '--root', root],
      );
      locks = new LockCaller(server.address);
      records = new RecordCaller(server.address);
    });
    afterEach(() => {
      for (const stream of open.splice(0)) stream.cancel();
    });
    afterAll(async () => {
      locks?.close();
      records?.close();
      await server?.kill('SIGTERM');
    });

    it("writes under a holder's token: revisions start at 1 and grow with every write of the lock's records", async () => {
      const name = `r-${randomUUID()}`;
      const token = await hold(name);
      expect(await records.get(name, 'offset')).toEqual({
        found: false,
        value: Buffer.alloc(0),
        revision: 0n,
      });
      expect(await records.put(name, 'offset', '10', token)).toBe(1n);
      expect(await records.put(name, 'offset', '20', token)).toBe(2n);
      expect(await records.put(name, 'other', 'x', token)).toBe(3n);
      expect(await records.put(name, 'offset', '30', token)).toBe(4n);
      const read = await records.get(name, 'offset');
      expect({ found: read.found, value: text(read.value), revision: read.revision }).toEqual({
        found: true,
        value: '30',
        revision: 4n,
      });
      // An empty value is a value.
      expect(await records.put(name, 'empty', '', token)).toBe(5n);
      expect(await records.get(name, 'empty')).toMatchObject({ found: true, revision: 5n });
    });

    it('keeps records after their writer released the lock, and lets the next holder write them', async () => {
      const name = `r-${randomUUID()}`;
      const first = locks.open({ name, mode: LockMode.MUTEX });
      const firstToken = await first.acquired();
      expect(await records.put(name, 'checkpoint', 'step 1', firstToken)).toBe(1n);
      first.sendRelease();
      expect((await first.outcome).code).toBe(status.OK);
      const read = await records.get(name, 'checkpoint');
      expect([text(read.value), read.revision]).toEqual(['step 1', 1n]);
      const next = await hold(name);
      expect(next).toBeGreaterThan(firstToken);
      expect(await records.put(name, 'checkpoint', 'step 2', next, 1n)).toBe(2n);
    });

    it("refuses every token that is not a current holder's with FAILED_PRECONDITION, and writes nothing", async () => {
      const name = `r-${randomUUID()}`;
      const other = `r-${randomUUID()}`;
      const released = locks.open({ name, mode: LockMode.MUTEX });
      const releasedToken = await released.acquired();
      expect(await records.put(name, 'k', 'first', releasedToken)).toBe(1n);
      released.sendRelease();
      await released.outcome;
      const otherToken = await hold(other);
      const holder = await hold(name);

      const refusals = await Promise.all([
        refusalOf(records.put(name, 'k', 'stale', releasedToken)),
        refusalOf(records.put(name, 'k', 'never', 1n)),
        refusalOf(records.put(name, 'k', 'zero', 0n)),
        refusalOf(records.put(name, 'k', 'another lock', otherToken)),
        refusalOf(records.delete(name, 'k', releasedToken)),
      ]);
      for (const refusal of refusals) {
        expect(refusal.code).toBe(status.FAILED_PRECONDITION);
        expect(refusal.details).toMatch(new RegExp(`does not hold lock "${name}"`));
      }
      const read = await records.get(name, 'k');
      expect([text(read.value), read.revision]).toEqual(['first', 1n]);
      expect(await records.put(name, 'k', 'holder', holder)).toBe(2n);
    });

    it("refuses a READ holder's token (readers hold together), and takes a WRITE holder's, a semaphore holder's and a leader's term", async () => {
      const name = `r-${randomUUID()}`;
      const reader = await hold(name, LockMode.READ);
      const refused = await refusalOf(records.put(name, 'k', 'v', reader));
      expect(refused.code).toBe(status.FAILED_PRECONDITION);
      expect(refused.details).toMatch(/READ mode/);
      expect((await records.get(name, 'k')).found).toBe(false);

      const written = `r-${randomUUID()}`;
      expect(await records.put(written, 'k', 'w', await hold(written, LockMode.WRITE))).toBe(1n);
      const semaphore = `r-${randomUUID()}`;
      const slot = await hold(semaphore, LockMode.SEMAPHORE, { limit: 2, weight: 1 });
      expect(await records.put(semaphore, 'k', 's', slot)).toBe(1n);

      const election = `e-${randomUUID()}`;
      const elections = new ElectionCaller(server.address);
      try {
        const candidate = elections.campaign({ name: election, value: Buffer.from('me') });
        const term = await candidate.elected();
        expect(await records.put(election, 'leader-state', 'x', term)).toBe(1n);
        candidate.resign();
        await candidate.outcome;
        expect((await refusalOf(records.put(election, 'leader-state', 'late', term))).code).toBe(
          status.FAILED_PRECONDITION,
        );
      } finally {
        elections.close();
      }
    });

    if (store === 'zookeeper') {
      it("keeps each record as one persistent node under <root>/records/<lock>/, beside the lock's counter, and they stay when nobody holds the lock", async () => {
        const name = `r-${randomUUID()}`;
        const holder = locks.open({ name, mode: LockMode.MUTEX });
        const token = await holder.acquired();
        await records.put(name, 'a', 'x', token);
        await records.put(name, 'b', 'y', token);
        holder.sendRelease();
        await holder.outcome;
        const raw = await RawZooKeeper.connect(connectString);
        try {
          const listed = await raw.children(`${root}/records/${name}`);
          expect(listed.value?.sort()).toEqual(['.revision', 'a', 'b']);
          // Its value, the write's id (16 bytes when the writer gave none) and 10 bytes.
          expect((await raw.getData(`${root}/records/${name}/a`)).value?.byteLength).toBe(1 + 10 + 16);
        } finally {
          raw.close();
        }
      });
    } else {
      it('loses every record when the embedded store stops, as it loses its locks: a restart with the same command line has none', async () => {
        const name = `r-${randomUUID()}`;
        const first = await startServerProcess([]);
        const [firstLocks, firstRecords] = [new LockCaller(first.address), new RecordCaller(first.address)];
        const holder = firstLocks.open({ name, mode: LockMode.MUTEX });
        expect(await firstRecords.put(name, 'k', 'v', await holder.acquired())).toBe(1n);
        firstLocks.close();
        firstRecords.close();
        await first.kill('SIGTERM');
        const again = await startServerProcess([]);
        const againRecords = new RecordCaller(again.address);
        try {
          expect((await againRecords.get(name, 'k')).found).toBe(false);
        } finally {
          againRecords.close();
          await again.kill('SIGTERM');
        }
      });
    }

    it('commits a write with expected_revision only at that revision (0: only a new record), else ABORTED with nothing written', async () => {
      const name = `r-${randomUUID()}`;
      const token = await hold(name);
      expect(await records.put(name, 'k', 'a', token, 0n)).toBe(1n);
      const again = await refusalOf(records.put(name, 'k', 'b', token, 0n));
      expect(again).toEqual({
        code: status.ABORTED,
        details: `record "k" of "${name}" is at revision 1, not 0`,
      });
      expect((await refusalOf(records.put(name, 'k', 'c', token, 2n))).code).toBe(status.ABORTED);
      expect(text((await records.get(name, 'k')).value)).toBe('a');
      expect(await records.put(name, 'k', 'd', token, 1n)).toBe(2n);
      expect((await refusalOf(records.delete(name, 'k', token, 1n))).code).toBe(status.ABORTED);
      expect((await records.get(name, 'k')).revision).toBe(2n);
    });

    it("makes a write sent again with the same request_id once, while the record's last write is still that one", async () => {
      const name = `r-${randomUUID()}`;
      const token = await hold(name);
      expect(await records.put(name, 'k', 'a', token, undefined, 'write-1')).toBe(1n);
      // Sent again (as after UNAVAILABLE): answered with that write's revision, nothing written.
      expect(await records.put(name, 'k', 'a', token, undefined, 'write-1')).toBe(1n);
      expect(await records.put(name, 'k', 'a', token, 0n, 'write-1')).toBe(1n);
      expect(await records.put(name, 'other', 'x', token)).toBe(2n);
      expect((await records.get(name, 'k')).revision).toBe(1n);
      // Another id, or none, is another write.
      expect(await records.put(name, 'k', 'b', token, undefined, 'write-2')).toBe(3n);
      expect(await records.put(name, 'k', 'b', token)).toBe(4n);
      // Once a later write replaced it, the old id is a new write again.
      expect(await records.put(name, 'k', 'a', token, undefined, 'write-1')).toBe(5n);
      // A stale token is refused even with the id of the record's last write.
      const refused = await refusalOf(records.put(name, 'k', 'a', 1n, undefined, 'write-1'));
      expect(refused.code).toBe(status.FAILED_PRECONDITION);
      const tooLong = await refusalOf(
        records.put(name, 'k', 'a', token, undefined, 'i'.repeat(RECORD_REQUEST_ID_MAX_BYTES + 1)),
      );
      expect(tooLong).toEqual({
        code: status.INVALID_ARGUMENT,
        details: `record request id is ${RECORD_REQUEST_ID_MAX_BYTES + 1} bytes; the limit is ${RECORD_REQUEST_ID_MAX_BYTES}`,
      });
    });

    it('deletes a record (a missing one is no error), and a later write of its key gets a larger revision', async () => {
      const name = `r-${randomUUID()}`;
      const token = await hold(name);
      expect(await records.delete(name, 'k', token)).toBe(false);
      expect((await refusalOf(records.delete(name, 'k', token, 3n))).code).toBe(status.ABORTED);
      expect(await records.put(name, 'k', 'a', token)).toBe(1n);
      expect(await records.put(name, 'k', 'b', token)).toBe(2n);
      expect(await records.delete(name, 'k', token, 2n)).toBe(true);
      expect(await records.get(name, 'k')).toEqual({ found: false, value: Buffer.alloc(0), revision: 0n });
      expect(await records.put(name, 'k', 'c', token, 0n)).toBe(4n);
    });

    it('refuses a malformed name or key and a value over the limit with INVALID_ARGUMENT, naming the problem', async () => {
      const name = `r-${randomUUID()}`;
      const token = await hold(name);
      const cases: Array<[Promise<unknown>, RegExp]> = [
        [records.put('', 'k', 'v', token), /invalid lock name: name is empty/],
        [records.put(name, '', 'v', token), /invalid record key: key is empty/],
        [
          records.get(name, 'a\u0001b'),
          /invalid record key: key contains control character U\+0001 at index 1/,
        ],
        [
          records.put(name, 'k'.repeat(RECORD_KEY_MAX_BYTES + 1), 'v', token),
          new RegExp(
            `key is ${RECORD_KEY_MAX_BYTES + 1} bytes of UTF-8; the limit is ${RECORD_KEY_MAX_BYTES}`,
          ),
        ],
        [
          records.put(name, 'k', Buffer.alloc(RECORD_VALUE_MAX_BYTES + 1), token),
          new RegExp(
            `record value is ${RECORD_VALUE_MAX_BYTES + 1} bytes; the limit is ${RECORD_VALUE_MAX_BYTES}`,
          ),
        ],
      ];
      for (const [work, details] of cases) {
        const refusal = await refusalOf(work);
        expect(refusal.code).toBe(status.INVALID_ARGUMENT);
        expect(refusal.details).toMatch(details);
      }
      // At the limits, both are taken.
      const longest = 'k'.repeat(RECORD_KEY_MAX_BYTES);
      expect(await records.put(name, longest, Buffer.alloc(RECORD_VALUE_MAX_BYTES, 7), token)).toBe(1n);
      expect((await records.get(name, longest)).value.byteLength).toBe(RECORD_VALUE_MAX_BYTES);
    });

    it(`refuses a new key past ${RECORDS_PER_LOCK_MAX} records with RESOURCE_EXHAUSTED; existing keys stay writable`, async () => {
      const name = `r-${randomUUID()}`;
      const token = await hold(name);
      for (let i = 0; i < RECORDS_PER_LOCK_MAX; i += 50) {
        await Promise.all(Array.from({ length: 50 }, (_, j) => records.put(name, `k${i + j}`, '', token)));
      }
      const refusal = await refusalOf(records.put(name, 'one-more', '', token));
      expect(refusal).toEqual({
        code: status.RESOURCE_EXHAUSTED,
        details: `lock "${name}" has ${RECORDS_PER_LOCK_MAX} records; the limit is ${RECORDS_PER_LOCK_MAX}`,
      });
      expect(await records.put(name, 'k0', 'again', token)).toBe(BigInt(RECORDS_PER_LOCK_MAX) + 1n);
      expect(await records.delete(name, 'k1', token)).toBe(true);
      expect(await records.put(name, 'one-more', '', token)).toBe(BigInt(RECORDS_PER_LOCK_MAX) + 3n);
    });
  });
}

describe('guarded records on ZooKeeper through the addon client', () => {
  let server: ServerProcess;
  let locks: LockCaller;
  let records: RecordCaller;

  beforeAll(async () => {
    server = await startServerProcess([
      '--zookeeper',
      connectString,
      '--zookeeper-client',
      'addon',
      '--root',
      `/records-addon-${randomUUID()}`,
    ]);
    locks = new LockCaller(server.address);
    records = new RecordCaller(server.address);
  });
  afterAll(async () => {
    locks?.close();
    records?.close();
    await server?.kill('SIGTERM');
  });

  it('are refused with UNIMPLEMENTED, naming what is missing', async () => {
    const name = `r-${randomUUID()}`;
    const holder = locks.open({ name, mode: LockMode.MUTEX });
    const token = await holder.acquired();
    for (const call of [
      records.put(name, 'k', 'v', token),
      records.get(name, 'k'),
      records.delete(name, 'k', token),
    ]) {
      const refused = await refusalOf(call);
      expect(refused.code).toBe(status.UNIMPLEMENTED);
      expect(refused.details).toMatch(/--zookeeper-client protocol/);
    }
    holder.cancel();
  });
});

describe('guarded records while ZooKeeper cannot be reached', () => {
  let proxy: TcpProxy;
  let server: ServerProcess;
  let records: RecordCaller;

  beforeAll(async () => {
    proxy = await TcpProxy.start(connectString);
    server = await startServerProcess([
      '--zookeeper',
      proxy.address,
      '--connect-timeout',
      '1s',
      '--root',
      `/records-unreachable-${randomUUID()}`,
    ]);
    records = new RecordCaller(server.address);
  });
  afterAll(async () => {
    records?.close();
    await server?.kill('SIGKILL');
    await proxy?.close();
  });

  it('answer UNAVAILABLE, reads and writes alike', async () => {
    const name = `r-${randomUUID()}`;
    const locks = new LockCaller(server.address);
    const holder = locks.open({ name, mode: LockMode.MUTEX });
    const token = await holder.acquired();
    expect(await records.put(name, 'k', 'v', token)).toBe(1n);
    // Every connection cut, and none accepted: the store cannot reach ZooKeeper.
    await proxy.close();
    for (const call of [records.put(name, 'k', 'w', token), records.get(name, 'k')]) {
      const refused = await refusalOf(call);
      expect(refused.code, refused.details).toBe(status.UNAVAILABLE);
    }
    holder.cancel();
    locks.close();
  });
});
