/*
 * A holder's asks (`setValue`, `downgrade`) that the server has not acknowledged yet: each
 * settled by its acknowledgement, or failed with the request's end.
 */
import type { RequestMessage } from './session-requests.js';

/** A holder's ask, acknowledged by the server (`value_set`, `downgraded`). */
export type HolderAsk = Extract<RequestMessage, { kind: 'value' }> | { readonly kind: 'downgrade' };

interface Pending {
  readonly ask: HolderAsk;
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

/** Asks in the order sent, oldest first. Made for a holder's first ask (most only release). */
export class HolderAsks {
  #pending: Pending[] = [];

  /** Whether any ask waits for its acknowledgement. */
  get waiting(): boolean {
    return this.#pending.length > 0;
  }

  /** Adds `ask`: the promise settles once it is acknowledged, or fails with the request's end. */
  add(ask: HolderAsk): Promise<void> {
    return new Promise((resolve, reject) => this.#pending.push({ ask, resolve, reject }));
  }

  /** Calls `send` with every ask not yet acknowledged, oldest first (again after a resume). */
  forEach(send: (ask: HolderAsk) => void): void {
    for (const { ask } of this.#pending) send(ask);
  }

  /**
   * The server did the oldest ask of `kind` not yet acknowledged. It applies them in the order
   * sent, and acknowledges each on the stream it came on; one sent twice (after a resume) is
   * harmless.
   */
  acknowledged(kind: HolderAsk['kind']): void {
    const pending = this.#pending;
    const index = pending.findIndex(({ ask }) => ask.kind === kind);
    if (index >= 0) pending.splice(index, 1)[0]!.resolve();
  }

  /** The request ended: what it did not do never will be. */
  failAll(error: unknown): void {
    const pending = this.#pending;
    this.#pending = [];
    for (const { reject } of pending) reject(error);
  }
}
