/*
 * How large a lock request (a Session `acquire`, an Acquire `start`) may be. The largest legal
 * one is built from the limits the server enforces, so the default limit admits every request
 * the server would grant; a request over the configured limit is refused alone, and only a
 * message far beyond it (gRPC's own receive limit) ends its whole call.
 */
import {
  HEARTBEAT_INTERVAL_MAX_MS,
  LOCK_NAME_MAX_BYTES,
  MULTI_LOCK_MAX,
  OWNER_MAX_BYTES,
  SEMAPHORE_LIMIT_MAX,
  VALUE_MAX_BYTES,
  WAIT_TIMEOUT_MAX_MS,
} from '../common/limits.js';
import { Duration } from '../gen/google/protobuf/duration.js';
import {
  AcquireRequest,
  LockMode,
  SessionRequest,
  type AcquireStart,
  type LockTarget,
  type SessionAcquire,
} from '../gen/lockstream/v1/lockstream.js';

/** How far beyond the request limit gRPC still reads a message, so that it can be refused alone. */
export const RECEIVE_MARGIN_BYTES = 64 * 1024;

/** The largest request of each RPC, with every field at its largest legal encoding. */
export function largestLegalRequests(): { session: SessionRequest; acquire: AcquireRequest } {
  const waitTimeout = longestDuration(WAIT_TIMEOUT_MAX_MS);
  // A multi-lock of semaphores outweighs any single lock: as many names as allowed, each with a
  // mode, a limit and a weight.
  const locks: LockTarget[] = Array.from({ length: MULTI_LOCK_MAX }, (_, i) => ({
    name: `${i}-`.padEnd(LOCK_NAME_MAX_BYTES, 'n'),
    mode: LockMode.SEMAPHORE,
    limit: SEMAPHORE_LIMIT_MAX,
    weight: SEMAPHORE_LIMIT_MAX,
  }));
  const common = {
    // A multi-lock leaves name, mode, limit and weight unset.
    name: '',
    mode: LockMode.UNSPECIFIED,
    limit: 0,
    weight: undefined,
    waitTimeout,
    owner: 'o'.repeat(OWNER_MAX_BYTES),
    value: Buffer.alloc(VALUE_MAX_BYTES, 0xff),
    locks,
  };
  const acquire: SessionAcquire = { ...common, requestId: 2 ** 32 - 1 };
  const start: AcquireStart = {
    ...common,
    resumeGrace: waitTimeout,
    heartbeatInterval: longestDuration(HEARTBEAT_INTERVAL_MAX_MS),
  };
  return {
    session: { kind: { $case: 'acquire', value: acquire } },
    acquire: { kind: { $case: 'start', value: start } },
  };
}

/** The longest encoding of a Duration of at most `maxMs` (whole seconds, or a second less and 999,999,999 ns). */
function longestDuration(maxMs: number): Duration {
  const seconds = Math.floor(maxMs / 1000);
  const exact: Duration = { seconds: BigInt(seconds), nanos: (maxMs % 1000) * 1e6 };
  const below: Duration = { seconds: BigInt(seconds - 1), nanos: 999_999_999 };
  return Duration.encode(below).finish().length > Duration.encode(exact).finish().length ? below : exact;
}

/** Bytes of the largest legal lock request, on either RPC. */
export const LARGEST_LEGAL_REQUEST_BYTES = (() => {
  const { session, acquire } = largestLegalRequests();
  return Math.max(
    SessionRequest.encode(session).finish().length,
    AcquireRequest.encode(acquire).finish().length,
  );
})();
