import { randomUUID } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { healthOf } from '../support/health.js';
import { deferred, LockCaller, seconds } from '../support/lock-caller.js';
import { httpPortOf, probe, probeUntil, type ProbeAnswer } from '../support/probes.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { scaled } from '../support/timing.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

const STORES = ['memory', 'zookeeper'] as const;

/** How a SIGTERM ends a held stream on each store: released at once, or handed over for a resume. */
const STOPPED_STREAM = {
  memory: /the lockstream server is shutting down/,
  zookeeper: /the session moved to another lockstream instance: resume it, on any instance/,
} as const;

describe('the HTTP probes /livez and /readyz', () => {
  const cleanups: Array<() => Promise<unknown> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function serve(store: (typeof STORES)[number], extra: string[] = []): Promise<ServerProcess> {
    const storeArgs =
      store === 'zookeeper' ? ['--zookeeper', connectString, '--root', `/probes-${randomUUID()}`] : [];
    const server = await startServerProcess([...storeArgs, '--http-port', '0', ...extra]);
    cleanups.push(() => (server.exitCode() === null ? server.kill('SIGKILL') : undefined));
    return server;
  }

  function caller(server: ServerProcess): LockCaller {
    const lockCaller = new LockCaller(server.address);
    cleanups.push(() => lockCaller.close());
    return lockCaller;
  }

  describe.each(STORES)('on the %s store', (store) => {
    it('answers /livez 200 saying what it checked, and /readyz 200 with no reasons, as gRPC health says SERVING', async () => {
      const server = await serve(store);
      const port = await httpPortOf(server);

      const live = await probe(port, '/livez');
      expect(live).toMatchObject({
        status: 200,
        body: {
          live: true,
          checked: 'the event loop that serves the locks answered this request',
          eventLoopLagMs: expect.any(Number),
          uptimeSeconds: expect.any(Number),
        },
      });
      expect(await probe(port, '/readyz')).toMatchObject({ status: 200, body: { ready: true, reasons: [] } });
      expect(await healthOf(server.address)).toBe('SERVING');
      const head = await fetch(`http://127.0.0.1:${port}/readyz`, { method: 'HEAD' });
      expect(head.status).toBe(200);
      expect(await head.text()).toBe('');
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(metrics).toMatch(/^lockstream_ready 1$/m);
      expect(await server.kill('SIGTERM')).toBe(0);
    });

    it('turns /readyz 503 (draining) on SIGTERM before it ends any stream, and serves on for --drain-delay while /livez stays 200', async () => {
      const server = await serve(store, ['--drain-delay', `${scaled(1_000)}ms`]);
      const port = await httpPortOf(server);
      const locks = caller(server);
      // Resumable on ZooKeeper, so that the stop hands it over; its grace is what the stopping
      // instance then waits for a taker.
      const resumable = store === 'zookeeper' ? { resumeGrace: seconds(1) } : {};
      const holder = locks.open({ name: 'drained', ...resumable });
      await holder.acquired();
      expect((await probe(port, '/readyz')).status).toBe(200);

      const stopPolling = new AbortController();
      const draining = deferred<ProbeAnswer>();
      const polling = probeUntil(port, '/readyz', stopPolling.signal, (answer) => {
        if (answer.status === 503) draining.resolve(answer);
      });
      const exited = server.kill('SIGTERM');
      const notReady = await draining.promise;
      expect(notReady.body).toEqual({ ready: false, reasons: ['draining: the instance is stopping'] });
      // Not ready, but still serving: gRPC health agrees, the process is live, and a new
      // request is granted.
      expect(await healthOf(server.address)).toBe('NOT_SERVING');
      expect(await probe(port, '/livez')).toMatchObject({ status: 200, body: { live: true } });
      const latecomer = locks.open({ name: 'during-the-drain', ...resumable });
      await latecomer.acquired();

      const ended = await holder.outcome;
      expect(ended).toMatchObject({
        code: status.UNAVAILABLE,
        details: expect.stringMatching(STOPPED_STREAM[store]),
      });
      expect((await latecomer.outcome).code).toBe(status.UNAVAILABLE);
      expect(await exited).toBe(0);
      stopPolling.abort();
      const answers = await polling;
      // Not ready before the held stream was ended (handed over, or released), and never ready again.
      expect(notReady.receipt).toBeLessThan(await holder.outcomeReceipt());
      const from = answers.indexOf(notReady);
      expect(answers.slice(0, from).every((answer) => answer.status === 200)).toBe(true);
      expect(answers.slice(from).every((answer) => answer.status === 503)).toBe(true);
      const logged = server.logs.map((line) => line['msg']);
      expect(logged.indexOf('not ready')).toBeLessThan(logged.indexOf('shutting down'));
    });
  });
});
