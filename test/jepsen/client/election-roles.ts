/**
 * The election roles of a recorder (recorder-main.ts --role candidate|observer|reference): a
 * client of lockstream's ElectionService through the generated gRPC client, recording what it
 * asked and what it was told as history lines of test/jepsen/checker (README there: "Elections").
 *
 * - **candidate**: campaigns through a random instance (with a resume grace or without, at
 *   random or by instance: `--grace-servers`; a broken stream resumes on the next), and once elected
 *   leads for a random time (sometimes only a moment), maybe proclaiming a value, then resigns
 *   by its stream's `resign` or by the unary Resign naming its term (even odds). A term is
 *   recorded as a hold of the election's name (acquire `ok` with the term as token); it
 *   believes it leads from `elected` until it is told otherwise: `in_doubt` (recorded; the
 *   checker's loss rule decides), the call's end (`lost`), or, with a grace, a break it could
 *   not resume within the grace less a margin. It notices a silent server itself (no message
 *   for SILENCE_MS, sooner than the server notices a silent client: 3 heartbeat intervals), and
 *   a freeze of its own process (SIGSTOP, or a loop blocked for FREEZE_MS): then it gives up
 *   what it led or waited for, as a leader that cannot know what happened meanwhile must. After
 *   its own resignation returned, it checks its term (CheckToken: not held) and now and then
 *   proclaims or resigns that term again (stale: must be refused).
 * - **observer**: one Observe stream after another, every event recorded on the stream's op; a
 *   stream that ends is opened again on the next instance from the last term it was told (told
 *   again) or the one after it, or now and then from the current state; it cancels each after
 *   a while (`--observe-ms`) on purpose, to start again.
 *   When told a term, it sometimes proclaims or resigns the term before it (over: stale).
 * - **reference**: at the end, one Observe from term 1 read until the seat is vacant and quiet:
 *   the server's whole history, the checker's reference.
 */
import * as grpc from '@grpc/grpc-js';
import {
  ElectionServiceClient,
  type CampaignRequest,
  type CampaignResponse,
  type ObserveResponse,
} from '../../../src/gen/lockstream/v1/election.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { LockClient } from '../../../src/client/index.js';

/** What every role gets from recorder-main: where to go, how to record, when to stop. */
export interface RoleContext {
  readonly client: string;
  readonly servers: readonly string[];
  readonly election: string;
  readonly holdMs: () => number;
  readonly pauseMs: () => number;
  readonly waitTimeoutMs: number;
  /** The resume grace of the campaigns that ask for one (half of them; 0: none ever does). */
  readonly graceMs: number;
  /**
   * If set, the campaigns that ask for a grace are those that start on these servers (all of
   * them), not half of all at random: see test/jepsen/README.md, "Elections" (a known bug).
   */
  readonly graceServers: readonly string[] | undefined;
  /** Probability that a term is held only for a moment (0-30 ms). */
  readonly quick: number;
  /** Probability of a stale Proclaim/Resign after a chance for one. */
  readonly stale: number;
  /** How long an observer keeps one Observe stream before it cancels it to start another. */
  readonly observeMs: () => number;
  readonly deadline: number;
  /** Aborted when the recorder is told to stop (stdin closed). */
  readonly stopped: AbortSignal;
  record(event: Record<string, unknown>): void;
  nextOp(): number;
  nap(ms: number, signal?: AbortSignal): Promise<void>;
}

/** Heartbeats both ways; the server treats a client silent for 3 intervals as gone. */
const HEARTBEAT_MS = 1_000;
/**
 * The server silent this long: the stream is broken. Sooner than the server's three intervals
 * by more than one interval (the server may have last heard the client up to an interval before
 * the client last heard it) and the freeze bound below.
 */
const SILENCE_MS = 1_250;
/** A gap this long between two turns of the event loop: the process was frozen. */
const FREEZE_MS = 400;
const TICK_MS = 50;
/** Unary calls (Proclaim, Resign, CheckToken) that get no answer in this long are `info`. */
const CALL_MS = 5_000;
/** With several endpoints, a resume attempt unanswered this long tries the next. */
const RESUME_ATTEMPT_MS = 1_000;

