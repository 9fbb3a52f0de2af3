/* Guesses the path the next node under a lock parent will get, for the follow sent behind a create. */
import { joinPath } from '../node-paths.js';

/** Lock parents whose next sequence number is remembered, at most. */
const MAX_REMEMBERED_SEQUENCES = 10_000;

/**
 * The path a new node under a lock's parent should get, guessed from the last create there:
 * a create without the tree's watch sends the read that follows its node behind it, on the
 * guessed path (a wrong guess finds no node and costs one read more).
 */
export class SequenceGuesses {
  /**
   * The sequence number the next node under a lock's parent should get; null where the last
   * create found others queued: a guess there would mostly miss.
   */
  readonly #next = new Map<string, number | null>();

  /**
   * The path `prefix` would get under `dir` if nobody else creates there first; undefined when
   * unknown, or when others were queued there last time (contended: a guess would mostly miss).
   */
  next(dir: string, prefix: string): string | undefined {
    const next = this.#next.get(dir);
    return next == null ? undefined : joinPath(dir, prefix + String(next).padStart(10, '0'));
  }

  /** `alone`: the node just created at `path` was its parent's only child. */
  saw(dir: string, path: string, alone: boolean): void {
    // Bounded: one entry per lock name in use; forgetting one only costs a round trip.
    if (this.#next.size >= MAX_REMEMBERED_SEQUENCES && !this.#next.has(dir)) this.#next.clear();
    this.#next.set(dir, alone ? Number(path.slice(-10)) + 1 : null);
  }
}
