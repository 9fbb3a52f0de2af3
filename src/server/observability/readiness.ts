/*
 * Whether this instance should be sent calls (Readiness): its store's session is up and it is
 * not draining; the one answer behind /readyz, gRPC health checking and the lockstream_ready gauge.
 */
import type { Logger } from 'pino';

/** Ready, or the reasons it is not, each naming what is wrong: `zookeeper: ...`, `draining: ...`. */
export interface ReadinessReport {
  readonly ready: boolean;
  readonly reasons: readonly string[];
}

/**
 * Ready while the store vouches for its session and the instance is not draining. Listeners
 * hear every change of `ready`, synchronously, so that everything that reports readiness (the
 * HTTP probe, gRPC health) turns at once; a change is logged with its reasons.
 */
export class Readiness {
  readonly #store: string;
  readonly #logger: Logger;
  readonly #listeners = new Set<(ready: boolean) => void>();
  #storeConfirmed = true;
  #draining: string | undefined;

  /** `store` names the store in reasons (`memory`, `zookeeper`). */
  constructor(options: { readonly store: string; readonly logger: Logger }) {
    this.#store = options.store;
    this.#logger = options.logger;
  }

  get ready(): boolean {
    return this.#storeConfirmed && this.#draining === undefined;
  }

  report(): ReadinessReport {
    const reasons: string[] = [];
    if (!this.#storeConfirmed) {
      reasons.push(
        `${this.#store}: session not confirmed (disconnected, or not heard from lately); no lock is granted until it is`,
      );
    }
    if (this.#draining !== undefined) reasons.push(`draining: ${this.#draining}`);
    return { ready: reasons.length === 0, reasons };
  }

  /** Calls `listener` with `ready` on every change; returns a function that stops it. */
  onChange(listener: (ready: boolean) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Records whether the store can vouch for its current session. */
  setStoreConfirmed(confirmed: boolean): void {
    this.#change(() => (this.#storeConfirmed = confirmed));
  }

  /** Not ready from now on, for good: the instance is stopping (`why`, for the reasons). */
  drain(why: string): void {
    if (this.#draining !== undefined) return;
    this.#change(() => (this.#draining = why));
  }

  #change(apply: () => void): void {
    const before = this.ready;
    apply();
    const ready = this.ready;
    if (ready === before) return;
    const { reasons } = this.report();
    if (ready) this.#logger.info('ready: calls are welcome again');
    // Draining is the plan; a store out of reach is news.
    else if (this.#storeConfirmed) this.#logger.info({ reasons }, 'not ready');
    else this.#logger.warn({ reasons }, 'not ready');
    for (const listener of [...this.#listeners]) listener(ready);
  }
}
