/*
 * Heartbeats on one stream, on one timer: sent at the interval the client asked for, and the client
 * taken as silent after three intervals without a message.
 */
import { LockError } from '../lock-error.js';

/** Heartbeats on one stream; `heard()` is called for every client message. */
export interface StreamHeartbeat extends Disposable {
  heard(): void;
}

/** The stream a heartbeat serves: told when to send one, and when the client went silent. */
export interface HeartbeatStream {
  sendHeartbeat(): void;
  /** The client said nothing for three intervals: the stream is to be treated as broken. */
  silent(reason: LockError): void;
}

const NO_HEARTBEAT: StreamHeartbeat = { heard: () => {}, [Symbol.dispose]: () => {} };

/**
 * Heartbeats at the interval the client asked for (none without one): `sendHeartbeat` every
 * interval, and `silent` once the client has said nothing for three intervals.
 */
export function startHeartbeat(intervalMs: number | undefined, stream: HeartbeatStream): StreamHeartbeat {
  return intervalMs === undefined ? NO_HEARTBEAT : new Heartbeat(intervalMs, stream);
}

/** What every heartbeat's timer calls (one function for all, not a closure per timer). */
function wake(heartbeat: Heartbeat): void {
  heartbeat.wake();
}

/**
 * One timer per stream for both jobs, woken at the next heartbeat or at the moment the client
 * would have been silent too long, whichever comes first; a client message only notes the time
 * (a timer per job, and a timer refreshed per message, cost memory on every stream and time on
 * every message).
 */
class Heartbeat implements StreamHeartbeat {
  readonly #intervalMs: number;
  readonly #stream: HeartbeatStream;
  #lastHeard = performance.now();
  #nextSend: number;
  #timer: NodeJS.Timeout;

  constructor(intervalMs: number, stream: HeartbeatStream) {
    this.#intervalMs = intervalMs;
    this.#stream = stream;
    this.#nextSend = this.#lastHeard + intervalMs;
    this.#timer = setTimeout(wake, intervalMs, this);
  }

  heard(): void {
    this.#lastHeard = performance.now();
  }

  wake(): void {
    const now = performance.now();
    const silenceMs = 3 * this.#intervalMs;
    if (now - this.#lastHeard >= silenceMs) {
      this.#stream.silent(
        new LockError(
          'UNAVAILABLE',
          `no message from the client for ${silenceMs} ms (3 heartbeat intervals)`,
        ),
      );
      return;
    }
    if (now >= this.#nextSend) {
      this.#stream.sendHeartbeat();
      this.#nextSend = now + this.#intervalMs;
    }
    const next = Math.min(this.#nextSend, this.#lastHeard + silenceMs);
    this.#timer = setTimeout(wake, Math.max(1, next - now), this);
  }

  [Symbol.dispose](): void {
    clearTimeout(this.#timer);
  }
}
