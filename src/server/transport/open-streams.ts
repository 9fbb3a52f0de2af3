/*
 * The lock streams of this server that are not done: each ended at shutdown, and the server idle
 * once none is left.
 */
import { onAbort } from '../../common/abort.js';

/** What the server needs of an open lock stream. */
export interface OpenStream {
  /** The server shuts down: the stream ends with `reason` (its session with it). */
  shutDown(reason: unknown): void;
}

/**
 * The lock streams of this server that are not done (over, and their session ended or
 * detached): shutdown ends each of them, and the server is idle once none is left. One set for
 * every stream, not a listener on the shutdown signal, a promise and a tracking closure per
 * stream (a server holds tens of thousands).
 */
export class OpenStreams {
  readonly #open = new Set<OpenStream>();
  readonly #shutdown: AbortSignal;
  #idleWaiters: Array<() => void> = [];

  /** `shutdown` aborts when the server shuts down: every open stream is then ended with its reason. */
  constructor(shutdown: AbortSignal) {
    this.#shutdown = shutdown;
    onAbort(shutdown, () => {
      for (const stream of [...this.#open]) stream.shutDown(shutdown.reason);
    });
  }

  /** `stream` is open until `done`; one opened during shutdown is ended at once. */
  add(stream: OpenStream): void {
    this.#open.add(stream);
    if (this.#shutdown.aborted) stream.shutDown(this.#shutdown.reason);
  }

  /** `stream` is over and its session ended or detached. */
  done(stream: OpenStream): void {
    if (!this.#open.delete(stream) || this.#open.size > 0) return;
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const wake of waiters) wake();
  }

  get size(): number {
    return this.#open.size;
  }

  /** Resolves once no stream is open. */
  whenIdle(): Promise<void> {
    if (this.#open.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }
}
