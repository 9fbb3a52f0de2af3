/*
 * Heartbeats on one call in both directions: one sent every interval, and a server that has
 * said nothing for too long noticed.
 */
import { status as Status } from '@grpc/grpc-js';
import type { EndStatus } from './session-call.js';

/**
 * Sends `message` on `call` every `intervalMs`, and calls `silent` when the server has said
 * nothing for `silenceMs()` since `heardAt()` (a proxy may answer HTTP/2 pings for a server
 * that is gone). Hearing costs the caller one timestamp, not a timer reset per message. Returns
 * a function that stops both.
 */
export function clientHeartbeat<T>(
  call: { write(message: T): unknown },
  intervalMs: number,
  message: T,
  heardAt: () => number,
  silenceMs: () => number,
  silent: (status: EndStatus) => void,
): () => void {
  const ticker = setInterval(() => call.write(message), intervalMs);
  ticker.unref();
  const check = (): void => {
    const allowedMs = silenceMs();
    const quietMs = performance.now() - heardAt();
    if (quietMs < allowedMs) {
      silence = setTimeout(check, allowedMs - quietMs).unref();
      return;
    }
    silent({
      code: Status.UNAVAILABLE,
      details: `no message from the server for ${allowedMs} ms (heartbeats every ${intervalMs} ms)`,
    });
  };
  let silence = setTimeout(check, silenceMs()).unref();
  return () => {
    clearInterval(ticker);
    clearTimeout(silence);
  };
}
