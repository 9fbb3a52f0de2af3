import { randomUUID } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { LockMode } from '../../src/gen/lockstream/v1/lockstream.js';
import { ElectionCaller, refusal, type CampaignStream } from '../support/election-caller.js';
import { LockCaller, seconds } from '../support/lock-caller.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

/*
 * The ElectionService's promises (proto/lockstream/v1/election.proto), against a server in its
 * own process on both stores: Campaign elects in queue order and tells the term, Observe tells
 * every term in order (replayed from a term, or from the current state, with vacancies), Leader,
 * Proclaim and Resign act on the current term only, and an election is a lock of candidates.
 */

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

const text = (value: Uint8Array | undefined): string => Buffer.from(value ?? []).toString();

for (const store of ['embedded', 'zookeeper'] as const) {
  describe(`elections on the ${store} store`, () => {
    let server: ServerProcess;
    let elections: ElectionCaller;
    let locks: LockCaller;
    const open: CampaignStream[] = [];
    const campaign = (name: string, value = '', extra: object = {}): CampaignStream => {
      const stream = elections.campaign({ name, value: Buffer.from(value), ...extra });
      open.push(stream);
      return stream;
    };

    beforeAll(async () => {
      server = await startServerProcess(
        store === 'embedded' ? [] : ['--zookeeper', connectString, '--root', `/election-${randomUUID()}`],
      );
      elections = new ElectionCaller(server.address);
      locks = new LockCaller(server.address);
    });
    afterEach(() => {
      for (const stream of open.splice(0)) stream.cancel();
    });
    afterAll(async () => {
      elections?.close();
      locks?.close();
      await server?.kill('SIGTERM');
    });

    it('elects candidates in the order they joined, each with a larger term, and `resign` hands over', async () => {
      const name = `e-${randomUUID()}`;
      const first = campaign(name, 'first');
      const term1 = await first.elected();
      const second = campaign(name, 'second');
      expect(await second.next()).toEqual({ $case: 'queued', value: { ahead: 1 } });
      const third = campaign(name, 'third');
      expect(await third.next()).toEqual({ $case: 'queued', value: { ahead: 2 } });

      first.resign();
      expect((await first.next()).$case).toBe('resigned');
      expect((await first.outcome).code).toBe(status.OK);
      const term2 = await second.elected();
      expect(term2).toBeGreaterThan(term1);
      // Half-closing without a grace resigns too.
      second.call.end();
      expect((await second.next()).$case).toBe('resigned');
      expect((await second.outcome).code).toBe(status.OK);
      expect(await third.elected()).toBeGreaterThan(term2);
    });

    it('says the term through CheckToken while it lasts, and shows the election through DescribeLock', async () => {
      const name = `e-${randomUUID()}`;
      const leader = campaign(name, 'at 10.0.0.1', { owner: 'node-1' });
      const term = await leader.elected();
      const waiting = campaign(name, 'at 10.0.0.2');
      await waiting.next();
      expect(await locks.checkToken(name, term)).toBe(true);
      const described = await locks.describe(name);
      expect(described.holders.map((h) => [h.mode, h.fencingToken, text(h.value), h.owner])).toEqual([
        [LockMode.CANDIDATE, term, 'at 10.0.0.1', 'node-1'],
      ]);
      expect(described.waiters.map((w) => [w.mode, text(w.value)])).toEqual([
        [LockMode.CANDIDATE, 'at 10.0.0.2'],
      ]);
      leader.resign();
      await leader.outcome;
      expect(await locks.checkToken(name, term)).toBe(false);
    });

    it('is an election or a lock, not both: Acquire refuses CANDIDATE, and a queue refuses the other kind', async () => {
      const name = `e-${randomUUID()}`;
      const bad = locks.open({ name, mode: LockMode.CANDIDATE });
      const badEnd = await bad.outcome;
      expect(badEnd.code).toBe(status.INVALID_ARGUMENT);
      expect(badEnd.details).toMatch(/CANDIDATE.*Campaign/);

      const leader = campaign(name);
      await leader.elected();
      const intruder = locks.open({ name, mode: LockMode.MUTEX });
      const intruderEnd = await intruder.outcome;
      expect(intruderEnd.code).toBe(status.FAILED_PRECONDITION);
      expect(intruderEnd.details).toMatch(/election.*MUTEX/);

      const lockName = `l-${randomUUID()}`;
      const holder = locks.open({ name: lockName, mode: LockMode.MUTEX });
      await holder.acquired();
      const candidate = campaign(lockName);
      const candidateEnd = await candidate.outcome;
      expect(candidateEnd.code).toBe(status.FAILED_PRECONDITION);
      expect(candidateEnd.details).toMatch(/MUTEX.*election/);
      await holder.release();
    });

    it('Leader: NOT_FOUND while nobody leads, else the term, its latest value and owner', async () => {
      const name = `e-${randomUUID()}`;
      const none = await refusal(elections.leader(name));
      expect(none.code).toBe(status.NOT_FOUND);
      expect(none.details).toMatch(new RegExp(`"${name}".*nobody leads`));
      const leader = campaign(name, 'v1', { owner: 'me' });
      const term = await leader.elected();
      const answer = (await elections.leader(name)).leader!;
      expect([answer.term, text(answer.value), answer.owner]).toEqual([term, 'v1', 'me']);
      expect(answer.electedAt!.getTime()).toBeGreaterThan(Date.now() - 60_000);
      await elections.proclaim(name, term, 'v2');
      expect(text((await elections.leader(name)).leader!.value)).toBe('v2');
      leader.resign();
      await leader.outcome;
      expect((await refusal(elections.leader(name))).code).toBe(status.NOT_FOUND);
    });

    it('Proclaim: only with the current term; the value reaches Leader, DescribeLock and observers', async () => {
      const name = `e-${randomUUID()}`;
      const leader = campaign(name, 'start');
      const term = await leader.elected();
      const observer = elections.observe(name);
      expect(await observer.next()).toMatchObject({ $case: 'term', value: { term } });
      await elections.proclaim(name, term, 'proclaimed');
      expect(await observer.next()).toEqual({
        $case: 'proclaimed',
        value: { term, value: Buffer.from('proclaimed') },
      });
      expect(text((await locks.describe(name)).holders[0]!.value)).toBe('proclaimed');

      for (const stale of [term - 1n, term + 1n, 0n]) {
        const refused = await refusal(elections.proclaim(name, stale, 'stale'));
        expect(refused.code).toBe(status.FAILED_PRECONDITION);
        expect(refused.details).toMatch(new RegExp(`term ${stale} is not the current leader's`));
      }
      expect(text((await elections.leader(name)).leader!.value)).toBe('proclaimed');
      const tooLarge = await refusal(elections.proclaim(name, term, 'x'.repeat(1025)));
      expect(tooLarge.code).toBe(status.INVALID_ARGUMENT);
      observer.cancel();
    });

    it('Resign: ends the current term (the leader hears ABORTED first, then the next is elected); a stale term is refused', async () => {
      const name = `e-${randomUUID()}`;
      const leader = campaign(name);
      const term = await leader.elected();
      const next = campaign(name);
      await next.next();
      const stale = await refusal(elections.resign(name, term - 1n));
      expect(stale.code).toBe(status.FAILED_PRECONDITION);

      await elections.resign(name, term);
      const ended = await leader.outcome;
      expect(ended.code).toBe(status.ABORTED);
      expect(ended.details).toMatch(/Resign/);
      const nextTerm = await next.elected();
      expect(nextTerm).toBeGreaterThan(term);
      // The deposed leader heard it before the next candidate heard it leads.
      expect(leader.messages.endReceipt).toBeLessThan(next.electedReceipt!);
      const again = await refusal(elections.resign(name, term));
      expect(again.code).toBe(status.FAILED_PRECONDITION);
    });

    it('RevokeLock on the election asks its leader to step down: `resign_requested`, and with force_after it is deposed', async () => {
      const name = `e-${randomUUID()}`;
      const leader = campaign(name);
      const term = await leader.elected();
      const next = campaign(name);
      await next.next();
      expect(await locks.revoke(name, 'maintenance', 0.2)).toBe(1);
      expect(await leader.next()).toMatchObject({
        $case: 'resignRequested',
        value: { reason: 'maintenance' },
      });
      expect((await leader.outcome).code).toBe(status.ABORTED);
      expect(await next.elected()).toBeGreaterThan(term);
      expect(leader.messages.endReceipt).toBeLessThan(next.electedReceipt!);
    });

    it('Observe: the current state first (vacant for an election nobody campaigned in), then every term, and vacant when nobody leads', async () => {
      const name = `e-${randomUUID()}`;
      const observer = elections.observe(name);
      expect(await observer.next()).toEqual({ $case: 'vacant', value: { afterTerm: 0n } });
      const a = campaign(name, 'a', { owner: 'A' });
      const termA = await a.elected();
      expect(await observer.next()).toMatchObject({
        $case: 'term',
        value: { term: termA, value: Buffer.from('a'), owner: 'A' },
      });
      a.resign();
      await a.outcome;
      expect(await observer.next()).toEqual({ $case: 'vacant', value: { afterTerm: termA } });
      const b = campaign(name, 'b');
      const termB = await b.elected();
      expect(await observer.next()).toMatchObject({ $case: 'term', value: { term: termB } });
      observer.cancel();
      expect((await observer.outcome).code).toBe(status.CANCELLED);
    });

    it('Observe from a term replays every term since, in order, even terms that began and ended between two looks', async () => {
      const name = `e-${randomUUID()}`;
      // A queue of candidates handed over one after another as fast as they can.
      const candidates = Array.from({ length: 6 }, (_, i) => campaign(name, `c${i}`));
      const terms: bigint[] = [];
      for (const candidate of candidates) {
        terms.push(await candidate.elected());
        candidate.resign();
        await candidate.outcome;
      }
      const replay = elections.observe(name, terms[1]);
      const seen: bigint[] = [];
      for (let i = 1; i < terms.length; i += 1) {
        const event = await replay.next();
        expect(event.$case).toBe('term');
        if (event.$case === 'term') {
          seen.push(event.value.term);
          expect(text(event.value.value)).toBe(`c${i}`);
        }
      }
      expect(seen).toEqual(terms.slice(1));
      expect(await replay.next()).toEqual({ $case: 'vacant', value: { afterTerm: terms.at(-1) } });
      replay.cancel();
    });

    it('Observe from the term after a proclaimed one tells nothing of that term, then or later', async () => {
      const name = `e-${randomUUID()}`;
      const leader = campaign(name, 'a');
      const term = await leader.elected();
      await elections.proclaim(name, term, 'a2');
      // From the next term: terms and proclamations from there on only.
      const observer = elections.observe(name, term + 1n);
      await elections.proclaim(name, term, 'a3');
      leader.resign();
      await leader.outcome;
      const next = campaign(name, 'b');
      const nextTerm = await next.elected();
      // The seat may be seen empty after `term` first (a vacancy names the term before).
      let event = await observer.next();
      if (event.$case === 'vacant') {
        expect(event.value.afterTerm).toBe(term);
        event = await observer.next();
      }
      expect(event).toMatchObject({ $case: 'term', value: { term: nextTerm, value: Buffer.from('b') } });
      observer.cancel();
    });

    it('Observe says when the history no longer reaches back to from_term', async () => {
      const name = `e-${randomUUID()}`;
      const terms: bigint[] = [];
      for (let i = 0; i < 102; i += 1) {
        const candidate = campaign(name);
        terms.push(await candidate.elected());
        candidate.resign();
        await candidate.outcome;
      }
      // The history keeps the last 100 terms: the first two are gone (pruning follows each term).
      await expect.poll(async () => (await historyFirst(elections, name)) === terms[2]).toBe(true);
      const replay = elections.observe(name, terms[0]);
      expect(await replay.next()).toEqual({ $case: 'historyGone', value: { firstTerm: terms[2] } });
      expect(await replay.next()).toMatchObject({ $case: 'term', value: { term: terms[2] } });
      replay.cancel();
    });

    it('a candidate that asked for a grace is kept after its stream breaks, and resumes with the same term', async () => {
      const name = `e-${randomUUID()}`;
      const leader = campaign(name, '', { resumeGrace: seconds(10) });
      const resumable = await leader.next();
      expect(resumable.$case).toBe('resumable');
      const term = await leader.elected();
      leader.cancel();
      await leader.outcome;
      const token = resumable.$case === 'resumable' ? resumable.value.resumeToken : '';
      const resumed = elections.client.campaign();
      const messages: unknown[] = [];
      const elected = new Promise<bigint>((resolve) =>
        resumed.on('data', (message: { kind?: { $case: string; value: { term?: bigint } } }) => {
          messages.push(message);
          if (message.kind?.$case === 'elected') resolve(message.kind.value.term!);
        }),
      );
      resumed.on('error', () => {});
      resumed.write({
        kind: { $case: 'resume', value: { resumeToken: token, heartbeatInterval: undefined } },
      });
      expect(await elected).toBe(term);
      expect(await locks.checkToken(name, term)).toBe(true);
      resumed.write({ kind: { $case: 'resign', value: {} } });
      await new Promise((resolve) => resumed.on('status', resolve));
      expect(await locks.checkToken(name, term)).toBe(false);
    });

    it('wait_timeout 0 leads now or not at all, and a malformed start names the field', async () => {
      const name = `e-${randomUUID()}`;
      const leader = campaign(name);
      await leader.elected();
      const impatient = campaign(name, '', { waitTimeout: seconds(0) });
      expect((await impatient.outcome).code).toBe(status.DEADLINE_EXCEEDED);
      const empty = campaign('');
      const emptyEnd = await empty.outcome;
      expect(emptyEnd.code).toBe(status.INVALID_ARGUMENT);
      expect(emptyEnd.details).toMatch(/name is empty/);
      const large = campaign(name, 'x'.repeat(1025));
      const largeEnd = await large.outcome;
      expect(largeEnd.code).toBe(status.INVALID_ARGUMENT);
      expect(largeEnd.details).toMatch(/value is 1025 bytes/);
    });
  });
}

