/*
 * Giving memory back after a burst of lock requests: V8's heap kept near what is live, and one
 * major collection once the number of requests has changed a lot and settled.
 */
import v8 from 'node:v8';
import vm from 'node:vm';
import type { Logger } from 'pino';

export interface MemoryReclaimerOptions {
  /** How many lock requests the server keeps now (waiting or holding). */
  readonly requests: () => number;
  readonly logger: Logger;
  /** How often the count is looked at. */
  readonly intervalMs?: number;
  /** By how many requests the count must have changed since the last collection. */
  readonly changedAtLeast?: number;
  /** The collector (tests pass their own); by default V8's, made callable. */
  readonly collect?: MajorGc | undefined;
}

export type MajorGc = (options: { type: 'major'; execution: 'async' }) => Promise<void>;

/**
 * Gives memory back after a burst of lock requests. V8 keeps the heap it grew to (live objects
 * and the garbage of their making) until a full collection, and a server that went quiet
 * after taking or releasing 100,000 locks may never run one: its RSS would stay where the
 * burst left it. So once the count of requests has changed by `changedAtLeast` since the last
 * collection and has settled (the same, within 1%, at two looks in a row), one major
 * collection is asked for (incremental, so the pause is short), and V8 returns the pages it no
 * longer needs. Nothing happens while the count moves, or stays level.
 */
export class MemoryReclaimer {
  readonly #requests: () => number;
  readonly #logger: Logger;
  readonly #changedAtLeast: number;
  readonly #timer: NodeJS.Timeout;
  readonly #collect: MajorGc | undefined;
  /** The count at the last look, and at the last collection. */
  #previous = 0;
  #atLastCollection = 0;
  #collecting = false;

  constructor(options: MemoryReclaimerOptions) {
    this.#requests = options.requests;
    this.#logger = options.logger;
    this.#changedAtLeast = options.changedAtLeast ?? 10_000;
    this.#collect = 'collect' in options ? options.collect : majorGc();
    this.#timer = setInterval(() => this.#look(), options.intervalMs ?? 5_000);
    this.#timer.unref();
  }

  #look(): void {
    const now = this.#requests();
    const settled = Math.abs(now - this.#previous) <= now / 100;
    this.#previous = now;
    const changed = now - this.#atLastCollection;
    if (!settled || Math.abs(changed) < this.#changedAtLeast || this.#collecting || !this.#collect) return;
    this.#atLastCollection = now;
    this.#collecting = true;
    const before = process.memoryUsage.rss();
    void this.#collect({ type: 'major', execution: 'async' })
      .then(() =>
        this.#logger.debug({ changed, rssBefore: before }, 'memory reclaimed after a burst of lock requests'),
      )
      .catch((error: unknown) => this.#logger.warn({ err: error }, 'could not reclaim memory'))
      .finally(() => (this.#collecting = false));
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

/**
 * How far V8 lets the old generation grow past what survived the last full collection before
 * it runs the next one, in percent. V8 picks up to 100 % or more for a heap of this server's
 * size, which suits a browser tab; a lock server's heap is mostly long-lived locks, and a
 * steady trickle of short-lived objects that outlive two young collections (the gRPC and
 * HTTP/2 objects of each heartbeat on each open stream) then fills that headroom with garbage:
 * measured with 10,000 locks held and 10,000 waiting on Acquire streams with heartbeats each
 * second, 25 % keeps RSS at 356–372 MB where V8's own choice gave 410–475 MB, for about a
 * sixth of a core of extra collection work at that load (`npm run bench`, capacity run).
 */
const HEAP_GROWING_PERCENT = 25;

/** Sets V8's heap growing factor for this process (see HEAP_GROWING_PERCENT). */
export function keepHeapNearLive(): void {
  v8.setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
}

let collector: { gc: MajorGc | undefined } | undefined;

/**
 * V8's collector, made callable (as `node --expose-gc` would) once per process; undefined if it
 * cannot be, and then memory is reclaimed by V8 alone.
 */
function majorGc(): MajorGc | undefined {
  if (!collector) {
    collector = { gc: undefined };
    try {
      v8.setFlagsFromString('--expose-gc');
      const gc = vm.runInNewContext('gc') as unknown;
      if (typeof gc === 'function') {
        const collect = gc as (options: { type: 'major'; execution: 'async' }) => unknown;
        collector.gc = (options) => Promise.resolve(collect(options)).then(() => {});
      }
    } catch {
      // Left undefined.
    }
  }
  return collector.gc;
}
