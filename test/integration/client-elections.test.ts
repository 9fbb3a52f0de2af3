import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  LockClient,
  LockClientError,
  LockLostError,
  LockTimeoutError,
  NotLeaderError,
  Status,
  type ElectionEvent,
  type Leadership,
  type LockClientOptions,
  type RevokeRequest,
} from '../../src/client/index.js';
import { sha256 } from '../../src/server/security/access-policy.js';
import { deferred } from '../support/lock-caller.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { TcpProxyProcess } from '../support/tcp-proxy-process.js';

/*
 * The TypeScript SDK's elections (LockClient.campaign, observe, leader, proclaim, resign) against
 * a server in its own process, on both stores: a Leadership is held on a Campaign stream as a
 * Lock is on an Acquire stream (elected, lost, in doubt and confirmed across a broken stream or
 * a failover, resigned), and the unary calls map a term that is not the leader's to
 * NotLeaderError.
 */

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

/** Starts `campaign` and resolves once the server reports the candidate queued, with `ahead`. */
async function queued(
  client: LockClient,
  name: string,
  value: Uint8Array | string,
  options: Parameters<LockClient['campaign']>[2] = {},
): Promise<{ ahead: number; leadership: Promise<Leadership> }> {
  const ahead = deferred<number>();
  const leadership = client.campaign(name, value, { ...options, onQueued: (n) => ahead.resolve(n) });
  leadership.catch(() => {});
  return {
    ahead: await Promise.race([
      ahead.promise,
      leadership.then(() => {
        throw new Error(`a candidate for "${name}" was elected instead of queued`);
      }),
    ]),
    leadership,
  };
}

/** Resolves with the reason `leadership` was lost, once it is. */
function lossOf(leadership: Leadership): Promise<unknown> {
  const { lost } = leadership;
  return new Promise((resolve) => {
    if (lost.aborted) resolve(lost.reason);
    else lost.addEventListener('abort', () => resolve(lost.reason), { once: true });
  });
}

/** The next event of `events`; fails if the stream ended. */
async function nextEvent(events: AsyncGenerator<ElectionEvent, void>): Promise<ElectionEvent> {
  const next = await events.next();
  if (next.done) throw new Error('the observer ended');
  return next.value;
}