/** The first term an Observe from term 1 replays, after its `history_gone` if any. */
async function historyFirst(elections: ElectionCaller, name: string): Promise<bigint | undefined> {
  const replay = elections.observe(name, 1n);
  try {
    for (;;) {
      const event = await replay.next();
      if (event.$case === 'term') return event.value.term;
      if (event.$case === 'vacant') return undefined;
    }
  } finally {
    replay.cancel();
  }
}

describe('an election on ZooKeeper through two instances on the same root', () => {
  let one: ServerProcess;
  let two: ServerProcess;
  let viaOne: ElectionCaller;
  let viaTwo: ElectionCaller;
  const root = `/election-two-${randomUUID()}`;

  beforeAll(async () => {
    [one, two] = await Promise.all([
      startServerProcess(['--zookeeper', connectString, '--root', root]),
      startServerProcess(['--zookeeper', connectString, '--root', root]),
    ]);
    viaOne = new ElectionCaller(one.address);
    viaTwo = new ElectionCaller(two.address);
  });
  afterAll(async () => {
    viaOne?.close();
    viaTwo?.close();
    await Promise.all([one?.kill('SIGTERM'), two?.kill('SIGTERM')]);
  });

  it('answers the same through either: Leader, Observe, Proclaim and Resign reach a leader served by the other', async () => {
    const name = `e-${randomUUID()}`;
    const observer = viaTwo.observe(name);
    expect(await observer.next()).toEqual({ $case: 'vacant', value: { afterTerm: 0n } });
    const a = viaOne.campaign({ name, value: Buffer.from('a') });
    const termA = await a.elected();
    const b = viaTwo.campaign({ name, value: Buffer.from('b') });
    expect(await b.next()).toEqual({ $case: 'queued', value: { ahead: 1 } });
    expect(await observer.next()).toMatchObject({ $case: 'term', value: { term: termA } });
    expect((await viaTwo.leader(name)).leader!.term).toBe(termA);

    await viaTwo.proclaim(name, termA, 'a2');
    expect(await observer.next()).toEqual({
      $case: 'proclaimed',
      value: { term: termA, value: Buffer.from('a2') },
    });
    expect(text((await viaOne.leader(name)).leader!.value)).toBe('a2');

    await viaTwo.resign(name, termA);
    expect((await a.outcome).code).toBe(status.ABORTED);
    const termB = await b.elected();
    expect(termB).toBeGreaterThan(termA);
    const next = await observer.next();
    // The end of A's term may be seen before B's began, or together with it.
    if (next.$case === 'vacant') {
      expect(next.value.afterTerm).toBe(termA);
      expect(await observer.next()).toMatchObject({ $case: 'term', value: { term: termB } });
    } else {
      expect(next).toMatchObject({ $case: 'term', value: { term: termB } });
    }
    b.resign();
    await b.outcome;
    observer.cancel();
  });
});

