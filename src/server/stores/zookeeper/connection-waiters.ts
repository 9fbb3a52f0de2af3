/* The requests waiting for the keeper's session to be usable: each let through once it is, and
 * failed once it cannot be any more, or when the connect timeout is up. */
import { LockError } from '../../lock-error.js';

/**
 * Those waiting in SessionKeeper.whenConnected. Each looks again at every `wake`: the keeper
 * wakes them when the session becomes usable, when it is closed or handed over, and when a
 * session is let go (a write made for it stops waiting for the next one).
 */
export class ConnectionWaiters {
  readonly #connectString: string;
  readonly #connectTimeoutMs: number;
  readonly #waiters = new Set<() => void>();

  constructor(options: { connectString: string; connectTimeoutMs: number }) {
    this.#connectString = options.connectString;
    this.#connectTimeoutMs = options.connectTimeoutMs;
  }

  /**
   * Resolves once `usable()`; rejects with `blocked()`'s error as soon as it has one (at once,
   * or at a `wake`), and with UNAVAILABLE after the connect timeout.
   */
  async wait(what: string, usable: () => boolean, blocked: () => LockError | undefined): Promise<void> {
    const problem = blocked();
    if (problem) throw problem;
    if (usable()) return;
    const waitMs = this.#connectTimeoutMs;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters.delete(wake);
        reject(
          new LockError(
            'UNAVAILABLE',
            `ZooKeeper at ${this.#connectString} unreachable for ${waitMs} ms (${what})`,
          ),
        );
      }, waitMs);
      const wake = (): void => {
        const stop = blocked();
        if (!stop && !usable()) return;
        clearTimeout(timer);
        this.#waiters.delete(wake);
        if (stop) reject(stop);
        else resolve();
      };
      this.#waiters.add(wake);
    });
  }

  /** Lets every waiter look again: usable, closed, or its session let go. */
  wake(): void {
    for (const wake of [...this.#waiters]) wake();
  }
}
