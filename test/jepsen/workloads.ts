/**
 * What each workload's clients do: the recorder options (client/recorder.ts) of a lock client,
 * of an election's candidate or observer, and of an incrementer of guarded records and
 * PostgreSQL counters, given where the client runs (cluster.ts starts each on a host of its
 * own); and the workload each planted bug needs.
 */
import type { RecorderOptions } from './client/recorder.js';

/** What the clients do: take locks, campaign for and observe an election, or increment counters. */
export type Workload = 'locks' | 'elections' | 'records';
/** The election of the elections workload. */
export const ELECTION = 'e0';

/** Each planted bug, and the workload that exposes it. */
const BUG_WORKLOADS = {
  'released-early': 'locks',
  'follower-reads': 'locks',
  'ignore-lost': 'locks',
  'elected-early': 'elections',
  'observer-skips': 'elections',
  'unguarded-records': 'records',
} as const satisfies Record<string, Workload>;
export type PlantedBug = keyof typeof BUG_WORKLOADS;
export const PLANTED_BUGS = Object.keys(BUG_WORKLOADS) as PlantedBug[];
/**
 * Planted in the server (LOCKSTREAM_PLANTED_BUG, src/server/planted-bugs.ts); the others in a
 * client. unguarded-records is in both: its PostgreSQL half is the incrementers' (`unfenced`).
 */
export const SERVER_BUGS: ReadonlySet<PlantedBug> = new Set([
  'released-early',
  'follower-reads',
  'elected-early',
  'observer-skips',
  'unguarded-records',
]);

/** The workload a planted bug needs. */
export function bugWorkload(bug: PlantedBug): Workload {
  return BUG_WORKLOADS[bug];
}

/** Where a client runs: the instances, and how it reaches them from its host. */
export interface Placement {
  /** The instances' names, in order (s1, s2, s3). */
  readonly instances: readonly string[];
  /** Every instance's address as the client reaches it, starting at instance `first`. */
  servers(first: number): string[];
  /** Instance `index`'s address as the client reaches it (through its delay proxy, if any). */
  reach(index: number): string;
  /** Instance `index`'s own address (around the delay proxy). */
  direct(index: number): string;
  /** The records workload's PostgreSQL (a connection string), if it runs one. */
  readonly postgres?: string | undefined;
}

/** A client's recorder options, but its name. */
type RoleOptions = Omit<RecorderOptions, 'client'>;

/**
 * Client i of the locks workload: its role cycles through a mutex writer (locks m0..), a reader
 * or writer of one read/write lock (rw), and a holder of a semaphore of 2 (sem); its instance
 * list starts at instance floor(i / 3) mod 3, so each instance serves every role. Planted bugs
 * that need a holder to hold on through a fault (follower-reads, ignore-lost) get roles of their own.
 */
export function lockClient(
  i: number,
  at: Placement,
  locks: number,
  plant: PlantedBug | undefined,
): RoleOptions {
  const first = Math.floor(i / 3) % at.instances.length;
  const servers = at.servers(first);
  const mutexes = Array.from({ length: Math.max(1, locks) }, (_, k) => `m${k}`);
  const role: Omit<RecorderOptions, 'client' | 'servers'> =
    i % 3 === 0
      ? { locks: mutexes, mode: 'write', holdMs: '20-1000' }
      : i % 3 === 1
        ? { locks: ['rw'], mode: Math.floor(i / 3) % 2 === 0 ? 'read' : 'write', holdMs: '50-1000' }
        : { locks: ['sem'], mode: 'semaphore', limit: 2, holdMs: '100-3000' };
  if (plant !== 'follower-reads' && plant !== 'ignore-lost')
    return { ...role, servers, pauseMs: '20-300', waitTimeoutMs: 10_000 };
  // Bugs that show only when a holder on s1 (the nemeses' focus) holds on through a fault while
  // a client of another instance waits: c1, on s1 alone, holds the mutex m0 for 10-15 s at a
  // time; the clients of s2 and s3 take it briefly in between and wait long; s1's other clients
  // keep to m1, out of the way.
  return {
    locks: [i === 0 || first !== 0 ? 'm0' : 'm1'],
    mode: 'write',
    holdMs: i === 0 ? '10000-15000' : '100-500',
    servers: i === 0 ? [at.direct(0)] : servers,
    pauseMs: '20-300',
    waitTimeoutMs: 30_000,
    ignoreLost: plant === 'ignore-lost' && i === 0,
  };
}

