/**
 * A lock client in a process of its own (usually on a test host of its own), which takes
 * locks through lockstream's TypeScript SDK and records, on its own monotonic clock, what it
 * asked and what it was told: one JSON line per event on stdout, in the history format of
 * test/jepsen/checker (README there). It believes it holds a lock from `acquired` until it asks
 * to release it or is told the lock is lost (the strict loss rule: being told it is in doubt
 * does not end a hold; it is recorded, as is its confirmation).
 *
 *   recorder-main.ts --client c1 --servers A[,B...] --locks L1[,L2...] [--mode write]
 *     [--limit N] [--hold-ms MIN[-MAX]] [--pause-ms MIN[-MAX]] [--wait-timeout-ms N]
 *     [--count N] [--time-ms N] [--no-check] [--ignore-lost]
 *     [--role lock|candidate|observer|reference|incrementer|final-reader] [--grace-ms N]
 *     [--quick P] [--stale P] [--observe-ms MIN[-MAX]] [--grace-servers A[,B...]]
 *     [--keys N] [--increments MIN[-MAX]] [--think-ms MIN[-MAX]] [--postgres URL] [--unfenced]
 *
 * It loops until `--time-ms` has passed, `--count` holds were taken, or stdin closes: it picks
 * a lock, acquires it, asks the server whether its token is held (CheckToken, recorded as a
 * `check`), holds it for a random time in `--hold-ms`, releases it, asks again right after the
 * release returned (now the token must not be held) and pauses. `--no-check` leaves the checks
 * out. `--ignore-lost` is a planted bug: told its lock is lost, the client holds on to the end
 * of its hold time and only then records the loss (see test/jepsen/README.md).
 * CLOCK_MONOTONIC is the machine's: every process's times compare.
 *
 * `--role` other than `lock` (the default) makes it a client of an election instead, the first
 * of `--locks` (client/election-roles.ts): a `candidate` (campaigns, with a resume grace of
 * `--grace-ms` half the time, leads for `--hold-ms`, a moment only with probability `--quick`,
 * resigns; with `--grace-servers`, the campaigns that start on those servers ask for the grace
 * and the others do not), an `observer` (Observe streams), or the `reference` (the whole history, once);
 * candidates and observers now and then proclaim or resign a term that is over (probability
 * `--stale` per chance); an observer cancels each stream after `--observe-ms` to start another.
 *
 * `--role incrementer` or `final-reader` is a client of the records workload
 * (client/record-increments.ts): it increments counters (`--keys` per lock of `--locks`, a few
 * `--increments` per hold, `--think-ms` between each one's read and its write, a resume grace of
 * `--grace-ms`; in guarded records and, given `--postgres`, in PostgreSQL through fenced
 * transactions, plain ones with `--unfenced`), or reads them all at the end.
 */
import { parseArgs } from 'node:util';
import { LockClient, type LockMode } from '../../../src/client/index.js';
import { runCandidate, runObserver, runReference } from './election-roles.js';
import { acquireRecorded, describe } from './lock-recording.js';
import { runFinalReader, runIncrementer } from './record-increments.js';

const { values } = parseArgs({
  options: {
    client: { type: 'string' },
    servers: { type: 'string' },
    locks: { type: 'string' },
    mode: { type: 'string', default: 'write' },
    limit: { type: 'string' },
    'hold-ms': { type: 'string', default: '20-200' },
    'pause-ms': { type: 'string', default: '0-50' },
    'wait-timeout-ms': { type: 'string', default: '10000' },
    count: { type: 'string' },
    'time-ms': { type: 'string' },
    'no-check': { type: 'boolean', default: false },
    'ignore-lost': { type: 'boolean', default: false },
    role: { type: 'string', default: 'lock' },
    'grace-ms': { type: 'string', default: '3000' },
    quick: { type: 'string', default: '0.2' },
    stale: { type: 'string', default: '0.3' },
    'observe-ms': { type: 'string', default: '5000-20000' },
    'grace-servers': { type: 'string' },
    keys: { type: 'string', default: '2' },
    increments: { type: 'string', default: '1-3' },
    'think-ms': { type: 'string', default: '20-200' },
    postgres: { type: 'string' },
    unfenced: { type: 'boolean', default: false },
  },
});

function required(name: 'client' | 'servers' | 'locks'): string {
  const value = values[name];
  if (value === undefined || value === '') throw new Error(`--${name} is required`);
  return value;
}

function range(text: string): () => number {
  const [low, high] = text.split('-').map(Number);
  if (low === undefined || Number.isNaN(low)) throw new Error(`not a range: ${text}`);
  const top = high ?? low;
  return () => low + Math.random() * (top - low);
}

const client = required('client');
const locks = required('locks').split(',');
const mode = values.mode as LockMode;
const limit = values.limit === undefined ? undefined : Number(values.limit);
const holdMs = range(values['hold-ms']);
const pauseMs = range(values['pause-ms']);
const waitTimeout = Number(values['wait-timeout-ms']);
const count = values.count === undefined ? Infinity : Number(values.count);
const deadline = values['time-ms'] === undefined ? Infinity : performance.now() + Number(values['time-ms']);
const checks = !values['no-check'];
const ignoreLost = values['ignore-lost'];
/** A check that gets no answer in this long is recorded as `info` (its outcome unknown). */
const CHECK_TIMEOUT_MS = 5_000;

