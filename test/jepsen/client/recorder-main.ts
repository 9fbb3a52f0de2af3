/**
 * A lock client in a process of its own (usually on a test host of its own), which takes
 * locks through lockstream's TypeScript SDK and records, on its own monotonic clock, what it
 * asked and what it was told: one JSON line per event on stdout, in the history format of
 * test/jepsen/checker (README there). It believes it holds a lock from `acquired` until it asks
 * to release it, is told the lock is lost, or is told it is in doubt (a careful holder stops
 * there, and goes on only if the lock is confirmed again).
 *
 *   recorder-main.ts --client c1 --servers A[,B...] --locks L1[,L2...] [--mode write]
 *     [--limit N] [--hold-ms MIN[-MAX]] [--pause-ms MIN[-MAX]] [--wait-timeout-ms N]
 *     [--count N] [--time-ms N] [--ignore-in-doubt]
 *
 * It loops until `--time-ms` has passed, `--count` holds were taken, or stdin closes: it picks
 * a lock, acquires it, holds it for a random time in `--hold-ms`, releases it and pauses.
 * `--ignore-in-doubt` is a planted bug: the client records no doubt and holds on (see
 * test/jepsen/README.md). CLOCK_MONOTONIC is the machine's: every process's times compare.
 */
import { parseArgs } from 'node:util';
import { LockClient, type Lock, type LockMode } from '../../../src/client/index.js';

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
    'ignore-in-doubt': { type: 'boolean', default: false },
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
const ignoreInDoubt = values['ignore-in-doubt'];

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

function describe(error: unknown): string {
  if (error && typeof error === 'object' && 'code' in error && 'message' in error)
    return `${String((error as { code: unknown }).code)}: ${String((error as { message: unknown }).message)}`;
  return String(error);
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

const lockClient = new LockClient(required('servers').split(','));

async function holdOnce(lock: string): Promise<void> {
  const acquireOp = (ops += 1);
  // The checker knows a mutex as what it is: an exclusive (write) lock.
  const recorded = mode === 'mutex' ? 'write' : mode;
  const shape = { f: 'acquire', lock, mode: recorded, ...(limit === undefined ? {} : { limit }) };
  record({ op: acquireOp, type: 'invoke', ...shape });
  let held: Lock;
  // Told before `acquire` resolves, as after: recorded once the grant is.
  let doubted = false;
  try {
    held = await lockClient.acquire(lock, {
      mode,
      ...(limit === undefined ? {} : { limit }),
      waitTimeout,
      signal: stop.signal,
      // Not part of the history: a line on stderr for tests that wait for a queue to form.
      onQueued: (ahead) => process.stderr.write(`queued ${ahead} ${lock}\n`),
      onInDoubt: () => {
        if (ignoreInDoubt) return;
        doubted = true;
        record({ op: (ops += 1), type: 'event', f: 'in_doubt', lock });
      },
      onConfirmed: () => {
        if (ignoreInDoubt || !doubted) return;
        doubted = false;
        record({ op: (ops += 1), type: 'event', f: 'confirmed', lock });
      },
    });
  } catch (error) {
    record({ op: acquireOp, type: 'fail', ...shape, error: describe(error) });
    return;
  }
  record({ op: acquireOp, type: 'ok', ...shape, token: held.token.toString() });
  let releasing = false;
  held.lost.addEventListener(
    'abort',
    () => {
      if (!releasing)
        record({ op: (ops += 1), type: 'event', f: 'lost', lock, error: describe(held.lost.reason) });
    },
    { once: true },
  );
  await nap(holdMs(), held.lost);
  if (held.lost.aborted) return;
  releasing = true;
  const releaseOp = (ops += 1);
  record({ op: releaseOp, type: 'invoke', f: 'release', lock });
  try {
    await held.release();
    record({ op: releaseOp, type: 'ok', f: 'release', lock });
  } catch (error) {
    record({ op: releaseOp, type: 'info', f: 'release', lock, error: describe(error) });
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
