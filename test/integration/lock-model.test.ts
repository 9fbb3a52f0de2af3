import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { LockMode } from '../../src/gen/lockstream/v1/lockstream.js';
import {
  LockCaller,
  seconds,
  type CallOutcome,
  type LockRpc,
  type RequestStream,
} from '../support/lock-caller.js';
import { LockModel, type ModelMode, type ModelRequest } from '../support/lock-model.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

/**
 * Model-based: random sequences of requests (mutex, read, write; waiting or trying), releases
 * (half-close) and cancels, on two lock names from clients on two connections, run against a
 * lockstream server in its own process and against LockModel. After every step each request's
 * messages must be what the model says: held ones got `acquired`, waiting ones got `queued` with
 * the number ahead when they joined, then (eventually) with the number ahead now, and no grant; ended ones the status of how they ended; and tokens grow with
 * the order requests were made. A failure prints fast-check's seed and the shrunk sequence:
 * keep it below as a regression case. LOCKSTREAM_MODEL_RUNS runs more sequences (the default
 * suits CI).
 */

const RUNS = Number(process.env['LOCKSTREAM_MODEL_RUNS'] ?? 25);
const LOCKS = 2;
const CLIENTS = 2;
/** How long the server may take to say what the model expects: a bound against hanging, not a speed check. */
const ANSWER_BOUND_MS = 10_000;

const WIRE_MODE: Record<ModelMode, LockMode> = {
  mutex: LockMode.MUTEX,
  read: LockMode.READ,
  write: LockMode.WRITE,
};

/** The system under test for one sequence: its clients and the stream of each request, by model id. */
interface Real {
  readonly prefix: string;
  readonly callers: LockCaller[];
  readonly streams: RequestStream[];
}

async function within<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`no answer within ${ANSWER_BOUND_MS} ms: ${what}`)),
          ANSWER_BOUND_MS,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

const EXPECTED_STATUS = {
  released: grpc.status.OK,
  withdrawn: grpc.status.CANCELLED,
  cancelled: grpc.status.CANCELLED,
  'not-free': grpc.status.DEADLINE_EXCEEDED,
} as const;

/** Awaits what the model says every request has been told by now, and checks it. */
async function agree(model: LockModel, real: Real): Promise<void> {
  const tokens = new Map<number, bigint>();
  for (const request of model.requests) {
    const stream = real.streams[request.id]!;
    const label = describeRequest(request);
    if (request.end !== undefined) {
      const outcome: CallOutcome = await within(stream.outcome, `${label} to end (${request.end})`);
      expect(outcome.code, `${label}: ${outcome.details}`).toBe(EXPECTED_STATUS[request.end]);
      const kinds = stream.messages.map((m) => m.kind?.$case);
      if (request.end === 'released') expect(kinds.at(-1), label).toBe('released');
      if (request.end === 'not-free' || request.end === 'withdrawn')
        expect(stream.isAcquired, label).toBe(false);
    } else if (request.held) {
      tokens.set(request.id, await within(stream.acquired(), `${label} to be granted`));
    } else {
      const ahead = await within(stream.queued(), `${label} to be queued`);
      expect(ahead, `${label}: requests ahead when it joined`).toBe(request.firstAhead);
      // `queued` again whenever the number ahead changes: the latest one is the number now.
      const now = model.ahead(request.id);
      await within(latestQueued(stream, now), `${label} to be told it has ${now} ahead`);
      expect(stream.isAcquired, `${label} must not hold yet`).toBe(false);
    }
  }
  // Fencing: a request made later has a larger token, whatever the order of the grants.
  for (const request of model.requests) {
    const stream = real.streams[request.id]!;
    if (stream.isAcquired && !tokens.has(request.id)) tokens.set(request.id, await stream.acquired());
  }
  const granted = [...tokens].sort(([a], [b]) => a - b);
  for (let i = 1; i < granted.length; i += 1) {
    expect(
      granted[i]![1],
      `token of request ${granted[i]![0]} after request ${granted[i - 1]![0]}'s`,
    ).toBeGreaterThan(granted[i - 1]![1]);
  }
}

/** Resolves once the latest `queued` the stream received says `ahead`. */
async function latestQueued(stream: RequestStream, ahead: number): Promise<void> {
  for (let index = 0; ; index += 1) {
    // The index-th `queued` message: resolves when it has arrived, so this follows the updates.
    const told = await stream.queued(index);
    const later = stream.messages.filter((m) => m.kind?.$case === 'queued').length > index + 1;
    if (!later && told === ahead) return;
  }
}