for (const store of ['embedded', 'zookeeper'] as const) {
  describe(`the TypeScript client's elections on the ${store} store`, () => {
    let server: ServerProcess;
    const cleanups: Array<() => unknown> = [];
    /** A client of its own connection (grpc-js would otherwise share one per address). */
    const newClient = (
      address: string | string[] = server.address,
      options: LockClientOptions = {},
    ): LockClient => {
      const client = new LockClient(address, {
        ...options,
        channelOptions: { 'grpc.use_local_subchannel_pool': 1 },
      });
      cleanups.push(() => client.close());
      return client;
    };
    const proxy = async (): Promise<TcpProxyProcess> => {
      const started = await TcpProxyProcess.start(server.address);
      cleanups.push(() => started.close());
      return started;
    };
    const electionName = (): string => `elections/${store}/${randomUUID()}`;

    beforeAll(async () => {
      server = await startServerProcess(
        store === 'embedded'
          ? []
          : ['--zookeeper', connectString, '--root', `/client-elections-${randomUUID()}`],
      );
    });
    afterEach(async () => {
      for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    });
    afterAll(async () => {
      await server?.kill('SIGTERM');
    });

    it('elects a candidate with a bigint term; the next ones wait in order and are elected as each resigns, with growing terms', async () => {
      const client = newClient();
      const name = electionName();
      const first = await client.campaign(name, 'first', { owner: 'one' });
      expect(typeof first.term).toBe('bigint');
      expect([first.name, first.inDoubt, first.lost.aborted, first.resignRequested]).toEqual([
        name,
        false,
        false,
        undefined,
      ]);
      const second = await queued(client, name, 'second');
      const third = await queued(newClient(), name, new TextEncoder().encode('third'));
      expect([second.ahead, third.ahead]).toEqual([1, 2]);

      await first.resign();
      await first.resign(); // idempotent
      const secondLeader = await second.leadership;
      expect(secondLeader.term).toBeGreaterThan(first.term);
      await secondLeader.resign();
      const thirdLeader = await third.leadership;
      expect(thirdLeader.term).toBeGreaterThan(secondLeader.term);
      expect((await client.leader(name))?.value.toString()).toBe('third');
      await thirdLeader.resign();
      expect([first.lost.aborted, secondLeader.lost.aborted, thirdLeader.lost.aborted]).toEqual([
        false,
        false,
        false,
      ]);
    });

    it('resigns at the end of the block with `await using`', async () => {
      const client = newClient();
      const name = electionName();
      let term: bigint;
      {
        await using leadership = await client.campaign(name, 'scoped');
        term = leadership.term;
        expect((await client.leader(name))?.term).toBe(term);
      }
      expect(await client.leader(name)).toBeUndefined();
      expect(await client.checkToken(name, term)).toBe(false);
    });

    it("fires `lost` with the server's reason when another client resigns its term, before the next candidate is elected", async () => {
      const client = newClient();
      const other = newClient();
      const name = electionName();
      const events: string[] = [];
      const leadership = await client.campaign(name, 'deposed');
      leadership.lost.addEventListener('abort', () => events.push('lost'));
      const next = await queued(client, name, 'next');
      void next.leadership.then(() => events.push('next elected'));

      await other.resign(name, leadership.term);
      const nextLeader = await next.leadership;
      expect(events).toEqual(['lost', 'next elected']);
      const reason: unknown = leadership.lost.reason;
      expect(reason).toBeInstanceOf(LockLostError);
      expect(reason).toMatchObject({
        code: Status.ABORTED,
        message: expect.stringMatching(new RegExp(`term ${leadership.term} ended by Resign`)),
      });
      await expect(leadership.whenConfirmed()).rejects.toBe(reason);
      await expect(leadership.proclaim('too late')).rejects.toBe(reason);
      await expect(leadership.resign()).rejects.toBe(reason);
      // Disposing a lost leadership is not an error.
      await leadership[Symbol.asyncDispose]();
      expect(nextLeader.term).toBeGreaterThan(leadership.term);
      await nextLeader.resign();
    });

    it('observe: vacant first, then each term in order with its value and owner, the values proclaimed, and vacant once the leader resigns', async () => {
      const client = newClient();
      const name = electionName();
      const stop = new AbortController();
      const events = client.observe(name, { signal: stop.signal });
      expect(await nextEvent(events)).toEqual({ kind: 'vacant', afterTerm: 0n });

      const a = await client.campaign(name, 'a', { owner: 'A' });
      const termA = await nextEvent(events);
      expect(termA).toMatchObject({ kind: 'term', term: a.term, value: Buffer.from('a'), owner: 'A' });
      expect(termA.kind === 'term' && termA.electedAt!.getTime()).toBeGreaterThan(Date.now() - 60_000);
      await a.proclaim('a2');
      expect(await nextEvent(events)).toEqual({ kind: 'proclaimed', term: a.term, value: Buffer.from('a2') });
      await newClient().proclaim(name, a.term, new Uint8Array([0xff, 0x00]));
      expect(await nextEvent(events)).toEqual({
        kind: 'proclaimed',
        term: a.term,
        value: Buffer.from([0xff, 0x00]),
      });
      await a.resign();
      expect(await nextEvent(events)).toEqual({ kind: 'vacant', afterTerm: a.term });

      const b = await client.campaign(name, 'b');
      expect(await nextEvent(events)).toMatchObject({ kind: 'term', term: b.term, value: Buffer.from('b') });
      expect(b.term).toBeGreaterThan(a.term);
      stop.abort();
      // Ends cleanly once the signal aborts.
      expect(await events.next()).toEqual({ done: true, value: undefined });
      await b.resign();
    });

    it('observe from a term replays every term since, in order, then goes on live', async () => {
      const client = newClient();
      const name = electionName();
      const terms: bigint[] = [];
      for (const value of ['c0', 'c1', 'c2']) {
        const leadership = await client.campaign(name, value);
        terms.push(leadership.term);
        await leadership.resign();
      }
      const events = client.observe(name, { fromTerm: terms[1]! });
      expect(await nextEvent(events)).toMatchObject({
        kind: 'term',
        term: terms[1],
        value: Buffer.from('c1'),
      });
      expect(await nextEvent(events)).toMatchObject({
        kind: 'term',
        term: terms[2],
        value: Buffer.from('c2'),
      });
      expect(await nextEvent(events)).toEqual({ kind: 'vacant', afterTerm: terms[2] });
      const live = await client.campaign(name, 'c3');
      expect(await nextEvent(events)).toMatchObject({
        kind: 'term',
        term: live.term,
        value: Buffer.from('c3'),
      });
      // Leaving the loop (here: return()) ends the observer.
      expect(await events.return()).toEqual({ done: true, value: undefined });
      await live.resign();

      // Replaying from a term older than the election's first: every term it has.
      const all: bigint[] = [];
      for await (const event of client.observe(name, { fromTerm: 1n })) {
        if (event.kind === 'term') all.push(event.term);
        if (event.kind === 'vacant') break;
      }
      expect(all).toEqual([...terms, live.term]);
    });

    it('leader(): undefined while nobody leads, else the term, its latest value, owner and since when', async () => {
      const client = newClient();
      const name = electionName();
      expect(await client.leader(name)).toBeUndefined();
      const leadership = await client.campaign(name, 'v1', { owner: 'me' });
      const leader = await client.leader(name);
      expect(leader).toMatchObject({ term: leadership.term, value: Buffer.from('v1'), owner: 'me' });
      expect(leader!.electedAt).toBeInstanceOf(Date);
      await leadership.proclaim('v2');
      expect((await newClient().leader(name))?.value.toString()).toBe('v2');
      await leadership.resign();
      expect(await client.leader(name)).toBeUndefined();
    });

    it("proclaim and resign with a term that is not the current leader's reject with NotLeaderError and change nothing", async () => {
      const client = newClient();
      const other = newClient();
      const name = electionName();
      const leadership = await client.campaign(name, 'kept');
      for (const stale of [leadership.term - 1n, leadership.term + 1n, 0n]) {
        for (const refused of [other.proclaim(name, stale, 'stale'), other.resign(name, stale)]) {
          const error: unknown = await refused.catch((e: unknown) => e);
          expect(error).toBeInstanceOf(NotLeaderError);
          expect(error).toBeInstanceOf(LockClientError);
          expect(error).toMatchObject({
            name: 'NotLeaderError',
            code: Status.FAILED_PRECONDITION,
            term: stale,
            lockName: name,
            message: expect.stringMatching(new RegExp(`term ${stale} is not the current leader's`)),
          });
        }
      }
      expect((await client.leader(name))?.value.toString()).toBe('kept');
      expect(leadership.lost.aborted).toBe(false);
      await leadership.resign();
      // After the resignation, its own term is stale too.
      await expect(other.resign(name, leadership.term)).rejects.toBeInstanceOf(NotLeaderError);
      await expect(leadership.proclaim('after')).rejects.toBeInstanceOf(NotLeaderError);
    });

    it('tells the leader when someone asks it to step down (revoke on the election)', async () => {
      const client = newClient();
      const name = electionName();
      const asked = deferred<RevokeRequest>();
      const leadership = await client.campaign(name, 'v', {
        onResignRequested: (request) => asked.resolve(request),
      });
      expect(await newClient().revoke(name, { reason: 'maintenance' })).toBe(1);
      expect(await asked.promise).toEqual({ reason: 'maintenance', forceAt: undefined });
      expect(leadership.resignRequested).toEqual({ reason: 'maintenance', forceAt: undefined });
      await leadership.resign();
      expect(leadership.lost.aborted).toBe(false);
    });

    it("refuses bad arguments before sending, a lock's name with FAILED_PRECONDITION, and gives up a wait on timeout or abort without leaving the candidate queued", async () => {
      const client = newClient();
      const name = electionName();
      await expect(client.campaign('', 'v')).rejects.toMatchObject({
        code: Status.INVALID_ARGUMENT,
        message: expect.stringMatching(/name is empty/),
      });
      await expect(client.campaign(name, 'x'.repeat(1025))).rejects.toMatchObject({
        code: Status.INVALID_ARGUMENT,
        message: expect.stringMatching(/value is 1025 bytes/),
      });
      await expect(client.proclaim(name, -1n, 'v')).rejects.toMatchObject({ code: Status.INVALID_ARGUMENT });
      await expect(client.resign(name, 1 as unknown as bigint)).rejects.toMatchObject({
        code: Status.INVALID_ARGUMENT,
        message: expect.stringMatching(/term must be a bigint/),
      });

      const lockName = `${name}/a-lock`;
      const lock = await client.acquire(lockName);
      const refused: unknown = await client.campaign(lockName, 'v').catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(LockClientError);
      expect(refused).not.toBeInstanceOf(NotLeaderError);
      expect(refused).toMatchObject({ code: Status.FAILED_PRECONDITION });
      await lock.release();

      const leadership = await client.campaign(name, 'leader');
      await expect(client.campaign(name, 'now or never', { waitTimeout: 0 })).rejects.toBeInstanceOf(
        LockTimeoutError,
      );
      const withdraw = new AbortController();
      const waiting = await queued(client, name, 'patient', { signal: withdraw.signal });
      const why = new Error('changed my mind');
      withdraw.abort(why);
      await expect(waiting.leadership).rejects.toBe(why);
      await expect.poll(async () => (await client.describe(name)).waiters.length).toBe(0);
      await leadership.resign();
      expect(await client.leader(name)).toBeUndefined();
    });

    it('rides out a cut connection: in doubt, then confirmed with the same term; the next candidate is elected only after the resignation', async () => {
      const through = await proxy();
      const events: string[] = [];
      const confirmed = deferred();
      const direct = newClient();
      const name = electionName();
      const leadership = await newClient(through.address, { resumeGraceMs: 10_000 }).campaign(name, 'v', {
        onInDoubt: () => events.push('in doubt'),
        onConfirmed: () => {
          events.push('confirmed');
          confirmed.resolve();
        },
      });
      const next = await queued(direct, name, 'next');
      expect(next.ahead).toBe(1);
      void next.leadership.then(() => events.push('next elected'));

      await through.severAll();
      await confirmed.promise;
      expect([leadership.inDoubt, leadership.lost.aborted]).toEqual([false, false]);
      expect((await direct.leader(name))?.term).toBe(leadership.term);
      expect(await direct.checkToken(name, leadership.term)).toBe(true);
      // The resignation goes through the resumed stream.
      await leadership.resign();
      const nextLeader = await next.leadership;
      expect(events).toEqual(['in doubt', 'confirmed', 'next elected']);
      expect(nextLeader.term).toBeGreaterThan(leadership.term);
      await nextLeader.resign();
    });

    it('is deposed once the grace passes without a resume: `lost` (UNAVAILABLE) before the next candidate is elected', async () => {
      const through = await proxy();
      const events: string[] = [];
      const name = electionName();
      const leadership = await newClient(through.address, {
        resumeGraceMs: 1_000,
        heartbeatIntervalMs: 200,
      }).campaign(name, 'v', { onInDoubt: () => events.push('in doubt') });
      leadership.lost.addEventListener('abort', () => events.push('lost'));
      const next = await queued(newClient(), name, 'next');
      // Nothing passes either way and nothing is closed: only the heartbeats can tell.
      await through.freeze();
      const nextLeader = await next.leadership;
      events.push('next elected');
      expect(events).toEqual(['in doubt', 'lost', 'next elected']);
      expect(leadership.lost.reason).toMatchObject({
        name: 'LockLostError',
        code: Status.UNAVAILABLE,
        message: expect.stringMatching(/no message from the server for 600 ms/),
      });
      expect(nextLeader.term).toBeGreaterThan(leadership.term);
      await nextLeader.resign();
    });

    it('keeps a quiet leadership through a proxy that cuts idle connections, with heartbeats', async () => {
      const through = await proxy();
      // No HTTP/2 pings within the test: only the lockstream heartbeats make traffic.
      const quiet = { keepaliveTimeMs: 60_000, keepaliveTimeoutMs: 60_000 };
      await through.cutIdleAfter(1_000);
      const events: string[] = [];
      const beating = await newClient(through.address, { ...quiet, heartbeatIntervalMs: 200 }).campaign(
        electionName(),
        'busy',
        { onInDoubt: () => events.push('in doubt') },
      );
      const silent = await newClient(through.address, {
        ...quiet,
        heartbeatIntervalMs: 0,
        resumeGraceMs: 0,
      }).campaign(electionName(), 'idle');
      // The stream without heartbeats is cut after a second of silence...
      expect(await lossOf(silent)).toMatchObject({ name: 'LockLostError', code: Status.UNAVAILABLE });
      // ...while the one with heartbeats, as old, never was.
      expect(events).toEqual([]);
      expect(beating.lost.aborted).toBe(false);
      await beating.resign();
    });

    it('fails over to the second endpoint when the first one dies, keeping its term (default options)', async () => {
      const [first, second] = await Promise.all([proxy(), proxy()]);
      const events: string[] = [];
      const confirmed = deferred();
      const name = electionName();
      const leadership = await newClient([first.address, second.address]).campaign(name, 'v', {
        onInDoubt: () => events.push('in doubt'),
        onConfirmed: () => {
          events.push('confirmed');
          confirmed.resolve();
        },
      });
      const direct = newClient();
      const next = await queued(direct, name, 'next');
      void next.leadership.then(() => events.push('next elected'));
      // Its connections reset and its port refuses: only the second endpoint reaches the server.
      await first.close();
      await confirmed.promise;
      expect((await direct.leader(name))?.term).toBe(leadership.term);
      await leadership.proclaim('moved');
      expect((await direct.leader(name))?.value.toString()).toBe('moved');
      await leadership.resign();
      expect((await next.leadership).term).toBeGreaterThan(leadership.term);
      expect(events).toEqual(['in doubt', 'confirmed', 'next elected']);
      await (await next.leadership).resign();
    });
  });
}

