/**
 * The records workload's roles (recorder-main.ts --role incrementer|final-reader), recording
 * history lines of test/jepsen/checker (README there: "Records").
 *
 * - **incrementer**: takes a mutex of `--locks` (through the SDK, recorded as the lock role
 *   records its holds: lock-recording.ts), and while it holds it makes one to `--increments`
 *   increments, each of a random counter `k0..` of that lock: it reads the counter (the list of
 *   the ids of the increments applied to it), records a `read` event, thinks for `--think-ms`,
 *   then writes the list with its own id appended, as the holder, in one of the counter stores
 *   at random: guarded records (counter-stores.ts) and, given `--postgres`, a PostgreSQL table
 *   through fenced transactions (postgres-counters.ts; `--unfenced`, the planted run's, without
 *   the fence). It never looks whether it still holds the lock between its read and its
 *   write: a holder paused there (SIGSTOP, the `pause-writer` nemesis) writes late, after its
 *   hold has ended, and only the store's guard can refuse it. Each increment is recorded with
 *   its outcome: `ok` (acknowledged), `fail` (definitely not applied: refused, or never sent),
 *   `info` (unknown: UNAVAILABLE, a timeout, the SDK's "outcome unknown"). After any outcome but
 *   `ok` it stops using the hold (an unknown write may still land: no later write of the same
 *   hold may follow it), releases it and takes a lock again.
 * - **final-reader**: at the end, reads every record through every server and every PostgreSQL
 *   counter once (`final` ops, the value and its version): the checker judges the history
 *   against the latest of them.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { LockClient } from '../../../src/client/index.js';
import { guardedRecordsStore, type CounterStore, type Holder } from './counter-stores.js';
import { acquireRecorded, describe, type RecordedHold, type Recording } from './lock-recording.js';
import { postgresCounterStore } from './postgres-counters.js';

/** What the records roles get from recorder-main: where to go, what to do, how to record. */
export interface RecordsContext extends Recording {
  readonly client: string;
  readonly servers: readonly string[];
  /** The mutexes whose counters it increments. */
  readonly locks: readonly string[];
  /** Counters per lock: `k0` .. `k<keys-1>`. */
  readonly keys: number;
  /** How many increments to make per hold. */
  readonly increments: () => number;
  /** Between an increment's read and its write, ms. */
  readonly thinkMs: () => number;
  /** Between two holds, ms. */
  readonly pauseMs: () => number;
  readonly waitTimeoutMs: number;
  /** The LockClient's resume grace: a paused holder's hold ends this long after the server notices. */
  readonly graceMs: number;
  /** The PostgreSQL store's connection string; without it, guarded records alone. */
  readonly postgres: string | undefined;
  /** The planted run's: PostgreSQL counters written in plain transactions, not fenced ones. */
  readonly unfenced: boolean;
  readonly deadline: number;
  /** Aborted when the recorder is told to stop (stdin closed). */
  readonly stopped: AbortSignal;
  nap(ms: number, signal?: AbortSignal): Promise<void>;
}

/** An increment's read, or its write once sent, unanswered this long: given up (fail, or info once sent). */
const CALL_TIMEOUT_MS = 5_000;
/** The final read of a counter through one server: tries before it gives up. */
const FINAL_TRIES = 5;

function pick<T>(items: readonly T[]): T {
  return items[Math.floor(Math.random() * items.length)]!;
}

/** The stores the counters are incremented in: guarded records through `client`, and PostgreSQL. */
function counterStores(ctx: RecordsContext, client: LockClient): CounterStore[] {
  const postgres = ctx.postgres;
  if (postgres === undefined) return [guardedRecordsStore(client)];
  return [guardedRecordsStore(client), postgresCounterStore(postgres, { fenced: !ctx.unfenced })];
}

function keysOf(ctx: RecordsContext): string[] {
  return Array.from({ length: Math.max(1, ctx.keys) }, (_, k) => `k${k}`);
}

export async function runIncrementer(ctx: RecordsContext): Promise<void> {
  const client = new LockClient([...ctx.servers], { resumeGraceMs: ctx.graceMs });
  const stores = counterStores(ctx, client);
  const keys = keysOf(ctx);
  while (!ctx.stopped.aborted && performance.now() < ctx.deadline) {
    const hold = await acquireRecorded(client, ctx, pick(ctx.locks), {
      mode: 'mutex',
      waitTimeout: ctx.waitTimeoutMs,
      signal: ctx.stopped,
    });
    if (hold) await useHold(ctx, hold, stores, keys);
    await ctx.nap(ctx.pauseMs());
  }
  for (const store of stores) store.close();
  client.close();
}