let stopping = false;
let wake: (() => void) | undefined;
/** Gives up a pending acquire when the recorder is told to stop. */
const stop = new AbortController();
process.stdin.on('close', () => {
  stopping = true;
  stop.abort();
  wake?.();
});
process.stdin.resume();

let ops = 0;
function record(event: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify({ t: Number(process.hrtime.bigint()), client, ...event })}\n`);
}

/** Sleeps `ms`, or less if the recorder is told to stop; true if it was. */
function nap(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      wake = undefined;
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, Math.min(ms, deadline - performance.now())));
    signal?.addEventListener('abort', done, { once: true });
    wake = done;
  });
}

/** Sleeps `ms` (not past the deadline), or less once the recorder is told to stop or `signal` aborts. */
function roleNap(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const signals = [stop.signal, ...(signal ? [signal] : [])];
    const done = (): void => {
      clearTimeout(timer);
      for (const s of signals) s.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, Math.min(ms, deadline - performance.now())));
    for (const s of signals) s.addEventListener('abort', done, { once: true });
    if (signals.some((s) => s.aborted)) done();
  });
}

const role = values.role;
const recording = { record, nextOp: () => (ops += 1) };
const electionRoles = { candidate: runCandidate, observer: runObserver, reference: runReference } as const;
const recordsRoles = { incrementer: runIncrementer, 'final-reader': runFinalReader } as const;
if (role in electionRoles) {
  await electionRoles[role as keyof typeof electionRoles]({
    client,
    servers: required('servers').split(','),
    election: locks[0]!,
    holdMs,
    pauseMs,
    waitTimeoutMs: waitTimeout,
    graceMs: Number(values['grace-ms']),
    graceServers: values['grace-servers']?.split(','),
    quick: Number(values.quick),
    stale: Number(values.stale),
    observeMs: range(values['observe-ms']),
    deadline,
    stopped: stop.signal,
    ...recording,
    nap: roleNap,
  });
  process.exit(0);
} else if (role in recordsRoles) {
  await recordsRoles[role as keyof typeof recordsRoles]({
    client,
    servers: required('servers').split(','),
    locks,
    keys: Number(values.keys),
    increments: range(values.increments),
    thinkMs: range(values['think-ms']),
    pauseMs,
    waitTimeoutMs: waitTimeout,
    graceMs: Number(values['grace-ms']),
    postgres: values.postgres,
    unfenced: values.unfenced,
    deadline,
    stopped: stop.signal,
    ...recording,
    nap: roleNap,
  });
  process.exit(0);
} else if (role !== 'lock') {
  throw new Error(
    `--role ${role}: expected lock, candidate, observer, reference, incrementer or final-reader`,
  );
}

const lockClient = new LockClient(required('servers').split(','));

async function holdOnce(lock: string): Promise<void> {
  const hold = await acquireRecorded(lockClient, recording, lock, {
    mode,
    limit,
    waitTimeout,
    signal: stop.signal,
    ignoreLost,
  });
  if (!hold) return;
  const { held } = hold;
  await checkToken(lock, held.token);
  // A client that ignores its loss sleeps its whole hold time through, as if it still held.
  await nap(holdMs(), ignoreLost ? undefined : held.lost);
  if (held.lost.aborted) {
    if (ignoreLost && !hold.releasing)
      record({
        op: (ops += 1),
        type: 'event',
        f: 'lost',
        lock,
        error: `ignored until the hold's end: ${describe(held.lost.reason)}`,
      });
    return;
  }
  if (!(await hold.release())) return;
  // Released: from now on no server may say this token is held.
  await checkToken(lock, held.token);
}

/** Asks whether `token` holds `lock` now, and records the question and the answer (`check`). */
async function checkToken(lock: string, token: bigint): Promise<void> {
  if (!checks) return;
  const op = (ops += 1);
  const shape = { f: 'check', lock, token: token.toString() };
  record({ op, type: 'invoke', ...shape });
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timed out'>((resolve) => {
    timer = setTimeout(() => resolve('timed out'), CHECK_TIMEOUT_MS);
  });
  try {
    const answer = await Promise.race([lockClient.checkToken(lock, token), timedOut]);
    if (answer === 'timed out')
      record({ op, type: 'info', ...shape, error: `no answer within ${CHECK_TIMEOUT_MS} ms` });
    else record({ op, type: 'ok', ...shape, held: answer });
  } catch (error) {
    // A read changes nothing: one that failed did not happen.
    record({ op, type: 'fail', ...shape, error: describe(error) });
  } finally {
    clearTimeout(timer);
  }
}

let holds = 0;
while (!stopping && holds < count && performance.now() < deadline) {
  const lock = locks[Math.floor(Math.random() * locks.length)]!;
  await holdOnce(lock);
  holds += 1;
  await nap(pauseMs());
}
lockClient.close();
process.exit(0);
