import { randomUUID } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { LockCaller, seconds, type LockRpc } from '../support/lock-caller.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

/**
 * How a held lock's stream ends, against a server in its own process (where the races are):
 * a loss is told before the lock is anyone else's, and a cancel is never read as a release.
 * Each case is tried several times, because what breaks them is the order in which frames
 * arrive, which one try may happen to get right.
 */

const TRIES = 10;
/** A fresh connection per client: what the client sends goes out on its own TCP stream. */
const OWN_CONNECTION = { 'grpc.use_local_subchannel_pool': 1 };

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

for (const store of ['embedded', 'zookeeper'] as const) {
  describe(`stream ends, on a server on the ${store} store`, () => {
    let server: ServerProcess;

    beforeAll(async () => {
      server = await startServerProcess(
        store === 'embedded' ? [] : ['--zookeeper', connectString, '--root', `/stream-ends-${randomUUID()}`],
      );
    });
    afterAll(async () => {
      await server?.kill('SIGTERM');
    });

    for (const rpc of ['acquire', 'session'] as const satisfies LockRpc[]) {
      describe(`over ${rpc}`, () => {
        it('tells a holder it lost the lock to a forced revocation before the next waiter on its connection is granted', async () => {
          const caller = new LockCaller(server.address, OWN_CONNECTION, undefined, rpc);
          try {
            for (let attempt = 0; attempt < TRIES; attempt += 1) {
              const name = `forced/${randomUUID()}`;
              const holder = caller.open({ name, owner: 'holder' });
              const token = await holder.acquired();
              const waiter = caller.open({ name, owner: 'waiter' });
              expect(await waiter.queued()).toBe(1);
              expect(await caller.revoke(name, 'drill', 0.05)).toBe(1);
              const granted = await waiter.receipt('acquired');
              expect(await holder.outcome).toMatchObject({
                code: status.ABORTED,
                details: expect.stringMatching(/was revoked and not released in time: drill/),
              });
              const told = await holder.outcomeReceipt();
              expect(told, `try ${attempt}: the holder's loss arrived after the waiter's grant`).toBeLessThan(
                granted,
              );
              expect(await waiter.acquired()).toBeGreaterThan(token);
              expect((await waiter.release()).code).toBe(status.OK);
            }
          } finally {
            caller.close();
          }
        });

        it('keeps a cancelled holder for its resume grace, on a fresh connection every time', async () => {
          const others = new LockCaller(server.address, OWN_CONNECTION, undefined, rpc);
          try {
            for (let attempt = 0; attempt < TRIES; attempt += 1) {
              const name = `cancelled/${randomUUID()}`;
              const holderCaller = new LockCaller(server.address, OWN_CONNECTION, undefined, rpc);
              const holder = holderCaller.open({ name, owner: 'holder', resumeGrace: seconds(30) });
              const { token: resumeToken } = await holder.resumable();
              const token = await holder.acquired();
              holder.cancel();
              expect((await holder.outcome).code).toBe(status.CANCELLED);
              holderCaller.close();

              const waiter = others.open({ name, owner: 'waiter' });
              const firstAnswer = await Promise.race([
                waiter.queued(),
                waiter.acquired().then(() => 'acquired'),
              ]);
              expect(firstAnswer, `try ${attempt}: the cancelled holder's lock was freed`).toBe(1);
              const resumed = others.resume(resumeToken);
              expect(await resumed.acquired(), `try ${attempt}: the resume found no lock`).toBe(token);
              expect(waiter.isAcquired, `try ${attempt}: granted while the holder was resumable`).toBe(false);
              expect((await resumed.release()).code).toBe(status.OK);
              expect(await waiter.acquired()).toBeGreaterThan(token);
              expect((await waiter.release()).code).toBe(status.OK);
            }
          } finally {
            others.close();
          }
        });
      });
    }
  });
}
