import { randomUUID } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { LockCaller, LockMode, nextReceipt, seconds, type RequestStream } from '../support/lock-caller.js';
import { mulberry32 } from '../support/random.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

/**
 * Two lockstream servers (each in its own process) on one ZooKeeper. A release answered on one
 * is over for the other. A semaphore shared by both: a grant on one instance reaches a waiter
 * of the other that waits for it (through the granted request's node), and the limit and the
 * queue order hold across instances.
 */

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

describe('two lockstream instances on one ZooKeeper', () => {
  const servers: ServerProcess[] = [];
  const callers: LockCaller[] = [];
  const streams: RequestStream[] = [];
  const semaphore = (
    instance: number,
    name: string,
    limit: number,
    weight: number,
    owner = '',
  ): RequestStream => {
    const stream = callers[instance]!.open({ name, mode: LockMode.SEMAPHORE, limit, weight, owner });
    streams.push(stream);
    return stream;
  };

  beforeAll(async () => {
    const root = `/semaphores-${randomUUID()}`;
    for (let i = 0; i < 2; i += 1) {
      const server = await startServerProcess(['--zookeeper', connectString, '--root', root]);
      servers.push(server);
      callers.push(new LockCaller(server.address));
    }
  });

  afterAll(async () => {
    for (const stream of streams) stream.cancel();
    for (const caller of callers) caller.close();
    await Promise.all(servers.map((server) => server.kill('SIGTERM')));
  });

  it('lets a request on the other instance take a lock at once (try-lock) once `released` was answered: nothing of the released request is left to queue behind', async () => {
    for (let round = 0; round < 20; round += 1) {
      const holder = callers[round % 2]!.open({ name: 'passed-on', owner: `holder-${round}` });
      streams.push(holder);
      await holder.acquired();
      expect((await holder.release()).code).toBe(status.OK);
      const next = callers[(round + 1) % 2]!.open({ name: 'passed-on', waitTimeout: seconds(0) });
      streams.push(next);
      await next.acquired();
      expect((await next.release()).code).toBe(status.OK);
    }
  });

  it('tells a waiter of one instance of a grant on the other, so that it watches the holders from then on', async () => {
    // limit 3: a and b hold one each; c (2) waits for released weight, d (1) for c's grant.
    const a = semaphore(0, 'relay', 3, 1, 'a');
    const b = semaphore(1, 'relay', 3, 1, 'b');
    await Promise.all([a.acquired(), b.acquired()]);
    const c = semaphore(0, 'relay', 3, 2, 'c');
    await c.queued();
    const d = semaphore(1, 'relay', 3, 1, 'd');
    await d.queued();

    await a.release();
    await c.acquired();
    // d does not fit beside b and c, and is now the first waiter: b's release must wake it,
    // though c (which it waited for) still holds.
    expect(d.isAcquired).toBe(false);
    await b.release();
    await d.acquired();
    const state = await callers[1]!.describe('relay');
    expect(state.holders.map((h) => [h.owner, h.weight])).toEqual([
      ['c', 2],
      ['d', 1],
    ]);
    expect(state.usedWeight).toBe(3);
    await c.release();
    await d.release();
  });

  it('keeps the limit and the queue order with clients of both instances taking random weights', async () => {
    const limit = 4;
    const holds: Array<{ weight: number; token: bigint; start: number; end: number }> = [];
    const client = async (id: number): Promise<void> => {
      const random = mulberry32(104_729 * (id + 1));
      for (let round = 0; round < 8; round += 1) {
        const weight = 1 + Math.floor(random() * 3);
        const stream = semaphore(id % 2, 'shared-pool', limit, weight, `client-${id}`);
        const token = await stream.acquired();
        const start = await stream.receipt('acquired');
        await new Promise((resolve) => setImmediate(resolve));
        holds.push({ weight, token, start, end: nextReceipt() });
        expect((await stream.release()).code).toBe(status.OK);
      }
    };
    await Promise.all(Array.from({ length: 8 }, (_, id) => client(id)));
    expect(holds).toHaveLength(64);
    for (const hold of holds) {
      const running = holds.filter((other) => other.start <= hold.start && hold.start < other.end);
      const used = running.reduce((sum, other) => sum + other.weight, 0);
      expect(used, `in use when the hold of token ${hold.token} began`).toBeLessThanOrEqual(limit);
      // An earlier request granted later must have fitted beside what ran when this one began.
      for (const earlier of holds) {
        if (earlier.token < hold.token && earlier.start > hold.start) {
          expect(
            used + earlier.weight,
            `token ${hold.token} overtook token ${earlier.token}`,
          ).toBeLessThanOrEqual(limit);
        }
      }
    }
    const state = await callers[0]!.describe('shared-pool');
    expect([state.holders, state.waiters, state.usedWeight]).toEqual([[], [], 0]);
  });
});
