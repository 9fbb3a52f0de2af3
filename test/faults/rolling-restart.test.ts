import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { LockClient, type Lock } from '../../src/client/index.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { scaled } from '../support/timing.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

/*
 * A deploy: three instances on one ZooKeeper are restarted one after the other (SIGTERM, then
 * a new process on the same port) while clients, each knowing all three, keep taking, holding
 * and releasing locks, and some hold theirs throughout. No lock may be lost, no two holders of
 * one lock may overlap, and the long holders keep their tokens.
 */

const NAMES = 4;
const CLIENTS = 3;
/** Cycles each client must complete with every instance up again before the next restart. */
const CYCLES_BETWEEN = 5;

interface Grant {
  readonly name: string;
  readonly token: bigint;
  readonly grantedAt: number;
  releasedAt?: number;
}

describe('a rolling restart of every instance', () => {
  const cleanups: Array<() => Promise<unknown> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function serve(root: string, port = 0): Promise<ServerProcess> {
    const server = await startServerProcess([
      '--zookeeper',
      connectString,
      '--root',
      root,
      '--port',
      String(port),
    ]);
    cleanups.push(async () => {
      if (server.exitCode() === null) await server.kill('SIGKILL');
    });
    return server;
  }

  it(
    'under a steady lock workload loses no lock, overlaps no holders and keeps long holders their tokens',
    async () => {
      const root = `/rolling-${randomUUID()}`;
      const instances = [await serve(root), await serve(root), await serve(root)];
      const addresses = instances.map((instance) => instance.address);
      const ports = addresses.map((address) => Number(address.split(':')[1]));
      // Each client starts on another instance.
      const clients = Array.from({ length: CLIENTS }, (_, i) => {
        const client = new LockClient([...addresses.slice(i), ...addresses.slice(0, i)]);
        cleanups.push(() => client.close());
        return client;
      });

      const longHeld: Lock[] = [];
      for (const [i, client] of clients.entries()) longHeld.push(await client.acquire(`long-${i}`));
      const longTokens = longHeld.map((lock) => lock.token);

      const grants: Grant[] = [];
      const losses: string[] = [];
      const cycles = clients.map(() => 0);
      let running = true;
      const workloads = clients.map(async (client, i) => {
        while (running) {
          const name = `shared-${(i + cycles[i]!) % NAMES}`;
          const lock = await client.acquire(name);
          lock.lost.addEventListener('abort', () => losses.push(`${name} ${lock.token}`), { once: true });
          const grant: Grant = { name, token: lock.token, grantedAt: performance.now() };
          grants.push(grant);
          await new Promise((resolve) => setTimeout(resolve, 20));
          grant.releasedAt = performance.now();
          await lock.release();
          cycles[i]! += 1;
        }
      });
      // Every instance that ran, for the failure message: what each said at info level and above.
      const all: ServerProcess[] = [...instances];
      const transcript = (): string =>
        all
          .flatMap((server, i) =>
            server.logs
              .filter((line) => Number(line['level']) >= 30 && line['msg'] !== 'granted')
              .map((line) => `${i} ${JSON.stringify(line).slice(0, 400)}`),
          )
          .join('\n');
      const progress = async (): Promise<void> => {
        const target = cycles.map((count) => count + CYCLES_BETWEEN);
        await expect
          .poll(() => cycles.every((count, i) => count >= target[i]!), {
            timeout: scaled(30_000),
            interval: 50,
          })
          .toBe(true)
          .catch((error: unknown) => {
            throw new Error(
              `no progress: cycles ${cycles.join(', ')}, losses ${losses.join(', ')}\n${transcript()}`,
              {
                cause: error,
              },
            );
          });
      };

      await progress();
      for (const [i, instance] of instances.entries()) {
        await instance.kill('SIGTERM');
        instances[i] = await serve(root, ports[i]);
        all.push(instances[i]);
        await progress();
      }
      running = false;
      await Promise.all(workloads);

      expect(losses, 'locks lost').toEqual([]);
      for (const [i, lock] of longHeld.entries()) {
        expect(lock.lost.aborted).toBe(false);
        const description = await clients[0]!.describe(`long-${i}`);
        expect(description.holders.map((holder) => holder.token)).toEqual([longTokens[i]]);
        await lock.release();
      }
      // Per lock, in grant order: each holder released before the next was granted, tokens grow.
      for (let n = 0; n < NAMES; n += 1) {
        const history = grants
          .filter((grant) => grant.name === `shared-${n}`)
          .sort((a, b) => a.grantedAt - b.grantedAt);
        for (let k = 1; k < history.length; k += 1) {
          const [before, after] = [history[k - 1]!, history[k]!];
          expect(after.grantedAt, `shared-${n}: grant ${k} overlaps the one before`).toBeGreaterThanOrEqual(
            before.releasedAt!,
          );
          expect(after.token).toBeGreaterThan(before.token);
        }
      }
      expect(grants.length).toBeGreaterThan(CLIENTS * CYCLES_BETWEEN * 4);
    },
    scaled(180_000),
  );
});
