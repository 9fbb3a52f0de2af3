import { randomUUID } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import { Status, type Lock, type LockClient } from '../../src/client/index.js';
import { deferred } from '../support/lock-caller.js';
import { LockHistory } from '../support/lock-history.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { faultFixture } from '../support/fault-fixture.js';
import type { ServerProcess } from '../support/server-process.js';
import { TcpProxyProcess } from '../support/tcp-proxy-process.js';
import { scaled } from '../support/timing.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));
const SESSION_TIMEOUT_MS = 3_000;
/** The resume grace the SDK asks for by default. */
const SDK_RESUME_GRACE_MS = 5_000;

/** How soon the README promises a vanished client's lock is free, with the defaults. */
const DEAD_CLIENT_BOUND_MS = 15_000;

describe('processes that die', () => {
  const fixture = faultFixture();
  const { client, later } = fixture;
  const serve = (root: string, extra: string[] = []): Promise<ServerProcess> =>
    fixture.serve([
      '--zookeeper',
      connectString,
      '--root',
      root,
      '--session-timeout',
      `${SESSION_TIMEOUT_MS}ms`,
      ...extra,
    ]);

  /** Queues one request per lock name and resolves once all are queued, with their pending grants. */
  async function queueFor(locks: LockClient, names: string[]): Promise<Array<Promise<Lock>>> {
    const pending = names.map((name) => {
      const queued = deferred<number>();
      return { queued: queued.promise, lock: locks.acquire(name, { onQueued: queued.resolve }) };
    });
    expect(await Promise.all(pending.map((p) => p.queued))).toEqual(names.map(() => 1));
    return pending.map((p) => p.lock);
  }

  it(
    'a client host that vanishes without closing its connection has its lock freed by server keepalive (defaults)',
    async () => {
      const root = `/dead-client-${randomUUID()}`;
      const server = await serve(root);
      const proxy = await TcpProxyProcess.start(server.address);
      later(() => proxy.close());
      // The doomed client does not ping (its own keepalive would only notice from its side).
      const doomed = client(proxy.address);
      const survivor = client(server.address);
      const holder = await doomed.acquire('vanishing-client');
      const queued = deferred<number>();
      const next = survivor.acquire('vanishing-client', { onQueued: queued.resolve });
      await queued.promise;

      await proxy.freeze();
      const frozenAt = performance.now();
      const lock = await next;
      const releasedAfterMs = performance.now() - frozenAt;
      expect(lock.token).toBeGreaterThan(holder.token);
      console.info(
        `dead client (no TCP reset): its lock went to the next waiter ${Math.round(releasedAfterMs)} ms after its link froze ` +
          '(server keepalive 3 s + 3 s, then the 5 s resume grace the SDK asks for)',
      );
      // The bound the README documents: 3-6 s to notice, 5 s grace, 4 s to spare.
      expect(releasedAfterMs).toBeLessThan(DEAD_CLIENT_BOUND_MS);
      await lock.release();
    },
    scaled(40_000),
  );

  it('a lockstream server killed with SIGKILL holding many locks frees them all when its session expires; waiters elsewhere get them in order', async () => {
    const root = `/kill9-${randomUUID()}`;
    const doomedServer = await serve(root);
    const survivorServer = await serve(root);
    const doomed = client(doomedServer.address);
    const survivors = [client(survivorServer.address), client(survivorServer.address)];
    const names = Array.from({ length: 40 }, (_, i) => `kill9/${i}`);
    const held = await Promise.all(names.map((name) => doomed.acquire(name)));
    // Two waiters per lock on the other server: first and second in each queue.
    const firsts = await queueFor(survivors[0]!, names);
    const seconds = names.map((name) => survivors[1]!.acquire(name));
    const history = new LockHistory();

    await doomedServer.kill('SIGKILL');
    const killedAt = performance.now();
    const granted = await Promise.all(firsts);
    const allFreedAfterMs = performance.now() - killedAt;
    for (const [i, lock] of granted.entries()) {
      history.held(`first@${i}`, lock);
      expect(lock.token).toBeGreaterThan(held[i]!.token);
    }
    await Promise.all(granted.map((lock) => history.release(lock)));
    for (const [i, lock] of (await Promise.all(seconds)).entries()) {
      history.held(`second@${i}`, lock);
      expect(lock.token).toBeGreaterThan(granted[i]!.token);
      await history.release(lock);
    }
    history.verify();
    console.info(
      `kill -9: ${names.length} locks passed to the next waiters on another server within ${Math.round(allFreedAfterMs)} ms ` +
        `(session timeout ${SESSION_TIMEOUT_MS} ms)`,
    );
  });

  it('a lockstream server stopped with SIGTERM and --on-stop release ends its streams with UNAVAILABLE and frees its locks at once', async () => {
    const root = `/sigterm-${randomUUID()}`;
    // A minute-long session: had the server left it to expire, the waiters would wait that long
    // (and the test time out); closing it frees the locks at once.
    const stopping = await serve(root, [
      '--shutdown-grace',
      '2s',
      '--session-timeout',
      '60s',
      '--on-stop',
      'release',
    ]);
    const survivorServer = await serve(root);
    const leaving = client(stopping.address);
    const names = Array.from({ length: 20 }, (_, i) => `sigterm/${i}`);
    const held = await Promise.all(names.map((name) => leaving.acquire(name)));
    const lost = held.map(
      (lock) =>
        new Promise<unknown>((resolve) =>
          lock.lost.addEventListener('abort', () => resolve(lock.lost.reason)),
        ),
    );
    const waiting = await queueFor(client(survivorServer.address), names);

    const termAt = performance.now();
    expect(await stopping.kill('SIGTERM')).toBe(0);
    const exitedAfterMs = performance.now() - termAt;
    const granted = await Promise.all(waiting);
    const freedAfterMs = performance.now() - termAt;
    // The server said the locks are gone: the SDK reports them lost at once, without trying to resume.
    for (const reason of await Promise.all(lost)) {
      expect(reason).toMatchObject({
        code: Status.UNAVAILABLE,
        message: expect.stringMatching(/shutting down/),
      });
    }
    const lostAfterMs = performance.now() - termAt;
    for (const lock of granted) await lock.release();
    console.info(
      `SIGTERM: exited after ${Math.round(exitedAfterMs)} ms, ${names.length} locks passed on after ${Math.round(freedAfterMs)} ms, holders told after ${Math.round(lostAfterMs)} ms`,
    );
  });

  it('a lockstream server stopped with SIGTERM (hand-over) whose clients resume nowhere frees their locks when their grace passes, not sooner though its ZooKeeper session timeout is shorter, and never before they were told', async () => {
    const root = `/sigterm-handover-${randomUUID()}`;
    const stopping = await serve(root);
    const survivorServer = await serve(root);
    // One endpoint only: nowhere to resume.
    const leaving = client(stopping.address);
    const names = Array.from({ length: 20 }, (_, i) => `handover/${i}`);
    const held = await Promise.all(names.map((name) => leaving.acquire(name)));
    const lostAt = held.map(
      (lock) =>
        new Promise<number>((resolve) =>
          lock.lost.addEventListener('abort', () => resolve(performance.now()), { once: true }),
        ),
    );
    const grantedAt: number[] = [];
    const waiting = (await queueFor(client(survivorServer.address), names)).map((grant) =>
      grant.then((lock) => {
        grantedAt.push(performance.now());
        return lock;
      }),
    );

    const termAt = performance.now();
    expect(await stopping.kill('SIGTERM')).toBe(0);
    const granted = await Promise.all(waiting);
    const told = await Promise.all(lostAt);
    expect(Math.max(...told)).toBeLessThan(Math.min(...grantedAt));
    // Left for a taker for the SDK's resume grace, longer than the session timeout here.
    expect(SDK_RESUME_GRACE_MS).toBeGreaterThan(SESSION_TIMEOUT_MS);
    expect(Math.min(...grantedAt) - termAt).toBeGreaterThanOrEqual(SDK_RESUME_GRACE_MS);
    for (const lock of granted) await lock.release();
    console.info(
      `SIGTERM, hand-over, nobody resumes: ${names.length} locks passed on after ${Math.round(Math.min(...grantedAt) - termAt)}–${Math.round(Math.max(...grantedAt) - termAt)} ms (SDK grace ${SDK_RESUME_GRACE_MS} ms), holders told after ${Math.round(Math.max(...told) - termAt)} ms`,
    );
  });
});