function describeRequest(request: ModelRequest): string {
  return `request ${request.id} (${request.mode} on lock ${request.lock})`;
}

class Open implements fc.AsyncCommand<LockModel, Real> {
  constructor(
    readonly lock: number,
    readonly mode: ModelMode,
    readonly tryOnly: boolean,
    readonly client: number,
  ) {}

  check(): boolean {
    return true;
  }

  async run(model: LockModel, real: Real): Promise<void> {
    const lock = `${real.prefix}/${this.lock}`;
    model.open(lock, this.mode, this.tryOnly);
    real.streams.push(
      real.callers[this.client]!.open({
        name: lock,
        mode: WIRE_MODE[this.mode],
        ...(this.tryOnly ? { waitTimeout: seconds(0) } : {}),
      }),
    );
    await agree(model, real);
  }

  toString(): string {
    return `open(lock ${this.lock}, ${this.mode}${this.tryOnly ? ', try' : ''}, client ${this.client})`;
  }
}

/** Ends one live request (the `pick`-th, modulo how many are live) by half-close or cancel. */
class End implements fc.AsyncCommand<LockModel, Real> {
  constructor(
    readonly how: 'halfClose' | 'cancel',
    readonly pick: number,
  ) {}

  check(model: Readonly<LockModel>): boolean {
    return model.live.length > 0;
  }

  async run(model: LockModel, real: Real): Promise<void> {
    const live = model.live;
    const { id } = live[this.pick % live.length]!;
    if (this.how === 'halfClose') {
      model.halfClose(id);
      real.streams[id]!.halfClose();
    } else {
      const { lock } = model.requests[id]!;
      model.cancel(id);
      real.streams[id]!.cancel();
      // A cancel is not acknowledged: a client cannot know when the server has acted on it, so
      // the next step waits until the lock's queue shows it has (it is as short as the model's).
      const watch = real.callers[0]!.watch(lock);
      try {
        const left = model.queue(lock).length;
        await within(
          watch.until((state) => state.holders.length + state.waiters.length === left),
          `the server to act on the cancel of request ${id}`,
        );
      } finally {
        watch.cancel();
      }
    }
    await agree(model, real);
  }

  toString(): string {
    return `${this.how}(live #${this.pick})`;
  }
}

const commands = [
  fc
    .tuple(
      fc.integer({ min: 0, max: LOCKS - 1 }),
      fc.constantFrom<ModelMode>('mutex', 'read', 'write'),
      fc.boolean(),
      fc.integer({ min: 0, max: CLIENTS - 1 }),
    )
    .map(([lock, mode, tryOnly, client]) => new Open(lock, mode, tryOnly, client)),
  fc.integer({ min: 0, max: 7 }).map((pick) => new End('halfClose', pick)),
  fc.integer({ min: 0, max: 7 }).map((pick) => new End('cancel', pick)),
];

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

for (const store of ['embedded', 'zookeeper'] as const) {
  for (const rpc of ['acquire', 'session'] as const satisfies LockRpc[]) {
    describe(`the lock model against a server on the ${store} store, over ${rpc}`, () => {
      let server: ServerProcess;

      beforeAll(async () => {
        server = await startServerProcess(
          store === 'embedded' ? [] : ['--zookeeper', connectString, '--root', `/model-${randomUUID()}`],
        );
      });
      afterAll(async () => {
        await server?.kill('SIGTERM');
      });

      it('tells every client what the model says, after every step of random sequences', async () => {
        await fc.assert(
          fc.asyncProperty(fc.commands(commands, { maxCommands: 40 }), async (sequence) => {
            const callers = Array.from(
              { length: CLIENTS },
              () => new LockCaller(server.address, { 'grpc.use_local_subchannel_pool': 1 }, undefined, rpc),
            );
            const real: Real = { prefix: `model/${randomUUID()}`, callers, streams: [] };
            try {
              await fc.asyncModelRun(() => ({ model: new LockModel(), real }), sequence);
            } finally {
              for (const stream of real.streams) stream.cancel();
              for (const caller of callers) caller.close();
            }
          }),
          // Shrinking a failure re-runs sequences that may wait out ANSWER_BOUND_MS: bound the
          // whole search so the counterexample and seed are reported before the test's timeout.
          { numRuns: RUNS, interruptAfterTimeLimit: 90_000, markInterruptAsFailure: true },
        );
      }, 150_000);
    });
  }
}
