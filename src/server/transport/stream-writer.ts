/*
 * How a lock stream's messages are written: by one writer, in the order of their events (while a
 * slow reader backs the stream up, only the newest place or heartbeat waits), and those of one
 * turn of the event loop in one HTTP/2 write.
 */
/** What the writer needs of a gRPC server stream. */
export interface WritableCall<M> {
  write(message: M, written?: () => void): boolean;
  once(event: 'drain', listener: () => void): unknown;
}

/**
 * The one writer of a stream: messages go out in the order of the events they report. Most
 * are a handful per request and are written at once; the exceptions are the messages where
 * only the newest matters (a request's place in its queue, a heartbeat): while the stream is
 * backed up (a reader that does not keep up) those wait, and a newer one about the same thing
 * replaces the older, so a slow reader costs one message per request, not a growing queue.
 * Any other message first writes the ones waiting (or drops the one about its own request,
 * which it makes stale), so nothing overtakes what happened before it.
 */
export class StreamWriter<M> {
  readonly #call: WritableCall<M>;
  #backedUp = false;
  /**
   * Messages of which only the newest matters, by what they are about; in arrival order. Made
   * the first time the stream backs up (most streams never do).
   */
  #latest: Map<number, M> | undefined;

  constructor(call: WritableCall<M>) {
    this.#call = call;
  }

  /**
   * Writes `message` about `key` (drops a waiting latest-only message about the same key);
   * `written` is called once the stream has handed it to HTTP/2 (or failed to).
   */
  write(key: number, message: M, written?: () => void): void {
    if (this.#latest && this.#latest.size > 0) {
      this.#latest.delete(key);
      this.#flushLatest();
    }
    this.#write(message, written);
  }

  /** Writes `message` about `key`, or keeps it until the stream drains, replacing an older one. */
  writeLatest(key: number, message: M): void {
    if (!this.#backedUp) {
      this.#write(message);
      return;
    }
    const latest = (this.#latest ??= new Map());
    latest.delete(key);
    latest.set(key, message);
  }

  #write(message: M, written?: () => void): void {
    if (this.#call.write(message, written) || this.#backedUp) return;
    this.#backedUp = true;
    this.#call.once('drain', () => {
      this.#backedUp = false;
      this.#flushLatest();
    });
  }

  #flushLatest(): void {
    const latest = this.#latest;
    if (!latest || latest.size === 0) return;
    const waiting = [...latest.values()];
    latest.clear();
    for (const message of waiting) this.#write(message);
  }
}

/**
 * What grpc-js 1.x keeps below a server call's public face: the call it forwards each message
 * to (`sendMessage` serializes, frames and writes it) and the HTTP/2 stream it writes on.
 */
interface CallBelow<M> {
  sendMessage(message: M, callback: () => void): void;
  readonly stream: HttpStream;
}

interface HttpStream {
  cork(): void;
  uncork(): void;
  readonly writableNeedDrain: boolean;
  readonly destroyed: boolean;
  readonly closed: boolean;
  once(event: 'drain', listener: () => void): unknown;
}

/**
 * The messages one stream sends in one turn of the event loop, written to HTTP/2 as one write.
 *
 * grpc-js gives each message a write of its own and starts the next only once the previous one
 * has gone out (its call is a Writable without `_writev`), so a burst on one stream (`released`
 * and `ended`; a session's grants to many requests after one ZooKeeper reply) leaves as a
 * syscall, a DATA frame and a client-side read per message, one per turn. gRPC's framing lets
 * one DATA frame carry any number of length-prefixed messages, and every gRPC client reads
 * them so. Here the HTTP/2 stream is corked until the turn ends (setImmediate, as the
 * ZooKeeper requests of a turn are batched) and each message goes to the call below grpc-js's
 * Writable, in order; backpressure is the HTTP/2 stream's own.
 *
 * This reaches below grpc-js's public API, checked when the stream opens: a grpc-js whose call
 * is shaped otherwise gets the public path, unbatched (test/integration/turn-batching.test.ts then
 * fails, so an upgrade cannot lose it unseen).
 */
export function batchedByTurn<M>(call: WritableCall<M>): WritableCall<M> {
  const below = callBelow<M>(call);
  if (below === undefined) return call;
  const { stream } = below;
  let corked = false;
  const uncork = (): void => {
    corked = false;
    stream.uncork();
  };
  return {
    write(message: M, written?: () => void): boolean {
      // A stream already gone writes nothing and would never call back (grpc-js drops it).
      if (stream.destroyed || stream.closed) {
        written?.();
        return true;
      }
      if (!corked) {
        corked = true;
        stream.cork();
        setImmediate(uncork);
      }
      below.sendMessage(message, written ?? ignore);
      return !stream.writableNeedDrain;
    },
    once(event: 'drain', listener: () => void): unknown {
      return stream.once(event, listener);
    },
  };
}

function ignore(): void {}

function callBelow<M>(call: WritableCall<M>): CallBelow<M> | undefined {
  const below = (call as { call?: Partial<CallBelow<M>> }).call;
  const stream = below?.stream as Partial<HttpStream> | undefined;
  if (typeof below?.sendMessage !== 'function' || stream === undefined) return undefined;
  if (typeof stream.cork !== 'function' || typeof stream.uncork !== 'function') return undefined;
  if (typeof stream.once !== 'function' || typeof stream.writableNeedDrain !== 'boolean') return undefined;
  return below as CallBelow<M>;
}
