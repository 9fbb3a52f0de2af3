/* A store session's lost and confirmed state, for both store implementations. */
import { unboundedController } from '../../common/abort.js';
import type { LockError } from '../lock-error.js';
import type { StoreSession } from './store.js';

/**
 * A store session's state, shared by the store implementations: `lost` once it has ended, and
 * whether it is currently `confirmed` (the store can vouch for it) or in doubt.
 */
export class SessionState implements StoreSession {
  readonly #lost = unboundedController();
  readonly #listeners = new Set<(confirmed: boolean) => void>();
  #confirmed: boolean;

  /** `confirmed`: whether the session starts out vouched for (a store that must connect first says no). */
  constructor(
    public id: string,
    confirmed = true,
  ) {
    this.#confirmed = confirmed;
  }

  get lost(): AbortSignal {
    return this.#lost.signal;
  }

  get confirmed(): boolean {
    return this.#confirmed && !this.#lost.signal.aborted;
  }

  /** Listeners subscribed to `confirmed` changes (each held lock has one), for leak checks. */
  get listenerCount(): number {
    return this.#listeners.size;
  }

  onConfirmedChange(listener: (confirmed: boolean) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Records whether the store can vouch for the session now; tells listeners of a change. */
  setConfirmed(confirmed: boolean): void {
    if (this.#lost.signal.aborted || confirmed === this.#confirmed) return;
    this.#confirmed = confirmed;
    for (const listener of [...this.#listeners]) listener(confirmed);
  }

  /** Ends the session: its ephemeral nodes are gone (or must be treated as gone). */
  end(reason: LockError): void {
    if (this.#lost.signal.aborted) return;
    this.#confirmed = false;
    this.#listeners.clear();
    this.#lost.abort(reason);
  }
}
