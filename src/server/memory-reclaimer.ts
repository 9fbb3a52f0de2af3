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
