/**
 * One run of the partition suite (`npm run jepsen`, and test/jepsen/jepsen.test.ts): starts the
 * cluster (cluster.ts), lets the clients take locks while a schedule of faults (nemeses.ts)
 * alternates with heal periods, heals everything, stops the clients, and has the independent
 * checker (test/jepsen/checker) judge the history they recorded.
 *
 * The elections workload (`workload: 'elections'`; jepsen-elections.test.ts) runs candidates
 * and observers of one election instead (client/election-roles.ts), then replays the election's
 * whole history as the checker's reference, and judges with the leaders' loss rule
 * (`--doubt-ends-hold`: a leader believes it leads from `elected` until told in_doubt or lost),
 * and again with the strict rule as a second opinion (report-strict.html).
 *
 * The records workload (`workload: 'records'`; jepsen-records.test.ts) has incrementers append
 * their ids under mutexes to guarded records and to PostgreSQL counters written through fenced
 * transactions (client/record-increments.ts), pauses them between a read and its write
 * (writer-pauses.ts), reads every counter at the end, and has the checker judge the final values
 * against what each increment was told (no update lost or made twice), store by store.
 */
import { appendFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { mulberry32 } from '../support/random.js';
import { check, type NemesisEvent, type Verdict } from './checker-run.js';
import { Cluster } from './cluster.js';
import type { HistoryEvent } from './client/recorder.js';
import { makeNemesis, type NemesisName } from './nemeses.js';
import { describeNemesisFigures, nemesisFigures } from './nemesis-figures.js';
import { POSTGRES_STORE } from './client/postgres-counters.js';
import {
  ELECTION,
  type ElectionRoleOptions,
  type PlantedBug,
  type RecordsRoleOptions,
  type Workload,
} from './workloads.js';

export interface JepsenOptions {
  /** Seconds of load under the nemesis schedule (setup and the final checks come on top). */
  readonly timeS: number;
  readonly nemeses: readonly NemesisName[];
  readonly plant?: PlantedBug | undefined;
  readonly seed: number;
  /** Where the history, schedule, report and logs go. */
  readonly out: string;
  readonly clients: number;
  /** Plain mutex locks. */
  readonly locks: number;
  /** locks (the default), elections (candidates and observers of one election) or records. */
  readonly workload?: Workload;
  /** Records: how incrementers work (counters per lock, increments per hold, thinking, grace). */
  readonly records?: RecordsRoleOptions;
  /** Elections: how many candidates (default 5) and observers (default 3). */
  readonly candidates?: number;
  readonly observers?: number;
  /** Elections: how candidates lead (hold times, quick terms, grace, stale calls). */
  readonly election?: ElectionRoleOptions;
  /** Elections: fewer terms in the history than this make the run meaningless. Default max(10, timeS / 4). */
  readonly minTerms?: number;
  /** How long a fault lasts, and a heal period between faults: [min, max] ms. */
  readonly faultMs?: readonly [number, number];
  readonly healMs?: readonly [number, number];
  /** Fewer grants than this make the run meaningless. Default max(10, timeS / 2). */
  readonly minGrants?: number;
  /** Every nemesis asked for must have been applied at least once, or the run is meaningless. */
  readonly requireEveryNemesis?: boolean;
  /** Progress lines (also written to run.log in `out`). */
  readonly log?: (line: string) => void;
}

export interface JepsenResult {
  readonly out: string;
  readonly verdict: Verdict;
  /** Acquires granted (acquire ok), over every client. */
  readonly grants: number;
  /** Checks answered (CheckToken). */
  readonly checks: number;
  /** Elections: terms in the election's history (the reference), and whether it was pruned. */
  readonly terms?: number | undefined;
  readonly pruned?: boolean | undefined;
  /** Elections: the strict loss rule's verdict, a second opinion (in_doubt does not end a term). */
  readonly strict?: Verdict | undefined;
  /** Records: the checker's figures over every counter (undefined if it printed none). */
  readonly records?: RecordsFigures | undefined;
  /** Records: the checker's figures per store (`records`, `pg`). */
  readonly stores?: Readonly<Record<string, RecordsFigures>> | undefined;
  /** How many times each nemesis was applied. */
  readonly applied: Readonly<Record<string, number>>;
  /** Why the run proves nothing, if it does not (too few grants, a crash, a nemesis never run). */
  readonly problems: readonly string[];
  /** 0: no anomaly (or, with a plant, the plant caught) in a meaningful run. */
  readonly exitCode: number;
  /** The last line to print: `<n> operations, <k> anomalies`. */
  readonly summary: string;
}

/** The records workload's figures, from the checker's `records:` line (or a `store <name>:` line). */
export interface RecordsFigures {
  readonly increments: number;
  readonly acknowledged: number;
  /** Acknowledged after another client had been granted the lock since (the planted bug's mark). */
  readonly lateAccepted: number;
  readonly failed: number;
  readonly unknown: number;
  /**
   * Writes refused by the guard after another client had been granted the lock: not the
   * holder's (guarded records), a stale token (PostgreSQL, StaleTokenError).
   */
  readonly lateRefused: number;
  /** Ids in the final values. */
  readonly final: number;
  readonly lost: number;
  readonly duplicated: number;
}

const DEFAULT_FAULT_MS: readonly [number, number] = [5_000, 10_000];
const DEFAULT_HEAL_MS: readonly [number, number] = [5_000, 10_000];
/** After healing: time for clients to notice, resume and finish their holds before they stop. */
const SETTLE_MS = 6_000;

function now(): number {
  return Number(process.hrtime.bigint());
}

export async function runJepsen(options: JepsenOptions): Promise<JepsenResult> {
  const random = mulberry32(options.seed);
  const between = ([low, high]: readonly [number, number]): number => low + random() * (high - low);
  const began = performance.now();
  await mkdir(options.out, { recursive: true });
  const runLog = path.join(options.out, 'run.log');
  const log = (line: string): void => {
    const stamped = `[${((performance.now() - began) / 1000).toFixed(1).padStart(6)} s] ${line}`;
    options.log?.(stamped);
    void appendFile(runLog, `${stamped}\n`).catch(() => {});
  };
  const elections = options.workload === 'elections';
  const records = options.workload === 'records';
  const who = elections
    ? `election ${ELECTION}: ${options.candidates ?? 5} candidates, ${options.observers ?? 3} observers`
    : records
      ? `${options.clients} incrementers of ${options.locks} mutexes`
      : `${options.clients} clients`;
  log(
    `seed ${options.seed}, ${options.timeS} s, nemeses: ${options.nemeses.join(', ') || 'none'}` +
      `${options.plant ? `, planted bug: ${options.plant}` : ''}, ${who}; out: ${options.out}`,
  );

  const cluster = await Cluster.start({
    clients: options.clients,
    workload: options.workload,
    candidates: options.candidates,
    observers: options.observers,
    election: options.election,
    records: options.records,
    locks: options.locks,
    plant: options.plant,
    clocks: options.nemeses.includes('clock'),
    delays: options.nemeses.includes('delay'),
    membership: options.nemeses.includes('membership'),
    random,
    log,
  });
  const schedule: NemesisEvent[] = [];
  const applied: Record<string, number> = Object.fromEntries(options.nemeses.map((name) => [name, 0]));
  const problems: string[] = [];
  try {
    log(
      `cluster up: ${cluster.instances.map((i) => `${i.name} ${i.address} on ${i.members.map((m) => `zk${m.id}`).join('+')}`).join('; ')}` +
        (cluster.postgres ? `; PostgreSQL ${cluster.postgres.url}` : ''),
    );
    // Planted bugs that live on s1 (its holders hold long): faults at one instance aim there.
    const focus =
      options.plant === 'follower-reads' || options.plant === 'ignore-lost'
        ? cluster.instances[0]
        : undefined;
    const ctx = { cluster, random, log, focus };
    const deadline = performance.now() + options.timeS * 1000;
    const faultMs = options.faultMs ?? DEFAULT_FAULT_MS;
    const healMs = options.healMs ?? DEFAULT_HEAL_MS;
    // Each nemesis once in a shuffled round, then the next round: every one comes up early.
    let round: NemesisName[] = [];
    for (;;) {
      // Without nemeses, the whole time is one heal period.
      const healFor = options.nemeses.length === 0 ? Infinity : between(healMs);
      await sleep(Math.min(healFor, Math.max(0, deadline - performance.now())));
      if (options.nemeses.length === 0 || performance.now() + faultMs[0] > deadline) break;
      if (round.length === 0) round = shuffle([...options.nemeses], random);
      const name = round.shift()!;
      const nemesis = makeNemesis(name);
      const startedAt = now();
      let detail: string;
      try {
        detail = await nemesis.start(ctx);
      } catch (error) {
        log(`nemesis ${name} could not start: ${String(error)}`);
        await nemesis.stop(ctx).catch(() => {});
        continue;
      }
      applied[name] = (applied[name] ?? 0) + 1;
      schedule.push({ t: startedAt, type: 'start', nemesis: name, detail });
      log(`start ${name}: ${detail}`);
      await sleep(Math.min(between(faultMs), Math.max(faultMs[0], deadline - performance.now())));
      try {
        await nemesis.stop(ctx);
      } catch (error) {
        problems.push(`nemesis ${name} could not be undone: ${String(error)}`);
        log(`nemesis ${name} could not be undone: ${String(error)}`);
      }
      schedule.push({ t: now(), type: 'stop', nemesis: name });
      log(`stop ${name}`);
    }

    log('healing everything; letting the clients finish');
    await healEverything(cluster, log);
    await sleep(SETTLE_MS);
    await cluster.stopClients();
    if (elections) {
      log("replaying the election's history (the reference)");
      await cluster
        .recordReference(random)
        .catch((error: unknown) => problems.push(`no reference history: ${String(error)}`));
    }
    if (records) {
      log('reading every record (the final values)');
      await cluster.readRecords().catch((error: unknown) => problems.push(`no final read: ${String(error)}`));
    }
    await cluster.writeLogs(path.join(options.out, 'logs'));
  } finally {
    await cluster.stop();
  }

  const history = cluster.history();
  const grants = history.filter((e) => e.f === 'acquire' && e.type === 'ok').length;
  const checks = history.filter((e) => e.f === 'check' && e.type === 'ok').length;
  log(`${history.length} history lines, ${grants} grants, ${checks} checks answered; checking`);
  // Elections: a leader believes it leads until told in_doubt or lost (the leaders' loss rule);
  // the strict rule (in_doubt does not end it, as lockstream promises locks) as a second opinion.
  const verdict = await check(
    options.out,
    history,
    schedule,
    elections ? { args: ['--doubt-ends-hold'] } : {},
  );
  const strict = elections
    ? await check(options.out, history, schedule, { report: 'report-strict' })
    : undefined;
  for (const line of describeNemesisFigures(nemesisFigures(history, schedule))) log(line);

  let terms: number | undefined;
  let pruned: boolean | undefined;
  if (elections) {
    ({ terms, pruned } = referenceTerms(history));
    log(
      `election ${ELECTION}: ${terms} terms in the history${pruned ? ' (pruned: the first left it)' : ''}, ` +
        `${grants} told elected; strict loss rule: ${strict?.anomalies} anomalies`,
    );
    const minTerms = options.minTerms ?? Math.max(10, Math.round(options.timeS / 4));
    if (terms < minTerms) problems.push(`only ${terms} terms (at least ${minTerms} wanted)`);
  } else {
    const minGrants = options.minGrants ?? Math.max(10, Math.round(options.timeS / 2));
    if (grants < minGrants) problems.push(`only ${grants} grants (at least ${minGrants} wanted)`);
  }
  const figures = records ? recordsFigures(verdict.stdout, 'records') : undefined;
  const stores: Record<string, RecordsFigures> = {};
  if (records) {
    const minimum = options.minGrants ?? Math.max(10, Math.round(options.timeS / 2));
    for (const store of ['records', ...(cluster.postgres ? [POSTGRES_STORE] : [])]) {
      const found = recordsFigures(verdict.stdout, `store ${store}`);
      if (found) stores[store] = found;
      if ((found?.acknowledged ?? 0) < minimum)
        problems.push(
          `only ${found?.acknowledged ?? 0} increments of ${store} acknowledged (at least ${minimum} wanted)`,
        );
    }
  }
  problems.push(...cluster.crashes().map((crash) => `crashed: ${crash}`));
  if (verdict.exitCode === 2 || Number.isNaN(verdict.anomalies))
    problems.push(`the checker could not decide (exit ${verdict.exitCode})`);
  if (options.requireEveryNemesis) {
    for (const [name, count] of Object.entries(applied))
      if (count === 0) problems.push(`nemesis ${name} was never applied`);
  }
  const anomalies = Number.isNaN(verdict.anomalies) ? 0 : verdict.anomalies;
  const exitCode = problems.length > 0 ? 2 : options.plant ? (anomalies > 0 ? 0 : 1) : anomalies > 0 ? 1 : 0;
  return {
    out: options.out,
    verdict,
    grants,
    checks,
    ...(elections ? { terms, pruned, strict } : {}),
    ...(records ? { records: figures, stores } : {}),
    applied,
    problems,
    exitCode,
    summary: `${verdict.operations} operations, ${verdict.anomalies} anomalies`,
  };
}

/** The reference's terms (the election's history): how many, and whether it said history_gone. */
function referenceTerms(history: readonly HistoryEvent[]): { terms: number; pruned: boolean } {
  const reference = history.filter((e) => e.client === 'reference');
  const stream = reference.find((e) => e.f === 'observe' && e.type === 'invoke' && e.reference)?.op;
  const told = reference.filter((e) => e.op === stream && e.type === 'event');
  return {
    terms: told.filter((e) => e.f === 'term').length,
    pruned: told.some((e) => e.f === 'history_gone'),
  };
}

/** The figures of the checker's line `<what>: ...` (`records`, or `store <name>`; checker/README.md, "Records"). */
function recordsFigures(stdout: string, what: string): RecordsFigures | undefined {
  const pattern = new RegExp(
    `^${what}: (\\d+) increments: (\\d+) acknowledged \\((\\d+) late\\), (\\d+) failed .*?(\\d+) late\\), ` +
      `(\\d+) unknown .*; final values: (\\d+) ids .*; (\\d+) lost, (\\d+) duplicated`,
    'm',
  );
  const figures = pattern.exec(stdout)?.slice(1).map(Number);
  if (figures === undefined) return undefined;
  const [increments, acknowledged, lateAccepted, failed, lateRefused, unknown, final, lost, duplicated] =
    figures as [number, number, number, number, number, number, number, number, number];
  return { increments, acknowledged, lateAccepted, failed, unknown, lateRefused, final, lost, duplicated };
}

/** Heals every cut and loss rule; resumes paused members, restarts killed ones. */
async function healEverything(cluster: Cluster, log: (line: string) => void): Promise<void> {
  await cluster.network.healAll();
  for (const slot of cluster.clients) if (slot.pausedAt !== undefined) await cluster.resumeClient(slot);
  for (const member of cluster.ensemble.members) {
    if (member.paused) member.resume();
    if (member.pid === null) await member.restart();
  }
  for (const slot of cluster.clients) if (slot.proxy) cluster.setDelay(slot, 0);
  for (const instance of cluster.instances) {
    if (instance.killing) await cluster.restartInstance(instance);
    else if (instance.clock && instance.clock.offset !== '+0') await instance.clock.step('+0');
  }
  await cluster.ensemble
    .waitForQuorum()
    .catch((error: unknown) => log(`no quorum after healing: ${String(error)}`));
}

function shuffle<T>(items: T[], random: () => number): T[] {
  for (let i = items.length - 1; i > 0; i -= 1) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}
