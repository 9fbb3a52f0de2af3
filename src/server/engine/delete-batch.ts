/*
 * The deletes asked for in one turn of the event loop (the releases of a multi-lock's parts), sent
 * to the store as one `delete`.
 */
import type { CoordinationStore } from '../stores/store.js';

/**
 * Deletes asked for in one turn of the event loop (the releases of a multi-lock's parts), sent
 * as one `delete` of several paths: the set goes in one step.
 */
export class DeleteBatch {
  readonly #store: CoordinationStore;
  readonly #paths: string[] = [];
  #sent: Promise<void> | undefined;

  constructor(store: CoordinationStore) {
    this.#store = store;
  }

  add(path: string): Promise<void> {
    this.#paths.push(path);
    return Promise.resolve().then(() => (this.#sent ??= this.#store.delete(this.#paths)));
  }
}
