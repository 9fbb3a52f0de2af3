import { pino } from 'pino';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { LockClient, LockTimeoutError } from '../../src/client/index.js';
import { loadConfig } from '../../src/server/config.js';
import { startServer, type RunningServer } from '../../src/server/main.js';
import { ElectionCaller } from '../support/election-caller.js';
import { deferred } from '../support/lock-caller.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { scaled } from '../support/timing.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

/** The value of one sample in Prometheus text format, or undefined when it is absent. */
function sample(text: string, name: string, labels = ''): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe.each([
  ['memory', (): string[] => []],
  ['zookeeper', (): string[] => ['--zookeeper', connectString, '--root', `/metrics-${randomUUID()}`]],
])('Prometheus metrics on --http-port (%s back end)', (backend, backendArgs) => {
  let server: RunningServer;
  let client: LockClient;
  const metrics = async (): Promise<string> => {
    const response = await fetch(`http://127.0.0.1:${server.httpPort}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
    return response.text();
  };

  beforeAll(async () => {
    server = await startServer(
      loadConfig({}, ['--port', '0', '--http-port', '0', ...backendArgs()]),
      pino({ level: 'silent' }),
    );
    client = new LockClient(`127.0.0.1:${server.port}`);
  });

  afterAll(async () => {
    client.close();
    await server.stop();
  });

  it('counts requests by mode and outcome, times waits and holds, and gauges holders, waiters and streams', async () => {
    const writer = await client.acquire('metered', { mode: 'write' });
    const queued = deferred();
    const reader = client.acquire('metered', { mode: 'read', onQueued: () => queued.resolve() });
    await queued.promise;
    await expect(client.acquire('metered', { waitTimeout: 1 })).rejects.toBeInstanceOf(LockTimeoutError);

    const during = await metrics();
    expect(sample(during, 'lockstream_holders', '{mode="write"}')).toBe(1);
    expect(sample(during, 'lockstream_waiters', '{mode="read"}')).toBe(1);
    // The SDK's locks share one Session stream.
    expect(sample(during, 'lockstream_session_streams')).toBe(1);
    expect(sample(during, 'lockstream_acquire_streams')).toBe(0);
    expect(sample(during, 'lockstream_acquire_requests_total', '{mode="write",outcome="granted"}')).toBe(1);
    expect(sample(during, 'lockstream_acquire_requests_total', '{mode="mutex",outcome="timed_out"}')).toBe(1);
    expect(sample(during, 'lockstream_store_session_confirmed', `{backend="${backend}"}`)).toBe(1);

    await writer.release();
    await (await reader).release();
    await server.whenIdle();
    const after = await metrics();
    expect(sample(after, 'lockstream_holders', '{mode="write"}')).toBe(0);
    expect(sample(after, 'lockstream_waiters', '{mode="read"}')).toBe(0);
    client.close();
    await server.whenIdle();
    expect(sample(await metrics(), 'lockstream_session_streams')).toBe(0);
    expect(sample(after, 'lockstream_holds_total', '{mode="write",outcome="released"}')).toBe(1);
    expect(sample(after, 'lockstream_holds_total', '{mode="read",outcome="released"}')).toBe(1);
    expect(sample(after, 'lockstream_wait_seconds_count', '{mode="read"}')).toBe(1);
    expect(sample(after, 'lockstream_hold_seconds_count', '{mode="write"}')).toBe(1);
    // Each ZooKeeper request is timed (the three locks' creates); the memory store sends none.
    expect(
      sample(after, 'lockstream_store_operation_seconds_count', '{operation="create",result="ok"}'),
    ).toBe(backend === 'zookeeper' ? 3 : undefined);
    // Process metrics come with them.
    expect(sample(after, 'lockstream_process_resident_memory_bytes')).toBeGreaterThan(0);
  });

  it('counts guarded record writes by outcome: written, refused to a late writer, at another revision', async ({
    onTestFinished,
  }) => {
    const name = `metered-records-${backend}`;
    const client = new LockClient(`127.0.0.1:${server.port}`);
    onTestFinished(() => client.close());
    const first = await client.acquire(name);
    const records = client.records(name, first.token);
    await records.put('k', 'a');
    await first.release();
    await records.put('k', 'late').catch(() => {});
    const next = await client.acquire(name);
    await client
      .records(name, next.token)
      .put('k', 'b', { expectedRevision: 7n })
      .catch(() => {});
    await client.records(name, next.token).delete('k');
    await next.release();
    const text = await metrics();
    const writes = (op: string, outcome: string): number | undefined =>
      sample(text, 'lockstream_record_writes_total', `{op="${op}",outcome="${outcome}"}`);
    expect({
      written: writes('put', 'written'),
      late: writes('put', 'not_holder'),
      conflict: writes('put', 'conflict'),
      deleted: writes('delete', 'written'),
    }).toEqual({ written: 1, late: 1, conflict: 1, deleted: 1 });
  });

  it('gauges Acquire streams apart from Session streams', async () => {
    const perLock = new LockClient(`127.0.0.1:${server.port}`, { streamPerLock: true });
    const held = await perLock.acquire('metered-per-lock');
    const during = await metrics();
    expect(sample(during, 'lockstream_acquire_streams')).toBe(1);
    expect(sample(during, 'lockstream_session_streams')).toBe(0);
    await held.release();
    perLock.close();
    await server.whenIdle();
    expect(sample(await metrics(), 'lockstream_acquire_streams')).toBe(0);
  });

  it('counts sessions detached, resumed, and expired when their grace passes', async () => {
    const counted = async (event: string): Promise<number> =>
      sample(await metrics(), 'lockstream_session_events_total', `{event="${event}",rpc="session"}`) ?? 0;
    const before = { detached: await counted('detached'), resumed: await counted('resumed') };
    const expiredBefore = await counted('expired');
    // The page's overview counts the same events, for every RPC.
    const onPage = async (): Promise<Record<string, number>> =>
      (
        (await (await fetch(`http://127.0.0.1:${server.httpPort}/api/locks`)).json()) as {
          sessions: Record<string, number>;
        }
      ).sessions;
    const pageBefore = await onPage();
    const proxy = await TcpProxy.start(`127.0.0.1:${server.port}`);
    const resuming = new LockClient(proxy.address, { resumeGraceMs: 1_000 });
    try {
      const confirmed = deferred();
      const lock = await resuming.acquire('metered-resume', { onConfirmed: () => confirmed.resolve() });
      proxy.severAll();
      await confirmed.promise;
      expect(await counted('detached')).toBe(before.detached + 1);
      expect(await counted('resumed')).toBe(before.resumed + 1);
      expect(await counted('expired')).toBe(expiredBefore);
      // Cut for good: the server keeps the session for its grace, then ends it.
      const lost = deferred();
      lock.lost.addEventListener('abort', () => lost.resolve(), { once: true });
      await proxy.close();
      await lost.promise;
      await expect.poll(() => counted('expired'), { timeout: scaled(10_000) }).toBe(expiredBefore + 1);
      expect(await counted('detached')).toBe(before.detached + 2);
      expect(await onPage()).toEqual({
        ...pageBefore,
        detached: pageBefore['detached']! + 2,
        resumed: pageBefore['resumed']! + 1,
        expired: pageBefore['expired']! + 1,
      });
    } finally {
      resuming.close();
      await proxy.close();
    }
  });

  it('counts election terms this instance recorded, and times each handover', async () => {
    const elections = new ElectionCaller(`127.0.0.1:${server.port}`);
    try {
      const name = `metered-election-${randomUUID()}`;
      const before = await metrics();
      const first = elections.campaign({ name });
      await first.elected();
      const second = elections.campaign({ name });
      await second.next();
      first.resign();
      await second.elected();
      second.resign();
      await Promise.all([first.outcome, second.outcome]);
      const after = await metrics();
      const delta = (text: string, name: string): number =>
        (sample(after, name) ?? 0) - (sample(text, name) ?? 0);
      expect(delta(before, 'lockstream_election_terms_total')).toBe(2);
      expect(delta(before, 'lockstream_election_handover_seconds_count')).toBe(2);
      expect(sample(after, 'lockstream_holds_total', '{mode="candidate",outcome="released"}')).toBe(2);
    } finally {
      elections.close();
    }
  });

  it('answers 404 elsewhere and 405 to anything but GET', async () => {
    expect((await fetch(`http://127.0.0.1:${server.httpPort}/nope`)).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${server.httpPort}/metrics`, { method: 'POST' })).status).toBe(405);
  });
});