/** How candidates campaign and lead (recorder-main.ts's options of the same names). */
export interface ElectionRoleOptions {
  /** How long a leader leads (default 200-2500 ms), unless a quick term (a moment). */
  readonly holdMs?: string;
  /** Between a candidate's campaigns (default 100-1000 ms). */
  readonly pauseMs?: string;
  readonly graceMs?: number;
  readonly quick?: number;
  readonly stale?: number;
  /** How long an observer keeps a stream before starting another (recorder default 5000-20000 ms). */
  readonly observeMs?: string;
  /**
   * The instances (by name) whose campaigns ask for the grace; the others' do not. Unset: half
   * of all campaigns at random. Keeping the two apart per instance avoids the known takeover
   * bug (README: "Elections"), which needs both kinds in one instance's ZooKeeper session.
   */
  readonly graceInstances?: readonly string[];
}

/**
 * Election client i of its role (candidate `c<i+1>` or observer `o<i+1>`) of the election
 * ELECTION: its instance list starts at instance i mod 3 (each instance serves both roles).
 */
export function electionClient(
  role: 'candidate' | 'observer',
  i: number,
  at: Placement,
  election: ElectionRoleOptions,
): RoleOptions {
  const graceServers = election.graceInstances?.map((instance) => {
    const index = at.instances.indexOf(instance);
    if (index < 0) throw new Error(`graceInstances: no instance ${instance}`);
    return at.reach(index);
  });
  return {
    role,
    locks: [ELECTION],
    servers: at.servers(i % at.instances.length),
    waitTimeoutMs: 30_000,
    ...(graceServers === undefined ? {} : { graceServers }),
    holdMs: election.holdMs ?? '200-2500',
    pauseMs: election.pauseMs ?? '100-1000',
    ...(election.graceMs === undefined ? {} : { graceMs: election.graceMs }),
    ...(election.quick === undefined ? {} : { quick: election.quick }),
    ...(election.stale === undefined ? {} : { stale: election.stale }),
    ...(election.observeMs === undefined ? {} : { observeMs: election.observeMs }),
  };
}

/** How incrementers work (recorder-main.ts's options of the same names; README: "Records"). */
export interface RecordsRoleOptions {
  /** Counters per lock (default 2). */
  readonly keys?: number;
  /** Increments per hold, `min-max` (default 1-3). */
  readonly increments?: string;
  /** Between an increment's read and its write, `min-max` ms (default 20-200). */
  readonly thinkMs?: string;
  /** The incrementers' resume grace (default RECORDS_GRACE_MS). */
  readonly graceMs?: number;
}

/**
 * The incrementers' resume grace: short, so that a holder paused for a fault period (4.5 s or
 * more) has lost its hold well before it wakes (heartbeats every grace / 5; the server notices
 * a silent client after 3 of them, then keeps its request for the grace).
 */
export const RECORDS_GRACE_MS = 1_500;

/** The mutexes of the records workload (`locks` of them), whose counters are incremented. */
export function recordLocks(locks: number): string[] {
  return Array.from({ length: Math.max(1, locks) }, (_, k) => `r${k}`);
}

/**
 * Incrementer i of the records workload (client/record-increments.ts): the mutexes r0.., each
 * with its counters, in guarded records and in PostgreSQL (if the run has it; written without
 * the fence when `unguarded-records` is planted); its instance list starts at instance i mod 3
 * (each instance serves some).
 */
export function incrementer(
  i: number,
  at: Placement,
  locks: number,
  records: RecordsRoleOptions,
  plant: PlantedBug | undefined,
): RoleOptions {
  return {
    ...(at.postgres === undefined ? {} : { postgres: at.postgres }),
    unfenced: plant === 'unguarded-records',
    role: 'incrementer',
    locks: recordLocks(locks),
    servers: at.servers(i % at.instances.length),
    pauseMs: '20-300',
    waitTimeoutMs: 10_000,
    graceMs: records.graceMs ?? RECORDS_GRACE_MS,
    ...(records.keys === undefined ? {} : { keys: records.keys }),
    ...(records.increments === undefined ? {} : { increments: records.increments }),
    ...(records.thinkMs === undefined ? {} : { thinkMs: records.thinkMs }),
  };
}
