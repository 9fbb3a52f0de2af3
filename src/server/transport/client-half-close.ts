import type { Http2Session } from 'node:http2';
import type { EventEmitter } from 'node:events';

/**
 * Telling a half-close from a cancel. A cancelling client may end its side of the stream
 * (END_STREAM) and reset it (RST_STREAM) in one go, and the two frames can reach the server in
 * different reads; a client that cancels and closes its connection at once (grpc-js does both
 * when a process cancels and exits) may send the END_STREAM and never the reset. A server that
 * looks for the reset "a moment" after the end sometimes reads a cancel as a half-close, and
 * releases a lock the client meant to keep for its resume grace. Instead, after the end the
 * server sends an HTTP/2 PING on the connection and waits for its ACK: the client sent any
 * reset that belongs with the end before it could read the PING, so by the ACK the reset has
 * arrived (one TCP stream keeps the order), and a client that answers no PING is gone, not
 * waiting for its `released`. Only an end the client is still connected to confirm is a
 * half-close; anything else is a cancel, whatever the timing. The cost is one round trip per
 * bare half-close (a `release` message needs none).
 */

/** The parts of a grpc-js server call this uses. */
interface ServerCall extends EventEmitter {
  readonly cancelled: boolean;
}

/**
 * Calls `onHalfClose` when the client half-closes `call`, once it is certain the end was not
 * part of a cancel (then grpc-js reports 'cancelled' instead, when the stream or its connection
 * closes, and this never calls).
 */
export function onClientHalfClose(call: ServerCall, onHalfClose: () => void): void {
  call.once('end', () => {
    void afterClientFrames(call).then((connected) => {
      if (connected && !call.cancelled) onHalfClose();
    });
  });
}

/**
 * Resolves once every frame the client sent before now has been read: true if the client
 * answered on the same connection, false if the connection went away first.
 */
function afterClientFrames(call: ServerCall): Promise<boolean> {
  const session = sessionOf(call);
  if (!session) return new Promise((resolve) => setImmediate(() => resolve(true)));
  let barrier = barriers.get(session);
  if (!barrier) {
    barrier = new PingBarrier(session);
    barriers.set(session, barrier);
  }
  return barrier.wait();
}

const barriers = new WeakMap<Http2Session, PingBarrier>();

/**
 * One PING at a time per connection. Whoever asks while one is out waits for the next: a PING
 * sent before their end arrived proves nothing about frames after it.
 */
class PingBarrier {
  readonly #session: Http2Session;
  #inFlight = false;
  #next: Array<(connected: boolean) => void> = [];

  constructor(session: Http2Session) {
    this.#session = session;
  }

  wait(): Promise<boolean> {
    return new Promise((resolve) => {
      this.#next.push(resolve);
      if (!this.#inFlight) this.#ping();
    });
  }

  #ping(): void {
    const waiters = this.#next;
    this.#next = [];
    this.#inFlight = true;
    const done = (connected: boolean): void => {
      this.#inFlight = false;
      for (const resolve of waiters) resolve(connected);
      if (this.#next.length > 0) this.#ping();
    };
    const session = this.#session;
    if (session.closed || session.destroyed) {
      done(false);
      return;
    }
    try {
      // The callback has an error if the connection closes before the ACK.
      const sent = session.ping((error) => done(error === null));
      // Refused while too many PINGs are unanswered (keepalives count too): ask again shortly.
      if (!sent) {
        this.#next.unshift(...waiters);
        setTimeout(() => this.#ping(), PING_RETRY_MS).unref();
      }
    } catch {
      done(false);
    }
  }
}

/** How soon a refused PING is sent again. */
const PING_RETRY_MS = 5;

let warned = false;

/**
 * The HTTP/2 session under a grpc-js server call (grpc-js keeps it private: the call's
 * intercepting call, or the last of a chain of them, holds the stream).
 */
function sessionOf(call: ServerCall): Http2Session | undefined {
  let layer: unknown = (call as unknown as { call?: unknown }).call;
  for (let depth = 0; depth < 16 && typeof layer === 'object' && layer !== null; depth += 1) {
    const session = (layer as { stream?: { session?: Http2Session } }).stream?.session;
    if (session && typeof session.ping === 'function') return session;
    layer = (layer as { nextCall?: unknown }).nextCall;
  }
  if (!warned) {
    warned = true;
    process.emitWarning(
      '@grpc/grpc-js changed: a server call no longer leads to its HTTP/2 stream; a cancel may be read as a half-close. Revisit client-half-close.ts',
    );
  }
  return undefined;
}
