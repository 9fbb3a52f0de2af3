import v8 from 'node:v8';
import vm from 'node:vm';
import type { Logger } from 'pino';

export interface MemoryReclaimerOptions {
  /** How many lock requests the server keeps now (waiting or holding). */
  readonly requests: () => number;
  readonly logger: Logger;
  /** How often the count is looked at. */
  readonly intervalMs?: number;
  /** How many requests must have ended since the peak before memory is reclaimed. */
  readonly endedAtLeast?: number;
}

type MajorGc = (options: { type: 'major'; execution: 'async' }) => Promise<void>;

/**
 * Gives memory back once many lock requests have ended. V8 keeps the heap it grew to (live
 * objects and the garbage of their making) until a full collection, and a server that went
 * quiet after releasing 100,000 locks never runs one: its RSS would stay where the peak left it.
 * So when the count of requests has fallen by `endedAtLeast` and by half from its peak, one
 * major collection is asked for (incremental, so the pause is short), and V8 returns the pages
 * it no longer needs. Nothing happens while the count stays level or grows.
 */
export class MemoryReclaimer {
  readonly #requests: () => number;
  readonly #logger: Logger;
  readonly #endedAtLeast: number;
  readonly #timer: NodeJS.Timeout;
  readonly #collect: MajorGc | undefined;
  #peak = 0;
  #collecting = false;

  constructor(options: MemoryReclaimerOptions) {
    this.#requests = options.requests;
    this.#logger = options.logger;
    this.#endedAtLeast = options.endedAtLeast ?? 10_000;
    this.#collect = majorGc();
    this.#timer = setInterval(() => this.#look(), options.intervalMs ?? 5_000);
    this.#timer.unref();
  }

  #look(): void {
    const now = this.#requests();
    if (now > this.#peak) this.#peak = now;
    const ended = this.#peak - now;
    if (ended < this.#endedAtLeast || now > this.#peak / 2 || this.#collecting || !this.#collect) return;
    this.#peak = now;
    this.#collecting = true;
    const before = process.memoryUsage.rss();
    void this.#collect({ type: 'major', execution: 'async' })
      .then(() =>
        this.#logger.debug({ ended, rssBefore: before }, 'memory reclaimed after lock requests ended'),
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