describe("the TypeScript client's elections under an access policy", () => {
  const TOKENS = { elector: 'elector-token-0c51e2', outsider: 'outsider-token-77ad90' } as const;
  let dir: string;
  let server: ServerProcess;
  const clients: LockClient[] = [];
  const as = (who: keyof typeof TOKENS): LockClient => {
    const client = new LockClient(server.address, {
      token: TOKENS[who],
      channelOptions: { 'grpc.use_local_subchannel_pool': 1 },
    });
    clients.push(client);
    return client;
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'client-elections-'));
    const policy = join(dir, 'access.yaml');
    await writeFile(
      policy,
      `callers:
  - name: elector
    token_sha256: ${sha256(TOKENS.elector).toString('hex')}
    locks:
      - { prefix: leaders/, modes: [candidate] }
  - name: outsider
    token_sha256: ${sha256(TOKENS.outsider).toString('hex')}
    locks:
      - { prefix: other/, modes: [candidate] }
`,
    );
    server = await startServerProcess(['--auth-file', policy]);
  });
  afterAll(async () => {
    for (const client of clients.splice(0)) client.close();
    await server?.kill('SIGTERM');
    await rm(dir, { recursive: true, force: true });
  });

  it("sends the client's bearer token on every election call, as on its lock calls", async () => {
    const name = `leaders/${randomUUID()}`;
    const elector = as('elector');
    const leadership = await elector.campaign(name, 'v');
    const events = elector.observe(name);
    expect(await nextEvent(events)).toMatchObject({ kind: 'term', term: leadership.term });
    await events.return();
    expect((await elector.leader(name))?.term).toBe(leadership.term);
    await leadership.proclaim('v2');

    const outsider = as('outsider');
    const denied = { code: Status.PERMISSION_DENIED };
    await expect(outsider.campaign(name, 'me')).rejects.toMatchObject(denied);
    await expect(outsider.leader(name)).rejects.toMatchObject(denied);
    await expect(nextEvent(outsider.observe(name))).rejects.toMatchObject(denied);
    await expect(outsider.proclaim(name, leadership.term, 'x')).rejects.toMatchObject(denied);
    await expect(outsider.resign(name, leadership.term)).rejects.toMatchObject(denied);

    await elector.resign(name, leadership.term);
    expect(await lossOf(leadership)).toMatchObject({ name: 'LockLostError', code: Status.ABORTED });
  });
});
