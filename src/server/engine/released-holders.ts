/** Released holders remembered for the waiters behind them, at most. */
const MAX_RELEASED_HOLDERS = 10_000;

/**
 * Nodes that waiters of this engine wait for, and those of them that holders of this engine
 * released, whose release frees their watchers. Only nodes a waiter here waits for are kept,
 * and at most MAX_RELEASED_HOLDERS (a waiter that gave up leaves its entry behind).
 */
export class ReleasedHolders {
  /** Awaited nodes, with how many waiters here wait for each. */
  readonly #awaited = new Map<string, number>();
  readonly #released = new Set<string>();

  /** A waiter waits for `path` until it calls `stopAwaiting`. */
  awaiting(path: string): void {
    this.#awaited.set(path, (this.#awaited.get(path) ?? 0) + 1);
  }

  /** Whether a holder here released `path` while a waiter here awaited it. */
  released(path: string): boolean {
    return this.#released.has(path);
  }

  stopAwaiting(path: string): void {
    const count = (this.#awaited.get(path) ?? 1) - 1;
    if (count > 0) {
      this.#awaited.set(path, count);
    } else {
      this.#awaited.delete(path);
      this.#released.delete(path);
    }
  }

  add(path: string): void {
    if (!this.#awaited.has(path)) return; // nobody here waits for it
    if (this.#released.size >= MAX_RELEASED_HOLDERS) {
      const oldest = this.#released.values().next();
      if (!oldest.done) this.#released.delete(oldest.value);
    }
    this.#released.add(path);
  }
}