describe('elections on ZooKeeper through the addon client', () => {
  let server: ServerProcess;
  let elections: ElectionCaller;

  beforeAll(async () => {
    server = await startServerProcess([
      '--zookeeper',
      connectString,
      '--zookeeper-client',
      'addon',
      '--root',
      `/election-addon-${randomUUID()}`,
    ]);
    elections = new ElectionCaller(server.address);
  });
  afterAll(async () => {
    elections?.close();
    await server?.kill('SIGTERM');
  });

  it('are refused with UNIMPLEMENTED, naming what is missing, and leave nothing queued', async () => {
    const name = `e-${randomUUID()}`;
    const candidate = elections.campaign({ name });
    const ended = await candidate.outcome;
    expect(ended.code).toBe(status.UNIMPLEMENTED);
    expect(ended.details).toMatch(/--zookeeper-client protocol/);
    for (const call of [
      elections.leader(name),
      elections.proclaim(name, 1n, 'x'),
      elections.resign(name, 1n),
    ]) {
      expect((await refusal(call)).code).toBe(status.UNIMPLEMENTED);
    }
    const observer = elections.observe(name);
    expect((await observer.outcome).code).toBe(status.UNIMPLEMENTED);
    const locks = new LockCaller(server.address);
    expect((await locks.describe(name)).waiters).toEqual([]);
    locks.close();
  });
});

