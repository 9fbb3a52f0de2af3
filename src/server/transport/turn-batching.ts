/*
 * The messages a stream sends in one turn of the event loop, written to HTTP/2 as one write, below
 * grpc-js's public API where the call's shape allows.
 */
import type { WritableCall } from './stream-writer.js';

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
