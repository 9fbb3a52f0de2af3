import { LockError } from '../lock-error.js';

/** Heartbeats on one stream; `heard()` is called for every client message. */
export interface StreamHeartbeat extends Disposable {
  heard(): void;
}

const NO_HEARTBEAT: StreamHeartbeat = { heard: () => {}, [Symbol.dispose]: () => {} };

/**
 * Heartbeats at the interval the client asked for (none without one): `send` every interval,
 * and `silent` once the client has said nothing for three intervals (the stream is then
 * treated as broken).
 */
export function startHeartbeat(
  intervalMs: number | undefined,
  send: () => void,
  silent: (reason: LockError) => void,
): StreamHeartbeat {
  return intervalMs === undefined ? NO_HEARTBEAT : new Heartbeat(intervalMs, send, silent);
}

/**
 * One timer per stream for both jobs, woken at the next heartbeat or at the moment the client
 * would have been silent too long, whichever comes first; a client message only notes the time
 * (a timer per job, and a timer refreshed per message, cost memory on every stream and time on
 * every message).
 */
class Heartbeat implements StreamHeartbeat {
  readonly #intervalMs: number;
  readonly #silenceMs: number;
  readonly #send: () => void;
  readonly #silent: (reason: LockError) => void;
  #lastHeard = performance.now();
  #nextSend: number;
  #timer: NodeJS.Timeout;

  constructor(intervalMs: number, send: () => void, silent: (reason: LockError) => void) {
    this.#intervalMs = intervalMs;
    this.#silenceMs = 3 * intervalMs;
    this.#send = send;
    this.#silent = silent;
    this.#nextSend = this.#lastHeard + intervalMs;
    this.#timer = setTimeout(() => this.#wake(), intervalMs);
  }

  heard(): void {
    this.#lastHeard = performance.now();
  }

  #wake(): void {
    const now = performance.now();
    if (now - this.#lastHeard >= this.#silenceMs) {
      this.#silent(
        new LockError(
          'UNAVAILABLE',
          `no message from the client for ${this.#silenceMs} ms (3 heartbeat intervals)`,
        ),
      );
      return;
    }
    if (now >= this.#nextSend) {
      this.#send();
      this.#nextSend = now + this.#intervalMs;
    }
    const next = Math.min(this.#nextSend, this.#lastHeard + this.#silenceMs);
    this.#timer = setTimeout(() => this.#wake(), Math.max(1, next - now));
  }

  [Symbol.dispose](): void {
    clearTimeout(this.#timer);
  }
}