describe('a leader whose instance dies (SIGKILL), on ZooKeeper', () => {
  let victim: ServerProcess;
  let survivor: ServerProcess;
  const root = `/election-failover-${randomUUID()}`;

  beforeAll(async () => {
    [victim, survivor] = await Promise.all([
      startServerProcess(['--zookeeper', connectString, '--root', root]),
      startServerProcess(['--zookeeper', connectString, '--root', root]),
    ]);
  });
  afterAll(async () => {
    await Promise.all([victim?.kill('SIGKILL'), survivor?.kill('SIGTERM')]);
  });

  it('keeps its term when it resumes on another instance within its grace; the next candidate is not elected meanwhile', async () => {
    const name = `e-${randomUUID()}`;
    const viaVictim = new ElectionCaller(victim.address);
    const viaSurvivor = new ElectionCaller(survivor.address);
    try {
      const leader = viaVictim.campaign({ name, value: Buffer.from('a'), resumeGrace: seconds(30) });
      const resumable = await leader.next();
      const term = await leader.elected();
      const next = viaSurvivor.campaign({ name, value: Buffer.from('b') });
      expect(await next.next()).toEqual({ $case: 'queued', value: { ahead: 1 } });
      const observer = viaSurvivor.observe(name);
      expect(await observer.next()).toMatchObject({ $case: 'term', value: { term } });

      await victim.kill('SIGKILL');
      await leader.outcome;
      const token = resumable.$case === 'resumable' ? resumable.value.resumeToken : '';
      const resumed = viaSurvivor.client.campaign();
      const elected = new Promise<bigint>((resolve, reject) => {
        resumed.on('data', (message: { kind?: { $case: string; value: { term?: bigint } } }) => {
          if (message.kind?.$case === 'elected') resolve(message.kind.value.term!);
        });
        resumed.on('error', reject);
      });
      resumed.write({
        kind: { $case: 'resume', value: { resumeToken: token, heartbeatInterval: undefined } },
      });
      expect(await elected).toBe(term);
      expect((await viaSurvivor.leader(name)).leader!.term).toBe(term);
      // Still the same term for everyone: the waiting candidate was not elected meanwhile, and
      // the observer saw no vacancy.
      expect(next.messages.all.map((m) => m.kind?.$case)).toEqual(['queued']);
      expect(observer.events.all.map((e) => e.$case)).toEqual(['term']);

      resumed.write({ kind: { $case: 'resign', value: {} } });
      const nextTerm = await next.elected();
      expect(nextTerm).toBeGreaterThan(term);
      // The handover may be seen with or without a vacancy in between.
      let event = await observer.next();
      if (event.$case === 'vacant') event = await observer.next();
      expect(event).toMatchObject({ $case: 'term', value: { term: nextTerm } });
      next.resign();
      await next.outcome;
      observer.cancel();
    } finally {
      viaVictim.close();
      viaSurvivor.close();
    }
  });
});
