/**
 * The capacity run: one lockstream server on ZooKeeper holding `held` locks (one per name) for
 * clients over a few connections, with one more request waiting behind each of the first
 * `waiting` of them; the server's RSS idle, with the holders, and with the waiters too; and the
 * U latency (a separate load process, another lock) idle and while all that is held.
 */
import { LockClient, type Lock } from '../dist/client/index.js';
import type { ZooKeeperProcess } from '../test/setup/zookeeper-process.js';
import { residentBytes } from './measure.js';
import { runUncontended, startLockstreamServer } from './processes.js';

export interface CapacityOptions {
  readonly held: number;
  readonly waiting: number;
  /** U cycles measured idle and loaded. */
  readonly cycles: number;
  /** Client connections the holders (and, as many again, the waiters) are spread over. */
  readonly connections: number;
  /**
   * `acquire`: every lock on its own Acquire stream, over `connections` clients for the holders
   * and as many for the waiters. `session`: every lock a request on one LockClient's Session
   * stream.
   */
  readonly rpc: 'acquire' | 'session';
  /** Another checkout's build to run as the server, and its lock tree (see startLockstreamServer). */
  readonly build?: { readonly cli?: string; readonly root?: string };
}

export interface CapacityResult {
  readonly rpc: 'acquire' | 'session';
  readonly held: number;
  readonly waiting: number;
  readonly connections: number;
  readonly rssIdleBytes: number;
  readonly rssHeldBytes: number;
  readonly rssLoadedBytes: number;
  readonly bytesPerHeld: number;
  readonly bytesPerWaiter: number;
  readonly uIdle: { p50: number; p99: number; opsPerSec: number };
  readonly uLoaded: { p50: number; p99: number; opsPerSec: number };
}

const DEFAULTS: CapacityOptions = {
  held: 10_000,
  waiting: 10_000,
  cycles: 2_000,
  connections: 4,
  rpc: 'acquire',
};
/** Requests in flight at once while filling the server, so start-up does not become a stampede. */
const FILL_CONCURRENCY = 500;

export async function runCapacity(
  zookeeper: ZooKeeperProcess,
  overrides: Partial<CapacityOptions> = {},
): Promise<CapacityResult> {
  const options = { ...DEFAULTS, ...overrides };
  const server = await startLockstreamServer(zookeeper.connectString, [], [], options.build);
  const clients = (count: number): LockClient[] =>
    Array.from(
      { length: count },
      () =>
        new LockClient(server.address, {
          streamPerLock: true,
          channelOptions: { 'grpc.use_local_subchannel_pool': 1 },
        }),
    );
  const shared = options.rpc === 'session' ? [new LockClient(server.address)] : undefined;
  const holderClients = shared ?? clients(options.connections);
  const waiterClients = shared ?? clients(options.connections);
  const waitersGone = new AbortController();
  const held: Lock[] = [];
  const waiting: Array<Promise<unknown>> = [];
  try {
    const uIdle = await runUncontended(server.address, 'capacity-idle', options.cycles, options.rpc);
    const rssIdleBytes = await residentBytes(server.pid);
    await inBatches(options.held, async (i) => {
      const client = holderClients[i % holderClients.length];
      if (client) held.push(await client.acquire(`capacity/${i}`));
    });
    const rssHeldBytes = await residentBytes(server.pid);
    await inBatches(options.waiting, (i) => {
      const client = waiterClients[i % waiterClients.length];
      return new Promise<void>((queued, failed) => {
        const request = client?.acquire(`capacity/${i % options.held}`, {
          signal: waitersGone.signal,
          onQueued: () => queued(),
        });
        // Settles only when the run ends and the waiter is withdrawn (or granted, if a holder left).
        waiting.push(request?.catch(() => {}) ?? Promise.resolve());
        request?.then(() => failed(new Error(`waiter ${i} was granted a held lock`)), failed);
      });
    });
    const rssLoadedBytes = await residentBytes(server.pid);
    const uLoaded = await runUncontended(server.address, 'capacity-loaded', options.cycles, options.rpc);
    return {
      rpc: options.rpc,
      held: options.held,
      waiting: options.waiting,
      connections: shared ? 1 : 2 * options.connections,
      rssIdleBytes,
      rssHeldBytes,
      rssLoadedBytes,
      bytesPerHeld: (rssHeldBytes - rssIdleBytes) / options.held,
      bytesPerWaiter: (rssLoadedBytes - rssHeldBytes) / Math.max(1, options.waiting),
      uIdle,
      uLoaded,
    };
  } finally {
    waitersGone.abort();
    await Promise.all(waiting);
    await Promise.all(held.map((lock) => lock.release().catch(() => {})));
    for (const client of new Set([...holderClients, ...waiterClients])) client.close();
    await server.stop();
  }
}

async function inBatches(count: number, task: (i: number) => Promise<void>): Promise<void> {
  for (let start = 0; start < count; start += FILL_CONCURRENCY) {
    const batch = Array.from({ length: Math.min(FILL_CONCURRENCY, count - start) }, (_, j) =>
      task(start + j),
    );
    await Promise.all(batch);
  }
}
