import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, it, type TestContext } from 'vitest';
import { LockClient } from '../../src/client/index.js';
import { deferred } from '../support/lock-caller.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { Driver, prepareDrivers, type ClientLanguage, type Received } from './harness.js';
import { scaled } from '../support/timing.js';

/**
 * The client conformance suite: the promises every lockstream client keeps, written once and
 * run against the TypeScript SDK, the Go client and the Python client through their drivers
 * (README.md beside this file). Each client talks to a lockstream server in its own process
 * (the memory back end: these are the client's promises); a second client, when a scenario
 * needs one, is the TypeScript SDK in this process, connected directly.
 */

const CLIENTS: readonly ClientLanguage[] = ['typescript', 'go', 'python'];

beforeAll(prepareDrivers, scaled(180_000));

/** The events that say whether a held lock is still vouched for, in the order reported. */
function doubtAndLoss(driver: Driver, id: string): string[] {
  return driver.eventsOf(id).filter((event) => ['in-doubt', 'confirmed', 'lost'].includes(event));
}

/** What a failure observation says, for comparing with the expected kind. */
function failureOf(observation: Received): { event: string; kind?: string } {
  return 'kind' in observation
    ? { event: observation.event, kind: observation.kind }
    : { event: observation.event };
}

describe.concurrent.each(CLIENTS)('the %s client', (language) => {
  let server: ServerProcess;
  /** The second client: the TypeScript SDK, straight to the server. */
  let other: LockClient;

  beforeAll(async () => {
    server = await startServerProcess([]);
    other = new LockClient(server.address);
  }, scaled(60_000));

  afterAll(async () => {
    other?.close();
    await server?.kill('SIGTERM');
  });

  function lockName(scenario: string): string {
    return `conformance/${language}/${scenario}/${randomUUID()}`;
  }

  async function driverFor(
    address: string | readonly string[],
    onTestFinished: TestContext['onTestFinished'],
  ): Promise<Driver> {
    const driver = await Driver.start(language, address);
    onTestFinished(() => driver.stop());
    return driver;
  }

  it(
    'partition: a holder behind a frozen network is in doubt, then lost, before the server grants its lock to another client (default options)',
    async ({ expect, onTestFinished }) => {
      const proxy = await TcpProxy.start(server.address);
      onTestFinished(() => proxy.close());
      const driver = await driverFor(proxy.address, onTestFinished);
      const name = lockName('partition');
      driver.send({ op: 'acquire', id: 'held', name });
      const token = BigInt(await driver.acquired('held'));
      const queued = deferred<number>();
      const next = other.acquire(name, { onQueued: queued.resolve });
      expect(await queued.promise).toBe(1);

      // No byte passes either way and no socket closes: only the client's own checks can tell.
      proxy.freeze();
      const lost = await driver.next((o) => o.event === 'lost' && o.id === 'held', 'the loss of held');
      const granted = await next;
      onTestFinished(() => granted.release());
      expect(granted.token).toBeGreaterThan(token);
      // One clock: the driver stamps `at` from the host's wall clock when its client reports the
      // loss; the server stamps its log line from the same clock in the same synchronous step as
      // the grant. So `lost.at` is no earlier than the loss and the log's `time` is the grant, both
      // to the millisecond, whatever the pipes and the event loops delay (unless the host's clock
      // is stepped during the test).
      const grant = await server.logged(
        (line) =>
          line['msg'] === 'granted' && line['lock'] === name && line['token'] === String(granted.token),
      );
      const lostBeforeGrantMs = (grant['time'] as number) - lost.at;
      expect(
        {
          told: doubtAndLoss(driver, 'held'),
          lostKind: lost.event === 'lost' && lost.kind,
          lostBeforeGrantMs,
        },
        driver.transcript('held'),
      ).toEqual({ told: ['in-doubt', 'lost'], lostKind: 'lost', lostBeforeGrantMs: expect.any(Number) });
      expect(
        lostBeforeGrantMs,
        `lost ${-lostBeforeGrantMs} ms after the grant:\n${driver.transcript('held')}`,
      ).toBeGreaterThan(0);
    },
    scaled(60_000),
  );

  it(
    'server killed: a holder whose server is killed (SIGKILL) is in doubt, then lost with UNAVAILABLE, never still held',
    async ({ expect, onTestFinished }) => {
      const doomed = await startServerProcess([]);
      onTestFinished(async () => {
        await doomed.kill('SIGKILL');
      });
      const driver = await driverFor(doomed.address, onTestFinished);
      driver.send({ op: 'acquire', id: 'held', name: lockName('killed') });
      await driver.acquired('held');

      await doomed.kill('SIGKILL');
      const lost = await driver.next((o) => o.event === 'lost' && o.id === 'held', 'the loss of held');
      expect(
        { told: doubtAndLoss(driver, 'held'), lost: failureOf(lost), code: 'code' in lost && lost.code },
        driver.transcript('held'),
      ).toEqual({ told: ['in-doubt', 'lost'], lost: { event: 'lost', kind: 'lost' }, code: 'UNAVAILABLE' });
      // Releasing it now says it was lost: the client does not believe it still holds it.
      expect(failureOf(await driver.release('held'))).toEqual({ event: 'error', kind: 'lost' });
    },
    scaled(60_000),
  );

  it(
    'server restarted: a holder whose server comes back without its session (a restart) is lost, never confirmed',
    async ({ expect, onTestFinished }) => {
      const first = await startServerProcess([]);
      onTestFinished(async () => {
        await first.kill('SIGKILL');
      });
      const driver = await driverFor(first.address, onTestFinished);
      driver.send({ op: 'acquire', id: 'held', name: lockName('restarted') });
      await driver.acquired('held');

      await first.kill('SIGKILL');
      // The same address, a new process: it has never heard of the client's session.
      const port = first.address.slice(first.address.lastIndexOf(':') + 1);
      const second = await startServerProcess(['--port', port]);
      onTestFinished(async () => {
        await second.kill('SIGKILL');
      });
      expect(second.address).toBe(first.address);
      const lost = await driver.next((o) => o.event === 'lost' && o.id === 'held', 'the loss of held');
      expect(
        { told: doubtAndLoss(driver, 'held'), lost: failureOf(lost) },
        driver.transcript('held'),
      ).toEqual({
        told: ['in-doubt', 'lost'],
        lost: { event: 'lost', kind: 'lost' },
      });
      expect(failureOf(await driver.release('held'))).toEqual({ event: 'error', kind: 'lost' });
    },
    scaled(60_000),
  );

  it(
    'brief cut: a holder whose connection is cut and comes back within the grace resumes with the same token, never lost',
    async ({ expect, onTestFinished }) => {
      const proxy = await TcpProxy.start(server.address);
      onTestFinished(() => proxy.close());
      const driver = await driverFor(proxy.address, onTestFinished);
      const name = lockName('cut');
      driver.send({ op: 'acquire', id: 'held', name });
      const token = BigInt(await driver.acquired('held'));

      // Every connection is reset; new ones pass.
      proxy.severAll();
      // The release reaches the server only on a stream that took the old one's session over (a
      // new session does not know the request), so `released` proves the resume.
      expect((await driver.release('held')).event).toBe('released');
      expect(driver.eventsOf('held')).not.toContain('lost');
      const doubt = doubtAndLoss(driver, 'held');
      // In doubt while it was cut (if the client noticed before the resume), then confirmed.
      expect(doubt.length === 0 || doubt.join() === 'in-doubt,confirmed', doubt.join()).toBe(true);
      const described = await other.describe(name);
      expect(described.holders).toEqual([]);
      // The server's own record: the lock was only ever held with the holder's token (a resumed
      // stream's report repeats the grant), and that hold was released.
      const record = server.logs
        .filter((line) => line['lock'] === name && (line['msg'] === 'granted' || line['msg'] === 'released'))
        .map((line) => [line['msg'], line['token']]);
      expect(new Set(record.map(([, logged]) => logged))).toEqual(new Set([token.toString()]));
      expect(record.at(-1)).toEqual(['released', token.toString()]);
    },
    scaled(60_000),
  );

  it(
    'bad requests among good ones: a 10 KB name, a 5 KB value and an ill-formed name each fail with invalid-argument, and a held lock stays held with its token',
    async ({ expect, onTestFinished }) => {
      const driver = await driverFor(server.address, onTestFinished);
      const name = lockName('bad-requests');
      driver.send({ op: 'acquire', id: 'held', name });
      const token = await driver.acquired('held');

      const bad = [
        { op: 'acquire', id: 'long-name', name: `${lockName('long')}/${'n'.repeat(10_240)}` },
        { op: 'acquire', id: 'big-value', name: lockName('big-value'), value: 'v'.repeat(5_120) },
        { op: 'acquire', id: 'ill-formed', name: `${lockName('ill-formed')}/`, invalidUtf8: true },
      ] as const;
      for (const command of bad) {
        driver.send(command);
        const outcome = await driver.outcome(command.id);
        expect(failureOf(outcome), JSON.stringify({ ...outcome, message: undefined })).toEqual({
          event: 'error',
          kind: 'invalid-argument',
        });
      }

      expect((await other.describe(name)).holders.map((holder) => holder.token.toString())).toEqual([token]);
      expect((await driver.release('held')).event).toBe('released');
      expect(driver.eventsOf('held')).toEqual(['acquired', 'released']);
    },
    scaled(60_000),
  );

  it(
    'multi-lock: 16 locks with 512-byte names are granted together by a server with default options',
    async ({ expect, onTestFinished }) => {
      const driver = await driverFor(server.address, onTestFinished);
      const prefix = lockName('multi');
      const names = Array.from({ length: 16 }, (_, i) => {
        const start = `${prefix}/${i}/`;
        return start + 'x'.repeat(512 - Buffer.byteLength(start));
      });
      driver.send({ op: 'acquire-all', id: 'all', names });
      const outcome = await driver.outcome('all');
      expect(failureOf(outcome), driver.transcript('all')).toEqual({ event: 'acquired' });
      expect(outcome.event === 'acquired' && outcome.tokens?.length).toBe(16);
      expect((await driver.release('all')).event).toBe('released');
    },
    scaled(60_000),
  );

  it(
    'closed client: a waiting acquire and new calls fail with the closed error within 1 s',
    async ({ expect, onTestFinished }) => {
      const driver = await driverFor(server.address, onTestFinished);
      const name = lockName('closed');
      const holder = await other.acquire(name);
      onTestFinished(() => holder.release());
      driver.send({ op: 'acquire', id: 'waiter', name });
      await driver.next((o) => o.event === 'queued' && o.id === 'waiter', 'waiter queued');

      const closedAt = driver.send({ op: 'close' });
      const waiter = await driver.outcome('waiter');
      expect(failureOf(waiter), driver.transcript('waiter')).toEqual({ event: 'error', kind: 'closed' });
      expect(waiter.arrivedAt - closedAt).toBeLessThan(1_000);

      for (const command of [
        { op: 'acquire', id: 'after-close', name: lockName('after-close') },
        { op: 'try-lock', id: 'try-after-close', name: lockName('after-close') },
      ] as const) {
        const sentAt = driver.send(command);
        const outcome = await driver.outcome(command.id);
        expect(failureOf(outcome), driver.transcript(command.id)).toEqual({ event: 'error', kind: 'closed' });
        expect(outcome.arrivedAt - sentAt).toBeLessThan(1_000);
      }
    },
    scaled(60_000),
  );

  it(
    "cancelled wait: a wait cancelled by the language's own mechanism ends alone; another held lock stays held",
    async ({ expect, onTestFinished }) => {
      const driver = await driverFor(server.address, onTestFinished);
      const keptName = lockName('kept');
      driver.send({ op: 'acquire', id: 'kept', name: keptName });
      const token = await driver.acquired('kept');
      const name = lockName('cancelled');
      const holder = await other.acquire(name);
      onTestFinished(() => holder.release());
      driver.send({ op: 'acquire', id: 'waiter', name });
      await driver.next((o) => o.event === 'queued' && o.id === 'waiter', 'waiter queued');

      driver.send({ op: 'cancel', id: 'waiter' });
      expect(failureOf(await driver.outcome('waiter')), driver.transcript('waiter')).toEqual({
        event: 'error',
        kind: 'cancelled',
      });
      expect((await other.describe(keptName)).holders.map((h) => h.token.toString())).toEqual([token]);
      expect((await driver.release('kept')).event).toBe('released');
      expect(driver.eventsOf('kept')).toEqual(['acquired', 'released']);
    },
    scaled(60_000),
  );

  it(
    'try-lock on a held lock answers not-acquired as a value, and leaves nothing queued',
    async ({ expect, onTestFinished }) => {
      const driver = await driverFor(server.address, onTestFinished);
      const name = lockName('try-lock');
      const holder = await other.acquire(name);
      onTestFinished(() => holder.release());
      driver.send({ op: 'try-lock', id: 'try', name });
      expect(failureOf(await driver.outcome('try')), driver.transcript('try')).toEqual({
        event: 'not-acquired',
      });
      expect((await other.describe(name)).waiters).toEqual([]);
    },
    scaled(60_000),
  );

  it(
    "loss inside a scope: leaving the language's lock scope after the lock was lost in it raises the loss",
    async ({ expect, onTestFinished }) => {
      const driver = await driverFor(server.address, onTestFinished);
      const name = lockName('scope');
      driver.send({ op: 'scope', id: 'scoped', name });
      await driver.acquired('scoped');
      // Taken away by force: the scope's body sees the loss, then returns normally.
      expect(await other.revoke(name, { reason: 'conformance', forceAfter: 100 })).toBe(1);
      const exited = await driver.next(
        (o) => o.event === 'scope-exited' && o.id === 'scoped',
        'leaving the scope',
      );
      expect(exited.event === 'scope-exited' && exited.error?.kind, driver.transcript('scoped')).toBe('lost');
    },
    scaled(60_000),
  );

  it(
    'second revoke request: a holder asked cooperatively, then with a deadline, is told both before the deadline takes the lock',
    async ({ expect, onTestFinished }) => {
      const driver = await driverFor(server.address, onTestFinished);
      const name = lockName('revoke');
      driver.send({ op: 'acquire', id: 'held', name });
      await driver.acquired('held');
      expect(await other.revoke(name, { reason: 'please' })).toBe(1);
      await driver.next((o) => o.event === 'revoke-requested' && o.id === 'held', 'the first revoke request');
      const askedAt = Date.now();
      expect(await other.revoke(name, { reason: 'now', forceAfter: 2_000 })).toBe(1);

      // The deadline takes the lock; the holder must have been told it first.
      const lost = await driver.next((o) => o.event === 'lost' && o.id === 'held', 'the loss of held');
      expect(lost, driver.transcript('held')).toMatchObject({ kind: 'lost', code: 'ABORTED' });
      const told = driver.observations.filter((o) => o.event === 'revoke-requested' && o.id === 'held');
      expect(
        told.map((o) => o.event === 'revoke-requested' && [o.reason, o.forceAt === null]),
        driver.transcript('held'),
      ).toEqual([
        ['please', true],
        ['now', false],
      ]);
      const deadline = told[1]?.event === 'revoke-requested' ? told[1].forceAt : null;
      expect(deadline).toBeGreaterThanOrEqual(askedAt + 2_000);
      expect(driver.eventsOf('held')).toEqual(['acquired', 'revoke-requested', 'revoke-requested', 'lost']);
    },
    scaled(60_000),
  );

  /** Two proxies in front of the one server: two endpoints that reach the same session. */
  async function twoEndpoints(onTestFinished: TestContext['onTestFinished']): Promise<TcpProxy[]> {
    const proxies = await Promise.all([TcpProxy.start(server.address), TcpProxy.start(server.address)]);
    onTestFinished(async () => {
      await Promise.all(proxies.map((proxy) => proxy.close()));
    });
    return proxies;
  }

  /**
   * The server's grants and releases of `name`, in order, each with its token; an entry that
   * repeats the one before (a resumed stream's report repeats the grant) is shown once.
   */
  function recordOf(name: string): Array<[unknown, unknown]> {
    const record: Array<[unknown, unknown]> = [];
    for (const line of server.logs) {
      if (line['lock'] !== name || (line['msg'] !== 'granted' && line['msg'] !== 'released')) continue;
      const last = record.at(-1);
      if (last?.[0] !== line['msg'] || last[1] !== line['token']) record.push([line['msg'], line['token']]);
    }
    return record;
  }

  it(
    'failover: a holder whose first endpoint freezes resumes through the second within the grace: in doubt, then confirmed with the same token, never lost, and nobody else is granted the lock meanwhile (default options)',
    async ({ expect, onTestFinished }) => {
      const [first, second] = await twoEndpoints(onTestFinished);
      const driver = await driverFor([first!.address, second!.address], onTestFinished);
      const name = lockName('failover');
      driver.send({ op: 'acquire', id: 'held', name });
      const token = await driver.acquired('held');
      const queued = deferred<number>();
      const next = other.acquire(name, { onQueued: queued.resolve });
      expect(await queued.promise).toBe(1);
      let nextGranted = false;
      void next.then(() => (nextGranted = true));

      // No byte passes either way on the first endpoint and no socket closes (a paused instance,
      // a dead host): the client must notice by itself and go to the second.
      first!.freeze();
      const confirmed = await driver.next(
        (o) => ['confirmed', 'lost'].includes(o.event) && 'id' in o && o.id === 'held',
        'the confirmation of held',
      );
      expect(
        { told: doubtAndLoss(driver, 'held'), confirmed: confirmed.event },
        driver.transcript('held'),
      ).toEqual({ told: ['in-doubt', 'confirmed'], confirmed: 'confirmed' });
      expect(nextGranted).toBe(false);
      expect((await other.describe(name)).holders.map((holder) => holder.token.toString())).toEqual([token]);
      // Only a stream that took the session over can release the request: `released` proves the
      // resume went through the second endpoint (the first passes nothing).
      expect((await driver.release('held')).event, driver.transcript('held')).toBe('released');
      const granted = await next;
      onTestFinished(() => granted.release());
      expect(granted.token).toBeGreaterThan(BigInt(token));
      expect(driver.eventsOf('held')).not.toContain('lost');
      // The server's own record: held with one token until its release (granted again on the
      // resumed stream, with that token), and the next holder's grant. Nobody was granted the lock
      // before the release (checked above); the next grant and the holder's `released` both
      // follow the deletion of its node, and are logged in whichever order their callbacks run.
      const record = recordOf(name);
      expect(record.filter(([, logged]) => logged === token)).toEqual([
        ['granted', token],
        ['released', token],
      ]);
      expect(record.filter(([, logged]) => logged !== token)).toEqual([
        ['granted', granted.token.toString()],
      ]);
    },
    scaled(60_000),
  );

  it(
    'failover, every endpoint down: a holder whose endpoints are all gone is in doubt, then lost past the grace, before the server grants its lock to another client (default options)',
    async ({ expect, onTestFinished }) => {
      const proxies = await twoEndpoints(onTestFinished);
      const driver = await driverFor(
        proxies.map((proxy) => proxy.address),
        onTestFinished,
      );
      const name = lockName('failover-all-down');
      driver.send({ op: 'acquire', id: 'held', name });
      const token = BigInt(await driver.acquired('held'));
      const queued = deferred<number>();
      const next = other.acquire(name, { onQueued: queued.resolve });
      expect(await queued.promise).toBe(1);

      // Both endpoints reset their connections and refuse new ones.
      await Promise.all(proxies.map((proxy) => proxy.close()));
      const lost = await driver.next((o) => o.event === 'lost' && o.id === 'held', 'the loss of held');
      const granted = await next;
      onTestFinished(() => granted.release());
      expect(granted.token).toBeGreaterThan(token);
      // On one clock, as in the partition scenario.
      const grant = await server.logged(
        (line) =>
          line['msg'] === 'granted' && line['lock'] === name && line['token'] === String(granted.token),
      );
      const lostBeforeGrantMs = (grant['time'] as number) - lost.at;
      expect(
        { told: doubtAndLoss(driver, 'held'), lost: failureOf(lost) },
        driver.transcript('held'),
      ).toEqual({
        told: ['in-doubt', 'lost'],
        lost: { event: 'lost', kind: 'lost' },
      });
      expect(
        lostBeforeGrantMs,
        `lost ${-lostBeforeGrantMs} ms after the grant:\n${driver.transcript('held')}`,
      ).toBeGreaterThan(0);
    },
    scaled(60_000),
  );

  it(
    'failover, refused first endpoint: with a first endpoint that refuses connections, the first acquire goes to the second (default options)',
    async ({ expect, onTestFinished }) => {
      const refused = await TcpProxy.start(server.address);
      const refusedAddress = refused.address;
      // Nothing listens there any more: connections are refused.
      await refused.close();
      const [, second] = await twoEndpoints(onTestFinished);
      const driver = await driverFor([refusedAddress, second!.address], onTestFinished);
      const name = lockName('failover-refused');
      driver.send({ op: 'acquire', id: 'held', name });
      const outcome = await driver.outcome('held');
      expect(failureOf(outcome), driver.transcript('held')).toEqual({ event: 'acquired' });
      const token = outcome.event === 'acquired' ? outcome.token : '';
      expect((await other.describe(name)).holders.map((holder) => holder.token.toString())).toEqual([token]);
      expect((await driver.release('held')).event).toBe('released');
    },
    scaled(60_000),
  );

  it(
    'failover, bad endpoint lists: an empty list, an entry that is no host:port and an endpoint named twice are each refused at connect with invalid-argument',
    async ({ expect, onTestFinished }) => {
      const lists = [[], [server.address, 'no-port'], [server.address, server.address]];
      const answers = await Promise.all(
        lists.map(async (addresses) => {
          const driver = await Driver.launch(language);
          onTestFinished(() => driver.stop());
          const answer = await driver.connect(addresses);
          return { addresses, answer: failureOf(answer), said: driver.transcript() };
        }),
      );
      for (const { addresses, answer, said } of answers) {
        expect(answer, `${JSON.stringify(addresses)}:\n${said}`).toEqual({
          event: 'error',
          kind: 'invalid-argument',
        });
      }
    },
    scaled(60_000),
  );
});
