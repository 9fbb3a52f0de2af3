import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { describe, expect, inject, it } from 'vitest';
import type { Lock } from '../../src/client/index.js';
import { deferred } from '../support/lock-caller.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { faultFixture } from '../support/fault-fixture.js';
import type { ServerProcess } from '../support/server-process.js';
import { scaled } from '../support/timing.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

/** lockstream's default ZooKeeper session timeout; the store gives a session up at two thirds of it. */
const SESSION_TIMEOUT_MS = 10_000;
/** Past two thirds of the session timeout (the store then gives its session up), short of all of it. */
const PAUSE_MS = 7_500;
const LOCKS = 50;
/**
 * A pause of that length was repeated 22 times when the bug was found; it left the locks held by
 * nobody in about 4 of them (the given-up session's link kept pinging). Three rounds here, every
 * CI run, on top of the store-level test that drives the same path deterministically.
 */
const ROUNDS = 3;

describe('a lockstream instance paused (SIGSTOP) past two thirds of its ZooKeeper session', () => {
  const fixture = faultFixture();
  const { client } = fixture;
  const serve = (root: string): Promise<ServerProcess> =>
    fixture.serve(['--zookeeper', connectString, '--root', root]);

  it.each(Array.from({ length: ROUNDS }, (_, i) => i + 1))(
    'round %i: frees every lock of its client for the waiters on another instance, never before the holder was told it lost them',
    async () => {
      const root = `/paused-instance-${randomUUID()}`;
      const paused = await serve(root);
      const other = await serve(root);
      const holder = client(paused.address);
      const waiter = client(other.address);
      const names = Array.from({ length: LOCKS }, (_, i) => `paused-${i}`);

      // History: when the holder was told each lock was lost, and when the waiter was granted it.
      const lostAt = new Map<string, number>();
      const held: Lock[] = [];
      for (const name of names) {
        const lock = await holder.acquire(name);
        lock.lost.addEventListener('abort', () => lostAt.set(name, performance.now()), { once: true });
        held.push(lock);
      }
      const queued = names.map(() => deferred<number>());
      const grants = names.map((name, i) =>
        waiter
          .acquire(name, { onQueued: queued[i]!.resolve })
          .then((lock) => ({ lock, at: performance.now() })),
      );
      await Promise.all(queued.map((q) => q.promise));

      process.kill(paused.pid, 'SIGSTOP');
      const pausedAt = performance.now();
      await delay(PAUSE_MS);
      process.kill(paused.pid, 'SIGCONT');

      const granted = await Promise.all(grants);
      const lastGrantMs = Math.max(...granted.map((g) => g.at)) - pausedAt;
      for (const [i, { lock, at }] of granted.entries()) {
        const name = names[i]!;
        expect(lock.token).toBeGreaterThan(held[i]!.token);
        // Never held by two: the old holder heard of its loss before anyone else was granted it.
        expect(lostAt.get(name), `the holder of ${name} was never told it was lost`).toBeDefined();
        expect(lostAt.get(name)!).toBeLessThan(at);
      }
      // Freed once the instance woke and gave its session up (or ZooKeeper expired it), not never.
      expect(lastGrantMs).toBeLessThan(PAUSE_MS + SESSION_TIMEOUT_MS);
      console.info(
        `paused instance: ${LOCKS} locks granted elsewhere ${Math.round(lastGrantMs)} ms after a ${PAUSE_MS} ms pause`,
      );
      await Promise.all(granted.map(({ lock }) => lock.release()));
    },
    scaled(60_000),
  );
});
