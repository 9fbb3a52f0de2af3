/* Listeners kept by node path, for the stores' watches. */

/**
 * Listeners by key (a node path); a key whose last listener leaves is dropped. For the stores'
 * node and children watches. Nearly every key has one listener (a held lock's node, the one
 * waiter of a predecessor), so one is kept as it is, and a Set made only for a second: a Set
 * per key would cost more than the rest of the entry.
 */
export class ListenerMap<T extends object> {
  readonly #byKey = new Map<string, T | Set<T>>();

  /** Adds `listener` under `key` (until `delete`); returns true if it is the key's first. */
  add(key: string, listener: T): boolean {
    const listeners = this.#byKey.get(key);
    if (listeners === undefined) this.#byKey.set(key, listener);
    else if (listeners instanceof Set) listeners.add(listener);
    else if (listeners !== listener) this.#byKey.set(key, new Set([listeners, listener]));
    return listeners === undefined;
  }

  /** The listeners of `key` now (a copy: a listener may leave while they are called). */
  get(key: string): T[] {
    const listeners = this.#byKey.get(key);
    if (listeners === undefined) return [];
    return listeners instanceof Set ? [...listeners] : [listeners];
  }

  has(key: string, listener?: T): boolean {
    const listeners = this.#byKey.get(key);
    if (listeners === undefined || listener === undefined) return listeners !== undefined;
    return listeners instanceof Set ? listeners.has(listener) : listeners === listener;
  }

  /** Removes `listener` (or every listener) of `key`. */
  delete(key: string, listener?: T): void {
    const listeners = this.#byKey.get(key);
    if (listeners === undefined) return;
    if (listener === undefined || listeners === listener) {
      this.#byKey.delete(key);
    } else if (listeners instanceof Set) {
      listeners.delete(listener);
      if (listeners.size === 0) this.#byKey.delete(key);
    }
  }

  /** How many listeners `key` has. */
  count(key: string): number {
    const listeners = this.#byKey.get(key);
    if (listeners === undefined) return 0;
    return listeners instanceof Set ? listeners.size : 1;
  }

  keys(): string[] {
    return [...this.#byKey.keys()];
  }

  clear(): void {
    this.#byKey.clear();
  }
}
