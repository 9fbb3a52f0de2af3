/**
 * Listeners by key (a node path), each kept until its signal aborts; a key whose last listener
 * leaves is dropped. For the stores' node and children watches.
 */
export class ListenerMap<T> {
  readonly #byKey = new Map<string, Set<T>>();

  /**
   * Adds `listener` under `key`, until `signal` aborts if one is given (else until `delete`).
   * Returns true if it is the key's first.
   */
  add(key: string, listener: T, signal?: AbortSignal): boolean {
    let listeners = this.#byKey.get(key);
    const first = listeners === undefined;
    if (!listeners) {
      listeners = new Set();
      this.#byKey.set(key, listeners);
    }
    const own = listeners;
    own.add(listener);
    signal?.addEventListener(
      'abort',
      () => {
        own.delete(listener);
        if (own.size === 0 && this.#byKey.get(key) === own) this.#byKey.delete(key);
      },
      { once: true },
    );
    return first;
  }

  /** The listeners of `key` now (a copy: a listener may leave while they are called). */
  get(key: string): T[] {
    return [...(this.#byKey.get(key) ?? [])];
  }

  has(key: string, listener?: T): boolean {
    const listeners = this.#byKey.get(key);
    return listener === undefined ? listeners !== undefined : (listeners?.has(listener) ?? false);
  }

  /** Removes `listener` (or every listener) of `key`. */
  delete(key: string, listener?: T): void {
    const listeners = this.#byKey.get(key);
    if (!listeners) return;
    if (listener !== undefined) listeners.delete(listener);
    if (listener === undefined || listeners.size === 0) this.#byKey.delete(key);
  }

  keys(): string[] {
    return [...this.#byKey.keys()];
  }

  clear(): void {
    this.#byKey.clear();
  }
}
