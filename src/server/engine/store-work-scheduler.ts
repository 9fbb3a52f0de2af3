/*
 * The store work of every session on this server, a bounded number of pieces at once, with the
 * sessions taking turns, so one session's flood of requests does not hold up another client's.
 */
/** Work waiting for its turn, for one party (a session): in the order it was asked for. */
export class WorkQueue {
  /** `start` functions not started yet; `head` is the next (shifting an array is O(n)). */
  items: Array<(done: () => void) => void> = [];
  head = 0;
  /** Whether the queue is in the scheduler's round. */
  inRound = false;
  /** Its pieces started and not done. */
  running = 0;

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

/** How long a session counts as busy after its last piece of store work started or finished. */
const BUSY_LINGER_MS = 100;

/**
 * What part of the slots a session may fill while another session is busy: a sixteenth (4 of
 * 64). Every piece a flood has in flight is ahead of another client's request in ZooKeeper (one
 * store session, answered in order). bench:flood, alternating runs: with a quarter (16) the
 * probe's p99 during the flood was 120–149 ms against 18–20 ms idle (40,000 locks) and 70–97 ms
 * against 19–25 ms (100,000); with a sixteenth 43–60 ms against 18–20 ms and 39–52 ms against
 * 15–52 ms. The flood pays while another session is busy: 100,000 locks taken in 62–63 s
 * instead of 38–41 s.
 */
const SHARE_WHILE_ANOTHER_IS_BUSY = 1 / 16;

/**
 * The store work of every session on this server, at most `limit` pieces at once, and the
 * sessions served in turns: when a piece finishes, the next session in the round with work
 * waiting starts its oldest piece. A session that floods the server with requests has its
 * work start one piece per turn like everyone else's, so another client's request waits for
 * one turn, not behind the whole flood. A session alone gets every slot; while another session
 * is busy too (it had store work waiting, started or finished within BUSY_LINGER_MS), each gets
 * at most a sixteenth of them (SHARE_WHILE_ANOTHER_IS_BUSY):
 * a piece of store work waits in ZooKeeper behind every piece sent before it, and a flood that
 * kept every slot put its whole depth ahead of each step of another client's request.
 */
export class StoreWorkScheduler {
  readonly #limit: number;
  /** What a session may have in flight while another one is busy. */
  readonly #share: number;
  #running = 0;
  /** The two sessions busy last, and when: enough to know whether one other than a given one is. */
  #busiest: { queue: WorkQueue | undefined; at: number } = { queue: undefined, at: -Infinity };
  #busyBefore: { queue: WorkQueue | undefined; at: number } = { queue: undefined, at: -Infinity };
  /** The queues with work waiting, served in turns from `#turn`. */
  readonly #round: WorkQueue[] = [];
  #turn = 0;
  /** Set while pieces are being started: a piece that finishes as it starts must not recurse. */
  #starting = false;

  constructor(limit: number) {
    this.#limit = limit;
    this.#share = Math.max(1, Math.floor(limit * SHARE_WHILE_ANOTHER_IS_BUSY));
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
    const now = performance.now();
    if (this.#running < this.#limit && this.#round.length === 0 && this.#mayStart(queue, now)) {
      this.#start(queue, start);
      return;
    }
    // Waiting counts as busy: another session's next piece stays within its share from now.
    this.#busy(queue, now);
    queue.items.push(start);
    if (!queue.inRound) {
      queue.inRound = true;
      this.#round.push(queue);
    }
  }

  /** Whether `queue` may start a piece now: below its share while another session is busy. */
  #mayStart(queue: WorkQueue, now: number): boolean {
    if (queue.running < this.#share) return true;
    const other = this.#busiest.queue === queue ? this.#busyBefore : this.#busiest;
    return other.queue === undefined || now - other.at >= BUSY_LINGER_MS;
  }

  /** Notes `queue` busy now; the two records swap rather than being made anew (a hot path). */
  #busy(queue: WorkQueue, now: number): void {
    if (this.#busiest.queue !== queue) {
      const reused = this.#busyBefore;
      this.#busyBefore = this.#busiest;
      this.#busiest = reused;
      reused.queue = queue;
    }
    this.#busiest.at = now;
  }

  #start(queue: WorkQueue, start: (done: () => void) => void): void {
    this.#running += 1;
    queue.running += 1;
    this.#busy(queue, performance.now());
    let finished = false;
    start(() => {
      if (finished) return;
      finished = true;
      this.#running -= 1;
      queue.running -= 1;
      this.#busy(queue, performance.now());
      this.#next();
    });
  }

  #next(): void {
    if (this.#starting) return;
    this.#starting = true;
    try {
      const now = performance.now();
      // Queues passed over in a row because they are at their share: once every queue in the
      // round has been, nothing more can start until a piece finishes.
      let passed = 0;
      while (this.#running < this.#limit && this.#round.length > 0 && passed < this.#round.length) {
        if (this.#turn >= this.#round.length) this.#turn = 0;
        const queue = this.#round[this.#turn]!;
        if (!this.#mayStart(queue, now)) {
          passed += 1;
          this.#turn += 1;
          continue;
        }
        passed = 0;
        const start = queue.take();
        if (queue.size === 0) {
          // Out of the round until it has work again; the next queue takes this turn.
          queue.inRound = false;
          this.#round.splice(this.#turn, 1);
        } else {
          this.#turn += 1;
        }
        if (start) this.#start(queue, start);
      }
    } finally {
      this.#starting = false;
    }
  }
}