/** Increments counters of the hold's lock, then releases it (unless it was told lost). */
async function useHold(
  ctx: RecordsContext,
  hold: RecordedHold,
  stores: readonly CounterStore[],
  keys: readonly string[],
): Promise<void> {
  const holder: Holder = { lock: hold.held.name, token: hold.held.token };
  const count = Math.max(1, Math.round(ctx.increments()));
  for (let i = 0; i < count && !ctx.stopped.aborted; i += 1) {
    // A careful holder starts nothing on a lock it was told it lost; what it started, it finishes.
    if (hold.held.lost.aborted) return;
    if ((await increment(ctx, pick(stores), holder, pick(keys))) !== 'ok') break;
  }
  if (!hold.held.lost.aborted) await hold.release();
}

/** One increment: recorded as an invoke, a `read` event, and its outcome. */
async function increment(
  ctx: RecordsContext,
  store: CounterStore,
  holder: Holder,
  key: string,
): Promise<'ok' | 'fail' | 'info'> {
  const op = ctx.nextOp();
  const id = `${ctx.client}:${op}`;
  const shape = { f: 'increment', store: store.name, lock: holder.lock, key, id };
  ctx.record({ op, type: 'invoke', ...shape, token: holder.token.toString() });
  // One timer at a time: over the read, then (after the thinking) over the write in flight.
  let sent = false;
  let abandoned = false;
  let timer: NodeJS.Timeout | undefined;
  let expire: (reason: Error) => void = () => {};
  const expired = new Promise<never>((_, reject) => (expire = reject));
  const arm = (what: string): void => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      abandoned = true;
      expire(new Error(`${what}: no answer within ${CALL_TIMEOUT_MS} ms`));
    }, CALL_TIMEOUT_MS);
  };
  arm('the read');
  const appended = store.append(holder, key, id, async (current) => {
    clearTimeout(timer);
    if (abandoned) throw new Error('not sent: the read was given up');
    ctx.record({
      op,
      type: 'event',
      f: 'read',
      store: store.name,
      lock: holder.lock,
      key,
      length: current.ids.length,
      revision: current.revision,
    });
    // Not cut short by a stop: the write goes out late, if the process was paused meanwhile.
    await sleep(ctx.thinkMs());
    sent = true;
    arm('the write');
  });
  appended.catch(() => {});
  try {
    const revision = await Promise.race([appended, expired]);
    ctx.record({ op, type: 'ok', ...shape, revision });
    return 'ok';
  } catch (error) {
    if (!sent) {
      ctx.record({ op, type: 'fail', ...shape, error: `not sent: ${describe(error)}` });
      return 'fail';
    }
    const { type, code } = abandoned ? { type: 'info' as const, code: 'TIMEOUT' } : store.judge(error);
    ctx.record({ op, type, ...shape, code, error: describe(error) });
    return type;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Reads every counter of every lock, each recorded as a `final` op with where it was read, the
 * value and its version: the records through every server, the PostgreSQL counters once (one
 * database); a read that fails is tried again (a new op).
 */
export async function runFinalReader(ctx: RecordsContext): Promise<void> {
  for (const server of ctx.servers) {
    const client = new LockClient([server]);
    await readCounters(ctx, guardedRecordsStore(client), server);
    client.close();
  }
  if (ctx.postgres !== undefined) {
    const store = postgresCounterStore(ctx.postgres, { fenced: true });
    await readCounters(ctx, store, ctx.postgres);
    store.close();
  }
}

async function readCounters(ctx: RecordsContext, store: CounterStore, server: string): Promise<void> {
  for (const lock of ctx.locks) {
    for (const key of keysOf(ctx)) {
      for (let tries = 1; tries <= FINAL_TRIES; tries += 1) {
        const op = ctx.nextOp();
        const shape = { f: 'final', store: store.name, lock, key, server };
        ctx.record({ op, type: 'invoke', ...shape });
        try {
          const { ids, revision } = await store.read(lock, key);
          ctx.record({ op, type: 'ok', ...shape, value: ids, revision });
          break;
        } catch (error) {
          ctx.record({ op, type: 'fail', ...shape, error: describe(error) });
          await sleep(500);
        }
      }
    }
  }
}
