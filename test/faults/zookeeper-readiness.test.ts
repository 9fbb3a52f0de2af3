import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { healthOf, untilHealth } from '../support/health.js';
import { httpPortOf, probe } from '../support/probes.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { startServerProcess } from '../support/server-process.js';
import { TcpProxyProcess } from '../support/tcp-proxy-process.js';
import { scaled } from '../support/timing.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));
const SESSION_TIMEOUT_MS = 3_000;

/**
 * A server reaches ZooKeeper through a proxy that can freeze the link (nothing passes, nothing
 * is closed): the instance must say it is not ready while it cannot vouch for its session, and
 * ready again once it can, without being thought dead meanwhile.
 */
describe('/readyz while ZooKeeper is out of reach', () => {
  const cleanups: Array<() => Promise<unknown> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('is 503 naming ZooKeeper while the link is frozen, with gRPC health NOT_SERVING and /livez 200, and 200 again after', async () => {
    const proxy = await TcpProxyProcess.start(connectString);
    cleanups.push(() => proxy.close());
    const server = await startServerProcess([
      '--zookeeper',
      proxy.address,
      '--root',
      `/readiness-${randomUUID()}`,
      '--session-timeout',
      `${SESSION_TIMEOUT_MS}ms`,
      '--http-port',
      '0',
    ]);
    cleanups.push(() => server.kill('SIGTERM'));
    const port = await httpPortOf(server);
    expect((await probe(port, '/readyz')).status).toBe(200);

    await proxy.freeze();
    // The instance's own word that it turned: from then on it stays so while the link is frozen.
    await server.logged((line) => line['msg'] === 'not ready');
    expect(await probe(port, '/readyz')).toEqual({
      status: 503,
      body: {
        ready: false,
        reasons: [
          'zookeeper: session not confirmed (disconnected, or not heard from lately); no lock is granted until it is',
        ],
      },
      receipt: expect.any(Number),
    });
    expect(await healthOf(server.address)).toBe('NOT_SERVING');
    expect((await probe(port, '/livez')).status).toBe(200);
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(metrics).toMatch(/^lockstream_ready 0$/m);

    await proxy.thaw();
    // The session (or, past its timeout, the next one) is vouched for again; it may pass
    // through doubt on the way, which Watch follows to the end.
    await untilHealth(server.address, 'SERVING');
    await expect
      .poll(async () => (await probe(port, '/readyz')).body, { timeout: scaled(10_000) })
      .toEqual({ ready: true, reasons: [] });
    await server.logged((line) => line['msg'] === 'ready: calls are welcome again');
  });
});
