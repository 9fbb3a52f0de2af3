/*
 * What /livez reports (Liveness): the process answers on the event loop that serves the locks,
 * and how late that loop ran a timer lately. It depends on neither the store nor draining.
 */

/** How often the loop's lateness is sampled. */
const TICK_MS = 500;

export interface LivenessReport {
  readonly live: true;
  /** What answering means. */
  readonly checked: string;
  /** How late the last sampling timer ran, in ms: a loop kept busy shows here before it stops answering. */
  readonly eventLoopLagMs: number;
  readonly uptimeSeconds: number;
}

/**
 * Samples how late a timer fires on the event loop. A loop that is stuck cannot answer /livez
 * at all (the probe times out); one that answers is alive, and says how late it runs.
 */
export class Liveness {
  #lagMs = 0;
  readonly #timer: NodeJS.Timeout;

  constructor() {
    let expected = performance.now() + TICK_MS;
    this.#timer = setInterval(() => {
      const now = performance.now();
      this.#lagMs = Math.max(0, now - expected);
      expected = now + TICK_MS;
    }, TICK_MS);
    // Never what keeps the process alive.
    this.#timer.unref();
  }

  report(): LivenessReport {
    return {
      live: true,
      checked: 'the event loop that serves the locks answered this request',
      eventLoopLagMs: Math.round(this.#lagMs * 10) / 10,
      uptimeSeconds: Math.round(process.uptime() * 10) / 10,
    };
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}
