import { OWNER_MAX_BYTES, WAIT_TIMEOUT_MAX_MS } from '../../common/limits.js';
import type { Duration } from '../../gen/google/protobuf/duration.js';
import { LockMode as WireLockMode, type AcquireStart } from '../../gen/lockstream/v1/lockstream.js';
import type { AcquireRequest } from '../engine/lock-engine.js';
import { LockError } from '../engine/lock-error.js';
import type { LockMode } from '../engine/lock-mode.js';

const MODES = new Map<WireLockMode, LockMode>([
  [WireLockMode.MUTEX, 'mutex'],
  [WireLockMode.READ, 'read'],
  [WireLockMode.WRITE, 'write'],
]);

const CONTROL_CHARACTER = /\p{Cc}/u;

/** Turns the wire `start` message into an engine request, or says precisely what is wrong. */
export function toAcquireRequest(start: AcquireStart, peer: string): AcquireRequest {
  const mode = MODES.get(start.mode);
  if (!mode) {
    throw invalid(
      start.mode === WireLockMode.UNSPECIFIED
        ? 'mode is required: LOCK_MODE_MUTEX, LOCK_MODE_READ or LOCK_MODE_WRITE'
        : `mode ${start.mode} is not a known LockMode`,
    );
  }
  const ownerBytes = Buffer.byteLength(start.owner, 'utf8');
  if (ownerBytes > OWNER_MAX_BYTES) {
    throw invalid(`owner is ${ownerBytes} bytes of UTF-8; the limit is ${OWNER_MAX_BYTES}`);
  }
  if (CONTROL_CHARACTER.test(start.owner)) throw invalid('owner contains a control character');
  return {
    name: start.name,
    mode,
    waitTimeoutMs: start.waitTimeout === undefined ? undefined : durationToMs(start.waitTimeout),
    owner: start.owner,
    peer,
  };
}

/** A protobuf Duration in whole milliseconds, rounded up so a wait is never shorter than asked. */
function durationToMs({ seconds, nanos }: Duration): number {
  if (seconds < 0n || nanos < 0 || nanos > 999_999_999) {
    throw invalid(`wait_timeout ${seconds}s ${nanos}ns is negative or malformed`);
  }
  const ms = Number(seconds) * 1000 + Math.ceil(nanos / 1_000_000);
  if (ms > WAIT_TIMEOUT_MAX_MS) {
    throw invalid(
      `wait_timeout ${seconds}s exceeds the maximum of ${WAIT_TIMEOUT_MAX_MS} ms (about 24 days); omit it to wait without limit`,
    );
  }
  return ms;
}

function invalid(message: string): LockError {
  return new LockError('INVALID_ARGUMENT', message);
}
