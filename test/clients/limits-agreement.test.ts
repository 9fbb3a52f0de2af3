import { scaled } from '../support/timing.js';
import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LockMode, type AcquireStart, type LockTarget } from '../../src/gen/lockstream/v1/lockstream.js';
import { readLimits } from '../../scripts/gen-limits.js';
import { LockCaller, type RequestStream } from '../support/lock-caller.js';
import { RecordCaller } from '../support/record-caller.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { Driver, prepareDrivers, type ClientLanguage, type Received } from './harness.js';
import type { ClientOptions, Command } from './protocol.js';

/**
 * The limits table (proto/lockstream/v1/limits.json) against the server and each client, at
 * every limit's boundary: a value at the limit is accepted, one past it is refused with
 * INVALID_ARGUMENT, and a client refuses it itself, before anything is sent. The numbers come
 * from the table, not from any generated file: a constant changed by hand anywhere (a client's
 * or the server's) makes one side disagree.
 *
 * A client refusing a request "itself" is told apart from one passing the server's refusal on
 * by freezing the connection between them (a TCP proxy that stops forwarding) while the requests
 * one past the limits are made: a request that reached the wire gets no answer. Client options
 * (heartbeat interval, resume grace) are refused when the client is made, before it connects.
 */

const CLIENTS: readonly ClientLanguage[] = ['typescript', 'go', 'python'];

const LIMITS = new Map(readLimits().map((limit) => [limit.name, limit.value]));

type RequestCommand = Extract<Command, { op: 'acquire' } | { op: 'acquire-all' }>;
type RecordCommand = Extract<Command, { op: 'put-record' }>;
type Shape = Pick<AcquireStart, 'name' | 'mode'> & Partial<AcquireStart>;

/** One way a limit shows: what is asked with a value `n`, by a client and on the wire. */
type Boundary = {
  /** The table's name of the limit. */
  readonly limit: string;
  /** A minimum is passed by going under it, a maximum by going over. */
  readonly bound: 'min' | 'max';
  /** What the value measures, for the results: "name of 512 bytes". */
  readonly what: (n: number) => string;
} & (
  | {
      /** A lock request (`name`: a fresh lock name to start from). */
      readonly kind: 'request';
      readonly command: (n: number, name: string, id: string) => RequestCommand;
      readonly start: (n: number, name: string) => Shape;
    }
  | {
      /** A client option, checked when the client is made; the server sees it on each stream. */
      readonly kind: 'option';
      readonly options: (n: number) => ClientOptions;
      readonly start: (n: number, name: string) => Shape;
    }
  | {
      /**
       * A guarded record's write, by the holder of `token` (decimal) of lock `name`: checked by
       * clients and the server alike (`put`: the key and value the server is sent).
       */
      readonly kind: 'record';
      readonly command: (n: number, name: string, token: string, id: string) => RecordCommand;
      readonly put: (n: number) => { readonly key: string; readonly value: Buffer };
    }
  | {
      /**
       * Only the server checks it (clients send back what it gave them, or make their own):
       * `answer` is the status name the server ends the call with, OK if it does not.
       */
      readonly kind: 'server';
      readonly answer: (server: ServerProcess, n: number) => Promise<string>;
      /** What the server answers at the limit, and one past it. */
      readonly answers: { readonly at: string; readonly past: string };
    }
);

const duration = (ms: number): { seconds: bigint; nanos: number } => ({
  seconds: BigInt(Math.floor(ms / 1000)),
  nanos: (ms % 1000) * 1e6,
});

/** `name` made exactly `n` bytes long (ASCII). */
const sized = (name: string, n: number): string => name.padEnd(n, 'n').slice(0, n);