const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  'grpc.keepalive_time_ms': 3_000,
  'grpc.keepalive_timeout_ms': 3_000,
  'grpc.keepalive_permit_without_calls': 1,
};

/** Statuses that say the stream broke, not what the server decided (as the SDK's). */
const BREAKS: ReadonlySet<grpc.status> = new Set([
  grpc.status.UNAVAILABLE,
  grpc.status.INTERNAL,
  grpc.status.UNKNOWN,
  grpc.status.CANCELLED,
]);

function duration(ms: number): { seconds: bigint; nanos: number } {
  return { seconds: BigInt(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 };
}

function describe(error: unknown): string {
  const failed = error as { code?: unknown; details?: unknown; message?: unknown };
  if (typeof failed?.code === 'number')
    return `${grpc.status[failed.code] ?? failed.code}: ${String(failed.details ?? failed.message)}`;
  return String(error);
}

function codeName(code: number): string {
  return grpc.status[code] ?? String(code);
}

/**
 * Notices that the process was frozen: a gap of more than FREEZE_MS between two turns of the
 * event loop. Every handler calls `awake()` first, and the ticker does too, so whichever runs
 * first after a freeze tells the listeners, before anything received meanwhile is acted on.
 */
class Watchdog {
  #last = performance.now();
  readonly #listeners = new Set<(gapMs: number) => void>();
  readonly #ticker: NodeJS.Timeout;

  constructor() {
    this.#ticker = setInterval(() => this.awake(), TICK_MS);
    this.#ticker.unref();
  }

  awake(): void {
    const now = performance.now();
    const gap = now - this.#last;
    this.#last = now;
    if (gap > FREEZE_MS) for (const listener of [...this.#listeners]) listener(gap);
  }

  listen(listener: (gapMs: number) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}

const watchdog = new Watchdog();

/** One ElectionServiceClient per instance, and the one currently talked to. */
class Endpoints {
  readonly clients: ElectionServiceClient[];
  current = 0;

  constructor(readonly servers: readonly string[]) {
    this.clients = servers.map(
      (address) => new ElectionServiceClient(address, grpc.credentials.createInsecure(), CHANNEL_OPTIONS),
    );
  }

  moveOn(): void {
    this.current = (this.current + 1) % this.clients.length;
  }

  random(): ElectionServiceClient {
    return this.clients[Math.floor(Math.random() * this.clients.length)]!;
  }

  close(): void {
    for (const client of this.clients) client.close();
  }
}

function unary<T>(
  call: (deadline: Date, done: (error: grpc.ServiceError | null, value?: T) => void) => unknown,
): Promise<T> {
  return new Promise((resolve, reject) =>
    call(new Date(Date.now() + CALL_MS), (error, value) => (error ? reject(error) : resolve(value as T))),
  );
}

/**
 * Proclaims or resigns `term` through a random instance and records it (`stale`: the caller
 * believes the term over). The completion: ok, fail with the status code when the server
 * refused (FAILED_PRECONDITION and the like), info when the outcome is unknown.
 */
async function termCall(
  ctx: RoleContext,
  endpoints: Endpoints,
  f: 'proclaim' | 'resign',
  term: bigint,
  stale: boolean,
): Promise<grpc.status | 'ok' | 'unknown'> {
  const op = ctx.nextOp();
  const shape = { f, lock: ctx.election, term: term.toString() };
  ctx.record({ op, type: 'invoke', ...shape, stale });
  const client = endpoints.random();
  try {
    if (f === 'proclaim') {
      const value = Buffer.from(`${ctx.client} at ${Date.now()}`);
      await unary((deadline, done) =>
        client.proclaim({ name: ctx.election, term, value }, new grpc.Metadata(), { deadline }, done),
      );
    } else {
      await unary((deadline, done) =>
        client.resign({ name: ctx.election, term }, new grpc.Metadata(), { deadline }, done),
      );
    }
    ctx.record({ op, type: 'ok', ...shape });
    return 'ok';
  } catch (error) {
    const code = (error as grpc.ServiceError).code;
    const unknown = typeof code !== 'number' || BREAKS.has(code) || code === grpc.status.DEADLINE_EXCEEDED;
    ctx.record({
      op,
      type: unknown ? 'info' : 'fail',
      ...shape,
      ...(typeof code === 'number' ? { code: codeName(code) } : {}),
      error: describe(error),
    });
    return unknown ? 'unknown' : code;
  }
}

type Campaign = grpc.ClientDuplexStream<CampaignRequest, CampaignResponse>;
type Kind = NonNullable<CampaignResponse['kind']>;

/** How a campaign ended, for the candidate's loop. */
type Ending =
  | { readonly how: 'resigned'; readonly term: bigint } // its stream's resign returned OK
  | { readonly how: 'resigned-by-term'; readonly term: bigint }
  | { readonly how: 'lost' | 'withdrawn' | 'failed' | 'abandoned' };

/**
 * One campaign: the first call and, with a grace, the calls that resume it after a break, until
 * it resigns, is lost, withdraws or gives up. Records the acquire (invoke, then ok at `elected`
 * or a failure), in_doubt, confirmed, lost and the release.
 */
class Candidacy {
  readonly #ctx: RoleContext;
  readonly #endpoints: Endpoints;
  readonly #graceMs: number;
  readonly #op: number;
  #call: Campaign | undefined;
  #heardAt = performance.now();
  #heartbeat: NodeJS.Timeout | undefined;
  #silence: NodeJS.Timeout | undefined;
  #token: string | undefined;
  #resuming: { giveUpAt: number; attempts: number; timer: NodeJS.Timeout | undefined } | undefined;
  /** Set once elected. */
  #term: bigint | undefined;
  #doubted = false;
  /**
   * Set once it asked to resign: how, the release's op, whether that release was recorded (only
   * once elected: a candidate that withdraws while queued has nothing to release).
   */
  #resign: { how: 'stream' | 'term'; op: number; invoked: boolean; unary?: string } | undefined;
  #ended: Ending | undefined;
  readonly #done: Promise<Ending>;
  #finish!: (ending: Ending) => void;
  /** Aborted when it stops leading (or waiting): a hold in progress ends at once. */
  readonly over = new AbortController();
  readonly #unwatch: () => void;
  readonly elected: Promise<bigint | undefined>;
  #onElected!: (term: bigint | undefined) => void;

  constructor(ctx: RoleContext, endpoints: Endpoints, graceMs: number) {
    this.#ctx = ctx;
    this.#endpoints = endpoints;
    this.#graceMs = graceMs;
    this.#op = ctx.nextOp();
    this.#done = new Promise((resolve) => (this.#finish = resolve));
    this.elected = new Promise((resolve) => (this.#onElected = resolve));
    this.#unwatch = watchdog.listen((gap) => this.#frozen(gap));
    ctx.record({ op: this.#op, type: 'invoke', ...this.#shape, grace_ms: graceMs });
    this.#open(undefined);
  }

  get #shape(): { f: 'acquire'; lock: string; mode: 'write' } {
    return { f: 'acquire', lock: this.#ctx.election, mode: 'write' };
  }

  get term(): bigint | undefined {
    return this.#term;
  }

  get ended(): Promise<Ending> {
    return this.#done;
  }

  /** Leading and not given up: a hold still believed. */
  get leading(): boolean {
    return this.#term !== undefined && this.#ended === undefined && this.#resign === undefined;
  }

  #open(token: string | undefined): void {
    const client = this.#endpoints.clients[this.#endpoints.current]!;
    const call = client.campaign();
    this.#call = call;
    this.#heardAt = performance.now();
    call.on('data', (message: CampaignResponse) => {
      watchdog.awake();
      if (call === this.#call && message.kind) this.#message(message.kind);
    });
    call.on('error', () => {});
    call.on('status', (status: grpc.StatusObject) => {
      watchdog.awake();
      if (call === this.#call) this.#status(status);
    });
    const heartbeatInterval = duration(HEARTBEAT_MS);
    call.write(
      token === undefined
        ? {
            kind: {
              $case: 'start',
              value: {
                name: this.#ctx.election,
                value: Buffer.from(this.#ctx.client),
                owner: this.#ctx.client,
                waitTimeout: duration(this.#ctx.waitTimeoutMs),
                resumeGrace: this.#graceMs > 0 ? duration(this.#graceMs) : undefined,
                heartbeatInterval,
              },
            },
          }
        : { kind: { $case: 'resume', value: { resumeToken: token, heartbeatInterval } } },
    );
    clearInterval(this.#heartbeat);
    this.#heartbeat = setInterval(() => {
      if (this.#call === call) call.write({ kind: { $case: 'heartbeat', value: {} } });
    }, HEARTBEAT_MS);
    this.#watchSilence(call);
  }

  #watchSilence(call: Campaign): void {
    clearTimeout(this.#silence);
    const check = (): void => {
      watchdog.awake();
      if (call !== this.#call) return;
      const quiet = performance.now() - this.#heardAt;
      // A resume attempt with other endpoints left is bounded by RESUME_ATTEMPT_MS too.
      const allowed =
        this.#resuming && this.#endpoints.clients.length > 1
          ? Math.min(
              SILENCE_MS,
              RESUME_ATTEMPT_MS,
              Math.max(100, (this.#resuming.giveUpAt - performance.now()) / 3),
            )
          : SILENCE_MS;
      if (quiet < allowed) {
        this.#silence = setTimeout(check, Math.min(TICK_MS, allowed - quiet));
        return;
      }
      this.#broke(`no message from the server for ${Math.round(quiet)} ms`);
    };
    this.#silence = setTimeout(check, TICK_MS);
  }

  #message(kind: Kind): void {
    if (this.#ended) return;
    this.#heardAt = performance.now();
    const resumed = this.#resuming !== undefined && (kind.$case === 'queued' || kind.$case === 'elected');
    if (resumed) {
      clearTimeout(this.#resuming!.timer);
      this.#resuming = undefined;
    }
    switch (kind.$case) {
      case 'resumable':
        this.#token = kind.value.resumeToken;
        return;
      case 'elected': {
        const term = kind.value.term;
        if (this.#term === undefined) {
          this.#term = term;
          const server = this.#endpoints.servers[this.#endpoints.current];
          this.#ctx.record({ op: this.#op, type: 'ok', ...this.#shape, token: term.toString(), server });
          // Elected as it withdrew: it stops believing at once.
          if (this.#resign && !this.#resign.invoked) this.#invokeRelease(this.#resign);
          this.#onElected(term);
        } else if (term !== this.#term) {
          process.stderr.write(`resumed with term ${term}, not ${this.#term}\n`);
          this.#lose(`resumed with another term (${term}, not ${this.#term})`);
          return;
        } else {
          this.#setDoubt(false);
        }
        if (resumed) this.#sendResign();
        return;
      }
      case 'queued':
        if (resumed && this.#resign) this.#sendResign();
        return;
      case 'inDoubt':
        this.#setDoubt(true);
        return;
      case 'confirmed':
        this.#setDoubt(false);
        return;
      case 'heartbeat':
      case 'resigned': // the status follows
      case 'resignRequested':
        return;
    }
  }

  #status(status: grpc.StatusObject): void {
    if (this.#ended) return;
    const ended = status.metadata?.get('lockstream-request').includes('ended') ?? false;
    const why = `${codeName(status.code)}: ${status.details}`;
    if (status.code === grpc.status.OK) {
      this.#stopCall();
      if (this.#term === undefined) this.#end({ how: 'withdrawn' }, why, 'info');
      else this.#end({ how: 'resigned', term: this.#term }, why);
      return;
    }
    if (BREAKS.has(status.code) && !ended && this.#token !== undefined) {
      this.#broke(why);
      return;
    }
    this.#stopCall();
    // A break, or an instance unreachable or going away: the next campaign goes to the next one.
    if (BREAKS.has(status.code)) this.#endpoints.moveOn();
    if (this.#term !== undefined) {
      this.#lose(why);
      return;
    }
    if (status.code === grpc.status.CANCELLED && this.#resign) {
      this.#end({ how: 'withdrawn' }, why, 'info');
      return;
    }
    // Refused outright: never queued. Anything else may have been granted (and released) unseen.
    const definite =
      status.code === grpc.status.INVALID_ARGUMENT || status.code === grpc.status.FAILED_PRECONDITION;
    this.#end({ how: definite ? 'failed' : 'abandoned' }, why, definite ? 'fail' : 'info');
  }

  /** The call broke (or the server went silent): resumed within the grace, else given up. */
  #broke(why: string): void {
    const call = this.#call;
    this.#stopCall();
    call?.cancel();
    if (this.#ended) return;
    if (this.#token === undefined) {
      this.#endpoints.moveOn();
      if (this.#term !== undefined) this.#lose(`the stream broke (${why}), without a resume grace`);
      else this.#end({ how: 'abandoned' }, `the stream broke (${why}), without a resume grace`, 'info');
      return;
    }
    this.#setDoubt(true, why);
    if (!this.#resuming) {
      // The server counts the grace from when it noticed the break, no earlier than when it sent
      // the last message heard here: given up a margin sooner.
      const margin = Math.min(1_000, this.#graceMs / 5);
      this.#resuming = { giveUpAt: this.#heardAt + this.#graceMs - margin, attempts: 0, timer: undefined };
    }
    const resuming = this.#resuming;
    const left = resuming.giveUpAt - performance.now();
    if (left <= 0) {
      this.#giveUp(why);
      return;
    }
    clearTimeout(resuming.timer);
    resuming.timer = setTimeout(() => {
      watchdog.awake();
      if (this.#resuming === resuming) this.#giveUp(why);
    }, left);
    this.#endpoints.moveOn();
    const round = Math.floor(resuming.attempts / this.#endpoints.clients.length);
    resuming.attempts += 1;
    const backoff = round === 0 ? 0 : Math.min(1_000, 100 * 2 ** round) * Math.random();
    setTimeout(() => {
      watchdog.awake();
      if (this.#resuming === resuming && !this.#ended) this.#open(this.#token);
    }, backoff);
  }

  /** While it leads, records each change of doubt once: `in_doubt` (with `why`), or `confirmed`. */
  #setDoubt(doubted: boolean, why?: string): void {
    if (!this.leading || this.#doubted === doubted) return;
    this.#doubted = doubted;
    this.#ctx.record({
      op: this.#ctx.nextOp(),
      type: 'event',
      f: doubted ? 'in_doubt' : 'confirmed',
      lock: this.#ctx.election,
      ...(why === undefined ? {} : { error: why }),
    });
  }

  #giveUp(why: string): void {
    const call = this.#call;
    this.#stopCall();
    call?.cancel();
    const reason = `could not resume within its ${this.#graceMs} ms grace: ${why}`;
    if (this.#term !== undefined) this.#lose(reason);
    else this.#end({ how: 'abandoned' }, reason, 'info');
  }

  /** Told, or it concluded, that it no longer leads. */
  #lose(why: string): void {
    if (this.#ended) return;
    const call = this.#call;
    this.#stopCall();
    call?.cancel();
    if (this.#resign === undefined) {
      this.#ctx.record({
        op: this.#ctx.nextOp(),
        type: 'event',
        f: 'lost',
        lock: this.#ctx.election,
        error: why,
      });
      this.#end({ how: 'lost' }, why);
      return;
    }
    // Resigning: the release has its outcome (by the unary Resign, the call's end is expected).
    if (this.#resign.how === 'term' && this.#term !== undefined) {
      this.#end({ how: 'resigned-by-term', term: this.#term }, why);
      return;
    }
    this.#end({ how: 'lost' }, why);
  }

  /** The process was frozen: whatever it led or waited for may be long gone. */
  #frozen(gapMs: number): void {
    if (this.#ended) return;
    const why = `frozen for ${Math.round(gapMs)} ms (SIGSTOP, or a blocked loop): gives up what it led or waited for`;
    const call = this.#call;
    if (call && !this.#resign) call.write({ kind: { $case: 'resign', value: {} } });
    this.#stopCall();
    // A moment for the resign to go out before the call is cancelled.
    if (call) setTimeout(() => call.cancel(), 2_000).unref();
    if (this.#term !== undefined) this.#lose(why);
    else this.#end({ how: 'abandoned' }, why, 'info');
  }

  /**
   * Stops believing it leads and resigns: by its stream's `resign`, or by the unary Resign
   * naming its term. The release is recorded from here; its completion when the call ends.
   */
  resign(how: 'stream' | 'term'): void {
    if (this.#ended || this.#resign) return;
    const resign = {
      how: this.#term === undefined ? ('stream' as const) : how,
      op: this.#ctx.nextOp(),
      invoked: false,
    };
    this.#resign = resign;
    if (this.#term === undefined) {
      this.#sendResign();
      return;
    }
    this.#invokeRelease(resign);
    if (how === 'stream') {
      this.#sendResign();
      return;
    }
    const term = this.#term;
    const client = this.#endpoints.random();
    unary((deadline, done) =>
      client.resign({ name: this.#ctx.election, term }, new grpc.Metadata(), { deadline }, done),
    ).then(
      () => {
        if (this.#resign) this.#resign.unary = 'Resign returned OK';
      },
      (error: unknown) => {
        // Not resigned that way: by the stream, then.
        if (this.#resign) this.#resign.unary = `Resign failed: ${describe(error)}`;
        if (this.#resign) this.#resign.how = 'stream';
        this.#sendResign();
      },
    );
    // A stream that outlives its Resign by this long is ended by its own resign.
    setTimeout(() => {
      if (!this.#ended && this.#resign) {
        this.#resign.how = 'stream';
        this.#sendResign();
      }
    }, 2 * CALL_MS).unref();
  }

  #invokeRelease(resign: { how: string; op: number; invoked: boolean }): void {
    resign.invoked = true;
    this.#ctx.record({
      op: resign.op,
      type: 'invoke',
      f: 'release',
      lock: this.#ctx.election,
      how: resign.how,
    });
  }

  #sendResign(): void {
    if (!this.#resign || this.#resign.how !== 'stream' || !this.#call || this.#resuming) return;
    this.#call.write({ kind: { $case: 'resign', value: {} } });
  }

  /** Ends the campaign: records the acquire's or the release's outcome. */
  #end(ending: Ending, why: string, acquireType: 'fail' | 'info' = 'info'): void {
    if (this.#ended) return;
    this.#ended = ending;
    this.#stopCall();
    clearTimeout(this.#resuming?.timer);
    this.#resuming = undefined;
    this.#unwatch();
    this.over.abort();
    const lock = this.#ctx.election;
    if (this.#term === undefined) {
      this.#ctx.record({ op: this.#op, type: acquireType, ...this.#shape, error: why });
      this.#onElected(undefined);
    } else if (this.#resign?.invoked) {
      const ok = ending.how === 'resigned';
      const unary = this.#resign.unary ? `; ${this.#resign.unary}` : '';
      this.#ctx.record({
        op: this.#resign.op,
        type: ok ? 'ok' : 'info',
        f: 'release',
        lock,
        ...(ok ? {} : { error: `${why}${unary}` }),
      });
    }
    this.#finish(ending);
  }

  #stopCall(): void {
    clearInterval(this.#heartbeat);
    clearTimeout(this.#silence);
    this.#heartbeat = undefined;
    this.#call = undefined;
  }
}

/** The candidate role: campaigns one after another until told to stop. */
export async function runCandidate(ctx: RoleContext): Promise<void> {
  const endpoints = new Endpoints(ctx.servers);
  const locks = new LockClient(ctx.servers, { resumeGraceMs: 0 });
  let current: Candidacy | undefined;
  const onStop = (): void => current?.resign('stream');
  ctx.stopped.addEventListener('abort', onStop);
  try {
    while (!ctx.stopped.aborted && performance.now() < ctx.deadline) {
      // Each campaign through any instance: leaders, and both kinds of campaign, on all of them.
      endpoints.current = Math.floor(Math.random() * endpoints.servers.length);
      const server = endpoints.servers[endpoints.current]!;
      const asks = ctx.graceServers ? ctx.graceServers.includes(server) : Math.random() < 0.5;
      const grace = asks ? ctx.graceMs : 0;
      const candidacy = new Candidacy(ctx, endpoints, grace);
      current = candidacy;
      const term = await candidacy.elected;
      if (term !== undefined && candidacy.leading) await lead(ctx, endpoints, locks, candidacy, term);
      const ending = await candidacy.ended;
      current = undefined;
      if (ending.how === 'resigned') await afterResign(ctx, endpoints, locks, ending.term);
      await ctx.nap(ctx.pauseMs());
    }
  } finally {
    ctx.stopped.removeEventListener('abort', onStop);
    // Told to stop while campaigning: give the resign a moment to be answered.
    if (current) await Promise.race([current.ended, sleep(10_000)]);
    endpoints.close();
    locks.close();
  }
}

/** Leads: checks its term, maybe proclaims, holds for a while, then resigns one way or the other. */
async function lead(
  ctx: RoleContext,
  endpoints: Endpoints,
  locks: LockClient,
  candidacy: Candidacy,
  term: bigint,
): Promise<void> {
  const quick = Math.random() < ctx.quick;
  if (!quick) {
    await checkToken(ctx, locks, term);
    if (candidacy.leading && Math.random() < 0.3) await termCall(ctx, endpoints, 'proclaim', term, false);
  }
  const holdMs = quick ? 30 * Math.random() : ctx.holdMs();
  await ctx.nap(holdMs, candidacy.over.signal);
  if (!candidacy.leading) return;
  candidacy.resign(Math.random() < 0.5 ? 'stream' : 'term');
}

/** After a resignation that returned: the term is not held, and proclaiming or resigning it again is refused. */
async function afterResign(
  ctx: RoleContext,
  endpoints: Endpoints,
  locks: LockClient,
  term: bigint,
): Promise<void> {
  await checkToken(ctx, locks, term);
  if (Math.random() < ctx.stale)
    await termCall(ctx, endpoints, Math.random() < 0.5 ? 'proclaim' : 'resign', term, true);
}

async function checkToken(ctx: RoleContext, locks: LockClient, term: bigint): Promise<void> {
  const op = ctx.nextOp();
  const shape = { f: 'check', lock: ctx.election, token: term.toString() };
  ctx.record({ op, type: 'invoke', ...shape });
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timed out'>((resolve) => {
    timer = setTimeout(() => resolve('timed out'), CALL_MS);
  });
  try {
    const answer = await Promise.race([locks.checkToken(ctx.election, term), timedOut]);
    if (answer === 'timed out')
      ctx.record({ op, type: 'info', ...shape, error: `no answer within ${CALL_MS} ms` });
    else ctx.record({ op, type: 'ok', ...shape, held: answer });
  } catch (error) {
    ctx.record({ op, type: 'fail', ...shape, error: describe(error) });
  } finally {
    clearTimeout(timer);
  }
}

/** The observer role: Observe streams one after another, every event recorded. */
export async function runObserver(ctx: RoleContext): Promise<void> {
  const endpoints = new Endpoints(ctx.servers);
  /** The last term told (or named by a vacancy as the current state): the next stream starts after it. */
  let last: bigint | undefined;
  try {
    while (!ctx.stopped.aborted && performance.now() < ctx.deadline) {
      // From the last term told (told again) or the one after it; now and then the current state.
      const pick = Math.random();
      const from = last === undefined || pick < 0.2 ? undefined : pick < 0.6 ? last : last + 1n;
      const told = await observeOnce(ctx, endpoints, { from, lifetimeMs: ctx.observeMs() }, (event) => {
        if (event.$case === 'term') {
          const before = last;
          last = event.value.term;
          // The term before is over (a term begins only once the last has ended).
          if (before !== undefined && before < last && Math.random() < ctx.stale)
            void termCall(ctx, endpoints, Math.random() < 0.5 ? 'proclaim' : 'resign', before, true);
        } else if (event.$case === 'vacant') {
          if (last === undefined || event.value.afterTerm > last) last = event.value.afterTerm;
          if (event.value.afterTerm > 0n && Math.random() < ctx.stale)
            void termCall(
              ctx,
              endpoints,
              Math.random() < 0.5 ? 'proclaim' : 'resign',
              event.value.afterTerm,
              true,
            );
        }
      });
      if (told === 'broke') endpoints.moveOn();
      await ctx.nap(100 + 400 * Math.random());
    }
  } finally {
    endpoints.close();
  }
}

/**
 * One Observe stream, recorded: the invoke (with its from_term), every event on its op, and its
 * end: `ok` when this client cancelled it (stopping, or on purpose after a while), else `info`
 * (broke) or `fail` (refused). Resolves with how it ended.
 */
function observeOnce(
  ctx: RoleContext,
  endpoints: Endpoints,
  options: {
    readonly from: bigint | undefined;
    readonly reference?: boolean;
    /** Cancelled after this long (reopened on purpose: another start). */
    readonly lifetimeMs?: number;
    /** Cancelled when this aborts (and when the recorder stops). */
    readonly signal?: AbortSignal;
  },
  hear: (event: NonNullable<ObserveResponse['kind']>) => void,
): Promise<'cancelled' | 'broke' | 'refused'> {
  const { from, reference = false } = options;
  const op = ctx.nextOp();
  const lock = ctx.election;
  ctx.record({
    op,
    type: 'invoke',
    f: 'observe',
    lock,
    ...(from === undefined ? {} : { from_term: from.toString() }),
    ...(reference ? { reference: true } : {}),
  });
  const client = endpoints.clients[endpoints.current]!;
  const call = client.observe(from === undefined ? { name: lock } : { name: lock, fromTerm: from });
  let cancelled = false;
  const cancel = (): void => {
    if (cancelled) return;
    cancelled = true;
    // Recorded before the cancel: no event after it counts.
    ctx.record({ op, type: 'ok', f: 'observe', lock });
    call.cancel();
  };
  const lifetime = options.lifetimeMs === undefined ? undefined : setTimeout(cancel, options.lifetimeMs);
  const onStop = (): void => cancel();
  ctx.stopped.addEventListener('abort', onStop);
  options.signal?.addEventListener('abort', onStop);
  call.on('data', (message: ObserveResponse) => {
    watchdog.awake();
    const kind = message.kind;
    if (cancelled || !kind) return;
    switch (kind.$case) {
      case 'term':
        ctx.record({ op, type: 'event', f: 'term', lock, term: kind.value.term.toString() });
        break;
      case 'proclaimed':
        ctx.record({ op, type: 'event', f: 'proclaimed', lock, term: kind.value.term.toString() });
        break;
      case 'vacant':
        ctx.record({ op, type: 'event', f: 'vacant', lock, after_term: kind.value.afterTerm.toString() });
        break;
      case 'historyGone':
        ctx.record({
          op,
          type: 'event',
          f: 'history_gone',
          lock,
          first_term: kind.value.firstTerm.toString(),
        });
        break;
      case 'skipped':
        ctx.record({ op, type: 'event', f: 'skipped', lock, first_term: kind.value.firstTerm.toString() });
        break;
    }
    hear(kind);
  });
  return new Promise((resolve) => {
    call.on('error', () => {});
    call.on('status', (status: grpc.StatusObject) => {
      watchdog.awake();
      clearTimeout(lifetime);
      ctx.stopped.removeEventListener('abort', onStop);
      options.signal?.removeEventListener('abort', onStop);
      if (cancelled) {
        resolve('cancelled');
        return;
      }
      const broke = BREAKS.has(status.code) || status.code === grpc.status.DEADLINE_EXCEEDED;
      ctx.record({
        op,
        type: broke ? 'info' : 'fail',
        f: 'observe',
        lock,
        error: `${codeName(status.code)}: ${status.details}`,
      });
      resolve(broke ? 'broke' : 'refused');
    });
  });
}

/**
 * The reference: an Observe from term 1, read until it is vacant after its last term and nothing
 * more comes for QUIET_MS (then cancelled), tried on each instance in turn until one gets there.
 */
export async function runReference(ctx: RoleContext): Promise<void> {
  const QUIET_MS = 1_500;
  const endpoints = new Endpoints(ctx.servers);
  try {
    for (let attempt = 0; attempt < 3 * ctx.servers.length && !ctx.stopped.aborted; attempt += 1) {
      const done = new AbortController();
      let quiet: NodeJS.Timeout | undefined;
      const outcome = await observeOnce(
        ctx,
        endpoints,
        { from: 1n, reference: true, signal: done.signal, lifetimeMs: 30_000 },
        (event) => {
          clearTimeout(quiet);
          // Vacant after the last term told: done once nothing follows for a while.
          if (event.$case === 'vacant') quiet = setTimeout(() => done.abort(), QUIET_MS);
        },
      );
      clearTimeout(quiet);
      if (outcome === 'cancelled') return;
      endpoints.moveOn();
      await sleep(500);
    }
  } finally {
    endpoints.close();
  }
}
