/** Work waiting for its turn, for one party (a session): in the order it was asked for. */
export class WorkQueue {
  /** `start` functions not started yet; `head` is the next (shifting an array is O(n)). */
  items: Array<(done: () => void) => void> = [];
  head = 0;
  /** Whether the queue is in the scheduler's round. */
  inRound = false;

  get size(): number {
    return this.items.length - this.head;
  }

  take(): ((done: () => void) => void) | undefined {
    const start = this.items[this.head];
    if (start === undefined) return undefined;
    this.head += 1;
    if (this.head === this.items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return start;
  }
}

/**
 * The store work of every session on this server, at most `limit` pieces at once, and the
 * sessions served in turns: when a piece finishes, the next session in the round with work
 * waiting starts its oldest piece. A session that floods the server with requests has its
 * work start one piece per turn like everyone else's, so another client's request waits for
 * one turn, not behind the whole flood; a session alone gets every slot.
 */
export class StoreWorkScheduler {
  readonly #limit: number;
  #running = 0;
  /** The queues with work waiting, served in turns from `#turn`. */
  readonly #round: WorkQueue[] = [];
  #turn = 0;
  /** Set while pieces are being started: a piece that finishes as it starts must not recurse. */
  #starting = false;

  constructor(limit: number) {
    this.#limit = limit;
  }

  /** Pieces started and not done. */
  get running(): number {
    return this.#running;
  }

  /** Pieces waiting for a turn. */
  get waiting(): number {
    let waiting = 0;
    for (const queue of this.#round) waiting += queue.size;
    return waiting;
  }

  /**
   * Calls `start(done)` now if a slot is free and nobody waits, otherwise in `queue`'s turn.
   * `start` calls `done` (once; later calls are ignored) when its store work is over.
   */
  run(queue: WorkQueue, start: (done: () => void) => void): void {
    if (this.#running < this.#limit && this.#round.length === 0) {
      this.#start(start);
      return;
    }
    queue.items.push(start);
    if (!queue.inRound) {
      queue.inRound = true;
      this.#round.push(queue);
    }
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
      while (this.#running < this.#limit && this.#round.length > 0) {
        if (this.#turn >= this.#round.length) this.#turn = 0;
        const queue = this.#round[this.#turn]!;
        const start = queue.take();
        if (queue.size === 0) {
          // Out of the round until it has work again; the next queue takes this turn.
          queue.inRound = false;
          this.#round.splice(this.#turn, 1);
        } else {
          this.#turn += 1;
        }
        if (start) this.#start(start);
      }
    } finally {
      this.#starting = false;
    }
  }
}