const names = (name: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${name}/${i}`);

const mutex = (name: string): Shape => ({ name, mode: LockMode.MUTEX });

/** A mutex of a multi-lock. */
const target = (name: string): LockTarget => ({ name, mode: LockMode.MUTEX, limit: 0 });

const BOUNDARIES: readonly Boundary[] = [
  {
    limit: 'LOCK_NAME_MAX_BYTES',
    bound: 'max',
    what: (n) => `a name of ${n} bytes`,
    kind: 'request',
    command: (n, name, id) => ({ op: 'acquire', id, name: sized(name, n) }),
    start: (n, name) => mutex(sized(name, n)),
  },
  {
    limit: 'OWNER_MAX_BYTES',
    bound: 'max',
    what: (n) => `an owner of ${n} bytes`,
    kind: 'request',
    command: (n, name, id) => ({ op: 'acquire', id, name, owner: 'o'.repeat(n) }),
    start: (n, name) => ({ ...mutex(name), owner: 'o'.repeat(n) }),
  },
  {
    limit: 'VALUE_MAX_BYTES',
    bound: 'max',
    what: (n) => `a value of ${n} bytes`,
    kind: 'request',
    command: (n, name, id) => ({ op: 'acquire', id, name, value: 'v'.repeat(n) }),
    start: (n, name) => ({ ...mutex(name), value: Buffer.alloc(n, 'v') }),
  },
  {
    limit: 'MULTI_LOCK_MIN',
    bound: 'min',
    what: (n) => `a multi-lock of ${n}`,
    kind: 'request',
    command: (n, name, id) => ({ op: 'acquire-all', id, names: names(name, n) }),
    start: (n, name) => ({ name: '', mode: LockMode.UNSPECIFIED, locks: names(name, n).map(target) }),
  },
  {
    limit: 'MULTI_LOCK_MAX',
    bound: 'max',
    what: (n) => `a multi-lock of ${n}`,
    kind: 'request',
    command: (n, name, id) => ({ op: 'acquire-all', id, names: names(name, n) }),
    start: (n, name) => ({ name: '', mode: LockMode.UNSPECIFIED, locks: names(name, n).map(target) }),
  },
  {
    limit: 'SEMAPHORE_LIMIT_MAX',
    bound: 'max',
    what: (n) => `a semaphore of limit ${n}`,
    kind: 'request',
    command: (n, name, id) => ({ op: 'acquire', id, name, mode: 'semaphore', limit: n }),
    start: (n, name) => ({ name, mode: LockMode.SEMAPHORE, limit: n }),
  },
  {
    limit: 'WAIT_TIMEOUT_MAX_MS',
    bound: 'max',
    what: (n) => `a wait timeout of ${n} ms`,
    kind: 'request',
    command: (n, name, id) => ({ op: 'acquire', id, name, timeoutMs: n }),
    start: (n, name) => ({ ...mutex(name), waitTimeout: duration(n) }),
  },
  {
    limit: 'WAIT_TIMEOUT_MAX_MS',
    bound: 'max',
    what: (n) => `a resume grace of ${n} ms`,
    kind: 'option',
    options: (n) => ({ resumeGraceMs: n }),
    start: (n, name) => ({ ...mutex(name), resumeGrace: duration(n) }),
  },
  {
    limit: 'HEARTBEAT_INTERVAL_MIN_MS',
    bound: 'min',
    what: (n) => `a heartbeat interval of ${n} ms`,
    kind: 'option',
    options: (n) => ({ heartbeatIntervalMs: n }),
    start: (n, name) => ({ ...mutex(name), heartbeatInterval: duration(n) }),
  },
  {
    limit: 'HEARTBEAT_INTERVAL_MAX_MS',
    bound: 'max',
    what: (n) => `a heartbeat interval of ${n} ms`,
    kind: 'option',
    options: (n) => ({ heartbeatIntervalMs: n }),
    start: (n, name) => ({ ...mutex(name), heartbeatInterval: duration(n) }),
  },
  {
    limit: 'RESUME_TOKEN_MAX_BYTES',
    bound: 'max',
    what: (n) => `a resume token of ${n} bytes`,
    kind: 'server',
    // An unknown token at the limit is looked up (NOT_FOUND); one past it is not.
    answer: async (server, n) => {
      const caller = new LockCaller(server.address);
      try {
        return grpc.status[(await caller.resume('t'.repeat(n)).outcome).code] ?? 'UNKNOWN';
      } finally {
        caller.close();
      }
    },
    answers: { at: 'NOT_FOUND', past: 'INVALID_ARGUMENT' },
  },
  {
    limit: 'RECORD_KEY_MAX_BYTES',
    bound: 'max',
    what: (n) => `a record key of ${n} bytes`,
    kind: 'record',
    command: (n, name, token, id) => ({ op: 'put-record', id, name, key: 'k'.repeat(n), value: 'v', token }),
    put: (n) => ({ key: 'k'.repeat(n), value: Buffer.from('v') }),
  },
  {
    limit: 'RECORD_VALUE_MAX_BYTES',
    bound: 'max',
    what: (n) => `a record value of ${n} bytes`,
    kind: 'record',
    command: (n, name, token, id) => ({ op: 'put-record', id, name, key: 'k', value: 'v'.repeat(n), token }),
    put: (n) => ({ key: 'k', value: Buffer.alloc(n, 'v') }),
  },
  {
    limit: 'RECORD_REQUEST_ID_MAX_BYTES',
    bound: 'max',
    what: (n) => `a record request id of ${n} bytes`,
    kind: 'server',
    answer: (server, n) =>
      asHolder(server, (records, name, token) =>
        records.put(name, 'k', 'v', token, undefined, 'i'.repeat(n)),
      ),
    answers: { at: 'OK', past: 'INVALID_ARGUMENT' },
  },
  {
    limit: 'RECORDS_PER_LOCK_MAX',
    bound: 'max',
    what: (n) => `record number ${n} of a lock`,
    kind: 'server',
    // The n-th record of one lock: the ones before it are written first.
    answer: (server, n) =>
      asHolder(server, async (records, name, token) => {
        for (let i = 1; i < n; i += 100) {
          const batch = Array.from({ length: Math.min(100, n - i) }, (_, j) => `k${i + j}`);
          await Promise.all(batch.map((key) => records.put(name, key, '', token)));
        }
        return records.put(name, `k${n}`, '', token);
      }),
    answers: { at: 'OK', past: 'RESOURCE_EXHAUSTED' },
  },
];

/**
 * What the server answers `write`, made as the holder of a fresh mutex: OK, or the status name
 * of its refusal.
 */
async function asHolder(
  server: ServerProcess,
  write: (records: RecordCaller, name: string, token: bigint) => Promise<unknown>,
): Promise<string> {
  const locks = new LockCaller(server.address);
  const records = new RecordCaller(server.address);
  const name = lockName('server-records');
  const held = locks.open(mutex(name));
  try {
    const token = await held.acquired();
    return await write(records, name, token).then(
      () => 'OK',
      (error: grpc.ServiceError) => grpc.status[error.code] ?? 'UNKNOWN',
    );
  } finally {
    held.cancel();
    locks.close();
    records.close();
  }
}

/** The boundary's two values: at the limit, and one past it. */
function values(boundary: Boundary): { at: number; past: number } {
  const at = LIMITS.get(boundary.limit);
  if (at === undefined) throw new Error(`${boundary.limit} is not in the limits table`);
  return { at, past: boundary.bound === 'max' ? at + 1 : at - 1 };
}

/** A boundary's value in the results: "VALUE_MAX_BYTES: a value of 1025 bytes". */
function label(boundary: Boundary, n: number): string {
  return `${boundary.limit}: ${boundary.what(n)}`;
}

/** The accepted/refused expectation for each of `boundaries`, at and past its limit. */
function expected(
  boundaries: readonly Boundary[],
  refused: string,
): { at: Record<string, string>; past: Record<string, string> } {
  const at: Record<string, string> = {};
  const past: Record<string, string> = {};
  for (const boundary of boundaries) {
    at[label(boundary, values(boundary).at)] = 'accepted';
    past[label(boundary, values(boundary).past)] = refused;
  }
  return { at, past };
}

/** How a client answered a request: accepted (acquired, written), or its failure's kind and words. */
function answer(outcome: Received): string {
  if (outcome.event === 'acquired' || outcome.event === 'record-written') return 'accepted';
  return 'kind' in outcome ? `${outcome.kind}: ${outcome.message}` : outcome.event;
}

/** A fresh lock name for a boundary's requests. */
function lockName(who: string): string {
  return `limits/${who}/${randomUUID()}`;
}

beforeAll(prepareDrivers, scaled(180_000));

describe('the limits table', () => {
  it('has a boundary case here for every limit in it, and none for a limit it lacks', () => {
    expect(new Set(BOUNDARIES.map((b) => b.limit))).toEqual(new Set(LIMITS.keys()));
  });
});

describe('the server', () => {
  let server: ServerProcess;
  let caller: LockCaller;

  beforeAll(async () => {
    server = await startServerProcess([]);
    caller = new LockCaller(server.address);
  }, scaled(60_000));

  afterAll(async () => {
    caller?.client.close();
    await server?.kill('SIGTERM');
  });

  /** How the server answered: accepted (acquired), or the status of the call's end. */
  async function served(stream: RequestStream): Promise<string> {
    const outcome = await Promise.race([
      stream.acquired().then(() => undefined),
      stream.outcome.then(({ code, details }) => `${grpc.status[code]}: ${details}`),
    ]);
    if (outcome !== undefined) return outcome;
    await stream.release();
    return 'accepted';
  }

  it(
    'accepts a request at each limit of the table and refuses one past it with INVALID_ARGUMENT',
    async () => {
      const asked = BOUNDARIES.filter((b) => b.kind !== 'server');
      const results = { at: {} as Record<string, string>, past: {} as Record<string, string> };
      for (const boundary of asked) {
        const { at, past } = values(boundary);
        for (const [which, n] of [
          ['at', at],
          ['past', past],
        ] as const) {
          const answered =
            boundary.kind === 'record'
              ? await asHolder(server, (records, name, token) => {
                  const { key, value } = boundary.put(n);
                  return records.put(name, key, value, token);
                }).then((code) => (code === 'OK' ? 'accepted' : code))
              : await served(caller.open(boundary.start(n, lockName('server'))));
          results[which][label(boundary, n)] = answered.startsWith('INVALID_ARGUMENT')
            ? 'INVALID_ARGUMENT'
            : answered;
        }
      }
      expect(results).toEqual(expected(asked, 'INVALID_ARGUMENT'));
    },
    scaled(60_000),
  );

  it('answers each limit only it checks as the table says: a resume token looked up (NOT_FOUND) at its limit, a record request id and the last record of a lock taken, and each one past refused', async () => {
    const results = { at: {} as Record<string, string>, past: {} as Record<string, string> };
    const wanted = { at: {} as Record<string, string>, past: {} as Record<string, string> };
    for (const boundary of BOUNDARIES) {
      if (boundary.kind !== 'server') continue;
      for (const which of ['at', 'past'] as const) {
        const n = values(boundary)[which];
        results[which][label(boundary, n)] = await boundary.answer(server, n);
        wanted[which][label(boundary, n)] = boundary.answers[which];
      }
    }
    expect(results).toEqual(wanted);
  });
});

describe.concurrent.each(CLIENTS)('the %s client', (language) => {
  let server: ServerProcess;

  beforeAll(async () => {
    server = await startServerProcess([]);
  }, scaled(60_000));

  afterAll(async () => {
    await server?.kill('SIGTERM');
  });

  it(
    'accepts each request at its limit, and refuses one past it itself (nothing sent) with invalid-argument',
    async ({ expect, onTestFinished }) => {
      const proxy = await TcpProxy.start(server.address);
      onTestFinished(() => proxy.close());
      const driver = await Driver.start(language, proxy.address);
      onTestFinished(() => driver.stop());
      const asked = BOUNDARIES.flatMap((b) => (b.kind === 'request' || b.kind === 'record' ? [b] : []));
      const results = { at: {} as Record<string, string>, past: {} as Record<string, string> };
      // Records are written as the holder of a lock the driver holds throughout.
      const holding = lockName(language);
      driver.send({ op: 'acquire', id: 'records-holder', name: holding });
      const token = await driver.acquired('records-holder');
      const command = (boundary: (typeof asked)[number], n: number, id: string): Command =>
        boundary.kind === 'record'
          ? boundary.command(n, holding, token, id)
          : boundary.command(n, lockName(language), id);

      const atLimit = asked.map((boundary, i) => {
        const id = `at-${i}`;
        driver.send(command(boundary, values(boundary).at, id));
        return { boundary, id };
      });
      for (const { boundary, id } of atLimit) {
        const outcome = await driver.outcome(id);
        results.at[label(boundary, values(boundary).at)] = answer(outcome);
        if (outcome.event === 'acquired') await driver.release(id);
      }

      // Nothing passes the proxy now: a request the client sends gets no answer.
      proxy.freeze();
      const pastLimit = asked.map((boundary, i) => {
        const id = `past-${i}`;
        driver.send(command(boundary, values(boundary).past, id));
        return { boundary, id };
      });
      const unanswered = new Promise<undefined>((resolve) => setTimeout(resolve, scaled(3_000), undefined));
      for (const { boundary, id } of pastLimit) {
        const outcome = await Promise.race([driver.outcome(id), unanswered]);
        results.past[label(boundary, values(boundary).past)] =
          outcome === undefined
            ? 'sent to the server (no answer while the connection was frozen)'
            : outcome.event === 'error' && outcome.kind === 'invalid-argument'
              ? 'invalid-argument'
              : answer(outcome);
      }
      proxy.thaw();

      expect(results, driver.transcript()).toEqual(expected(asked, 'invalid-argument'));
    },
    scaled(60_000),
  );

  it(
    'accepts each client option at its limit, and refuses one past it when the client is made with invalid-argument',
    async ({ expect, onTestFinished }) => {
      const asked = BOUNDARIES.flatMap((b) => (b.kind === 'option' ? [b] : []));
      const results = { at: {} as Record<string, string>, past: {} as Record<string, string> };

      for (const boundary of asked) {
        const n = values(boundary).at;
        const driver = await Driver.launch(language);
        onTestFinished(() => driver.stop());
        const connected = await driver.connect(server.address, boundary.options(n));
        if (connected.event !== 'connected') {
          results.at[label(boundary, n)] = `not connected: ${answer(connected)}`;
          continue;
        }
        driver.send({ op: 'acquire', id: 'at', name: lockName(language) });
        const outcome = await driver.outcome('at');
        results.at[label(boundary, n)] = answer(outcome);
        if (outcome.event === 'acquired') await driver.release('at');
        await driver.stop();
      }

      // A connect that fails leaves the driver without a client, ready for the next.
      const driver = await Driver.launch(language);
      onTestFinished(() => driver.stop());
      for (const boundary of asked) {
        const n = values(boundary).past;
        const connected = await driver.connect(server.address, boundary.options(n));
        results.past[label(boundary, n)] =
          connected.event === 'error' && connected.kind === 'invalid-argument'
            ? 'invalid-argument'
            : connected.event === 'connected'
              ? 'connected (the client took it)'
              : answer(connected);
      }

      expect(results, driver.transcript()).toEqual(expected(asked, 'invalid-argument'));
    },
    scaled(90_000),
  );
});
