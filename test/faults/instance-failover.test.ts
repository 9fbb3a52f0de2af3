import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import type { Lock } from '../../src/client/index.js';
import { Driver, prepareDrivers, type ClientLanguage } from '../clients/harness.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { faultFixture } from '../support/fault-fixture.js';
import type { ServerProcess } from '../support/server-process.js';
import { scaled } from '../support/timing.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

/*
 * The instance a client talks to dies (SIGKILL), stops (SIGTERM) or pauses (SIGSTOP, then
 * SIGCONT) while the client holds 50 locks and waits for 5 more; three instances share one
 * ZooKeeper. The client (each of the three, through its conformance driver, in its own process)
 * must keep every lock with the same token and every place, never be told `lost`, and nobody
 * else may be granted any of its locks meanwhile: the history of every lock is checked. The
 * paused instance, once continued, must change nothing.
 */

const CLIENTS: readonly ClientLanguage[] = ['typescript', 'go', 'python'];
const FAULTS = ['SIGKILL', 'SIGTERM', 'SIGSTOP'] as const;
type Fault = (typeof FAULTS)[number];
const HELD = 50;
const WAITING = 5;
/** Of the held locks, how many another client queues for (its grants are the history's test). */
const CONTESTED = 5;
/** What an instance logs once ZooKeeper has given it a new session. */
const SESSION_ESTABLISHED = 'ZooKeeper session established';

beforeAll(prepareDrivers, scaled(180_000));

describe.each(CLIENTS)('instance failover, the %s client', (language) => {
  const fixture = faultFixture();
  const { client, later } = fixture;
  const serve = (root: string): Promise<ServerProcess> =>
    fixture.serve(['--zookeeper', connectString, '--root', root]);

  it.each(FAULTS)(
    '%s of its instance: every lock kept with its token, every place kept, nobody else granted, never lost',
    async (fault: Fault) => {
      const root = `/failover-${randomUUID()}`;
      const [victim, second, third] = [await serve(root), await serve(root), await serve(root)];
      const held = Array.from({ length: HELD }, (_, i) => `held-${i}`);
      const wanted = Array.from({ length: WAITING }, (_, i) => `wanted-${i}`);

      // Another client, on the second instance, holds what the driver will wait for.
      const owner = client(second.address);
      const owned: Lock[] = [];
      for (const name of wanted) owned.push(await owner.acquire(name));

      // The client under test: the victim is its first endpoint.
      const driver = await Driver.start(language, [victim.address, second.address, third.address]);
      later(() => driver.stop());
      for (const name of held) driver.send({ op: 'acquire', id: name, name });
      const tokens = new Map<string, string>();
      for (const name of held) tokens.set(name, await driver.acquired(name));
      for (const name of wanted) driver.send({ op: 'acquire', id: name, name });
      for (const name of wanted) {
        await driver.next((o) => o.event === 'queued' && o.id === name, `${name} queued`);
      }

      // A third client, on the third instance, queues for some of the held locks: the history.
      const rival = client(third.address);
      const rivalGrants = new Map<string, { token: bigint; at: number }>();
      const rivalLocks = held.slice(0, CONTESTED).map((name) =>
        rival.acquire(name).then((lock) => {
          rivalGrants.set(name, { token: lock.token, at: performance.now() });
          return lock;
        }),
      );
      await expect
        .poll(async () => (await rival.describe(held[0]!)).waiters.length, { timeout: scaled(10_000) })
        .toBe(1);

      const from = driver.observations.length;
      const firstSession = await victim.logged((line) => line['msg'] === SESSION_ESTABLISHED);
      if (fault === 'SIGSTOP') {
        process.kill(victim.pid, 'SIGSTOP');
        // The client notices the silence, and resumes elsewhere: every held lock confirmed again.
        for (const name of held) {
          await driver.next((o) => o.event === 'confirmed' && o.id === name, `${name} confirmed`, from);
        }
        process.kill(victim.pid, 'SIGCONT');
        // Awake, the old instance must change nothing. Whatever it notices first (the takeover,
        // or its own silence), it lets its ZooKeeper session go before it opens a new one, and
        // all it held was in the old one: once it logs the new session, nothing it does can
        // change a lock of the client's any more (a write for the old session is refused).
        await victim.logged(
          (line) => line['msg'] === SESSION_ESTABLISHED && line['session'] !== firstSession['session'],
        );
      } else {
        await victim.kill(fault);
        for (const name of held) {
          await driver.next((o) => o.event === 'confirmed' && o.id === name, `${name} confirmed`, from);
        }
      }

      // Every held lock is still the client's, with its token, as any instance sees it.
      for (const name of held) {
        const description = await rival.describe(name);
        expect(
          description.holders.map((holder) => holder.token.toString()),
          name,
        ).toEqual([tokens.get(name)]);
      }
      expect(rivalGrants.size, 'nobody else was granted a held lock').toBe(0);
      // Every place kept: released by their owner, the wanted locks go to the client.
      for (const lock of owned) await lock.release();
      for (const name of wanted) await driver.acquired(name);

      // The client lets its contested locks go; only then does the rival get them.
      const releasedAt = performance.now();
      for (const name of held.slice(0, CONTESTED)) {
        expect((await driver.release(name)).event, driver.transcript(name)).toBe('released');
      }
      for (const lock of await Promise.all(rivalLocks)) await lock.release();
      for (const name of held.slice(0, CONTESTED)) {
        const grant = rivalGrants.get(name)!;
        expect(grant.at).toBeGreaterThan(releasedAt);
        expect(grant.token).toBeGreaterThan(BigInt(tokens.get(name)!));
      }
      // Never lost, never granted twice, in doubt at most while it moved.
      for (const name of held) {
        const events = driver.eventsOf(name);
        expect(
          events.filter((event) => event === 'acquired'),
          driver.transcript(name),
        ).toHaveLength(1);
        expect(events, driver.transcript(name)).not.toContain('lost');
        expect(events, driver.transcript(name)).not.toContain('error');
      }
      for (const name of held.slice(CONTESTED)) {
        expect((await driver.release(name)).event, driver.transcript(name)).toBe('released');
      }
      for (const name of wanted) expect((await driver.release(name)).event).toBe('released');
    },
    scaled(120_000),
  );
});
