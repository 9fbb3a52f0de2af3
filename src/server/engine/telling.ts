/** A short list of listeners: an array is a fraction of a Set's size, and these lists hold one or two. */
export class Listeners<T, R = void> {
  #listeners: Array<(value: T) => R> | undefined;

  add(listener: (value: T) => R): () => void {
    // A literal of one, not a push: a pushed-to empty array reserves room for seventeen.
    if (this.#listeners) this.#listeners.push(listener);
    else this.#listeners = [listener];
    return () => {
      const index = this.#listeners?.indexOf(listener) ?? -1;
      if (index >= 0) this.#listeners?.splice(index, 1);
    };
  }

  /** Calls every listener; returns what they returned. */
  tell(value: T): R[] {
    return [...(this.#listeners ?? [])].map((listener) => listener(value));
  }
}

/**
 * How long a forced revocation waits for the holder to be told before it frees the lock
 * anyway: a holder whose connection does not read cannot be told, and must not keep the lock
 * past its deadline for long.
 */
export const LOSS_TELLING_BOUND_MS = 1_000;

/** Resolves once every promise in `telling` (what loss listeners returned) has settled, or after LOSS_TELLING_BOUND_MS. */
export async function whenTold(telling: Array<void | Promise<void>>): Promise<void> {
  const pending = telling.filter((told): told is Promise<void> => told instanceof Promise);
  if (pending.length === 0) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.allSettled(pending),
    new Promise<void>((resolve) => (timer = setTimeout(resolve, LOSS_TELLING_BOUND_MS))),
  ]);
  clearTimeout(timer);
}
