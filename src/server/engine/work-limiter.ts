/**
 * At most `limit` pieces of work at once; the rest wait their turn in order. A session's store
 * work goes through one (see LockSession), so that a session that sends a flood of requests
 * has only so many creates and deletes in ZooKeeper's queue at a time, and everyone else's
 * requests are served between them instead of behind all of them.
 */
export class WorkLimiter {
  readonly #limit: number;
  #running = 0;
  /** Work waiting for a turn; `#head` is the next (shifting an array is O(n)). */
  #waiting: Array<(done: () => void) => void> = [];
  #head = 0;
  /** Set while `#next` starts work: work that finishes as it starts must not recurse into it. */
  #starting = false;

  constructor(limit: number) {
    this.#limit = limit;
  }

  /** Work started and not done. */
  get running(): number {
    return this.#running;
  }

  /** Work waiting for a turn. */
  get waiting(): number {
    return this.#waiting.length - this.#head;
  }

  /**
   * Calls `start(done)` now if fewer than `limit` are running, otherwise once it is its turn.
   * `start` calls `done` (once; later calls are ignored) when its store work is over.
   */
  run(start: (done: () => void) => void): void {
    if (this.#running < this.#limit && this.#head === this.#waiting.length) this.#start(start);
    else this.#waiting.push(start);
  }

  #start(start: (done: () => void) => void): void {
    this.#running += 1;
    let finished = false;
    start(() => {
      if (finished) return;
      finished = true;
      this.#running -= 1;
      this.#next();
    });
  }

  #next(): void {
    if (this.#starting) return;
    this.#starting = true;
    try {
      while (this.#running < this.#limit && this.#head < this.#waiting.length) {
        const start = this.#waiting[this.#head]!;
        this.#head += 1;
        this.#start(start);
      }
    } finally {
      this.#starting = false;
    }
    if (this.#head === this.#waiting.length) {
      this.#waiting = [];
      this.#head = 0;
    } else if (this.#head > 1024 && this.#head * 2 > this.#waiting.length) {
      this.#waiting = this.#waiting.slice(this.#head);
      this.#head = 0;
    }
  }
}
