import { LockError } from '../lock-error.js';

/** Heartbeats on one stream; `heard()` is called for every client message. */
export interface StreamHeartbeat extends Disposable {
  heard: () => void;
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
  if (intervalMs === undefined) return NO_HEARTBEAT;
  const silenceMs = 3 * intervalMs;
  const ticker = setInterval(send, intervalMs);
  const silence = setTimeout(() => {
    silent(
      new LockError('UNAVAILABLE', `no message from the client for ${silenceMs} ms (3 heartbeat intervals)`),
    );
  }, silenceMs);
  return {
    heard: () => silence.refresh(),
    [Symbol.dispose]: () => {
      clearInterval(ticker);
      clearTimeout(silence);
    },
  };
}
