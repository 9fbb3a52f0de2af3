import { randomUUID } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { LockMode } from '../../src/gen/lockstream/v1/lockstream.js';
import { LockCaller, type LockRpc, type RequestStream } from '../support/lock-caller.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

/*
 * Revocation escalates, against a server in its own process on both stores and both RPCs: a
 * holder asked cooperatively can still be forced by a later RevokeLock with force_after, which
 * it is told (a second revoke_requested, with force_at) before that deadline can take the lock;
 * a deadline once told never moves earlier and is never removed.
 */

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

/** The deadline a later RevokeLock adds; long enough that an earlier one would show. */
const DEADLINE_S = 1.5;

function revocations(stream: RequestStream): Array<{ reason: string; forceAt: Date | undefined }> {
  return stream.messages.flatMap((m) => (m.kind?.$case === 'revokeRequested' ? [m.kind.value] : []));
}

for (const store of ['embedded', 'zookeeper'] as const) {
  describe(`revocation on the ${store} store`, () => {
    let server: ServerProcess;

    beforeAll(async () => {
      server = await startServerProcess(
        store === 'embedded' ? [] : ['--zookeeper', connectString, '--root', `/revocation-${randomUUID()}`],
      );
    });
    afterAll(async () => {
      await server?.kill('SIGTERM');
    });

    for (const rpc of ['acquire', 'session'] as const satisfies LockRpc[]) {
      it(`over ${rpc}: cooperative, then forced: the holder is told the deadline, which a later, earlier one does not move, nor a cooperative one remove`, async () => {
        const caller = new LockCaller(
          server.address,
          { 'grpc.use_local_subchannel_pool': 1 },
          undefined,
          rpc,
        );
        const name = `escalated/${randomUUID()}`;
        const holder = caller.open({ name, owner: 'holder' });
        const waiter = caller.open({ name, owner: 'waiter' });
        try {
          const token = await holder.acquired();
          await waiter.queued();

          expect(await caller.revoke(name, 'when you can')).toBe(1);
          await holder.receipt('revokeRequested');
          expect(revocations(holder)).toEqual([{ reason: 'when you can', forceAt: undefined }]);

          const askedAt = Date.now();
          expect(await caller.revoke(name, 'maintenance', DEADLINE_S)).toBe(1);
          await holder.receipt('revokeRequested', 1);
          const forceAt = revocations(holder)[1]!.forceAt;
          expect(revocations(holder)).toEqual([
            { reason: 'when you can', forceAt: undefined },
            { reason: 'maintenance', forceAt },
          ]);
          expect(forceAt!.getTime()).toBeGreaterThanOrEqual(askedAt + DEADLINE_S * 1000);

          // An earlier deadline, and a request with none: both count the holder as asked,
          // neither is told, and the deadline told stands.
          expect(await caller.revoke(name, 'sooner', 0.05)).toBe(1);
          expect(await caller.revoke(name, 'never mind')).toBe(1);
          expect(await caller.checkToken(name, token)).toBe(true);

          expect(await holder.outcome).toMatchObject({
            code: status.ABORTED,
            details: expect.stringMatching(/was revoked and not released in time: maintenance/),
          });
          expect(holder.endedAt!).toBeGreaterThanOrEqual(forceAt!.getTime());
          await waiter.acquired();
          // Nobody had the lock before the deadline the holder was told.
          expect(Date.now()).toBeGreaterThanOrEqual(forceAt!.getTime());
          expect(await caller.checkToken(name, token)).toBe(false);
          expect(revocations(holder)).toHaveLength(2);
          expect((await waiter.release()).code).toBe(status.OK);
        } finally {
          holder.cancel();
          waiter.cancel();
          await Promise.all([holder.outcome, waiter.outcome]);
          caller.close();
        }
      });

      it(`over ${rpc}: a multi-lock keeps the one deadline its holder was told, even when another of its locks gets an earlier one`, async () => {
        const caller = new LockCaller(
          server.address,
          { 'grpc.use_local_subchannel_pool': 1 },
          undefined,
          rpc,
        );
        const [first, second] = [`set/${randomUUID()}/a`, `set/${randomUUID()}/b`];
        const target = (name: string) => ({ name, mode: LockMode.MUTEX, limit: 0, weight: undefined });
        const holder = caller.open({
          name: '',
          mode: LockMode.UNSPECIFIED,
          locks: [target(first), target(second)],
          owner: 'set-holder',
        });
        try {
          await holder.acquired();
          const askedAt = Date.now();
          expect(await caller.revoke(first, 'maintenance', DEADLINE_S)).toBe(1);
          await holder.receipt('revokeRequested');
          const forceAt = revocations(holder)[0]!.forceAt!;
          expect(forceAt.getTime()).toBeGreaterThanOrEqual(askedAt + DEADLINE_S * 1000);
          // The other lock of the set, asked with an earlier deadline: its holder is not told
          // it, and the set is not taken before the deadline it was told.
          expect(await caller.revoke(second, 'sooner', 0.05)).toBe(1);
          expect(await holder.outcome).toMatchObject({
            code: status.ABORTED,
            details: expect.stringMatching(/was revoked and not released in time: maintenance/),
          });
          expect(holder.endedAt!).toBeGreaterThanOrEqual(forceAt.getTime());
          expect(revocations(holder)).toEqual([{ reason: 'maintenance', forceAt }]);
        } finally {
          holder.cancel();
          await holder.outcome;
          caller.close();
        }
      });
    }
  });
}
