/*
 * What the client checks before it sends a request: whatever the server would refuse with
 * INVALID_ARGUMENT and can be seen here, in the server's words. A request refused here is never
 * sent, so it cannot disturb anything else on the client's stream; it fails with the same
 * LockClientError (INVALID_ARGUMENT) the server's refusal would give.
 */
import { status as Status } from '@grpc/grpc-js';
import {
  HEARTBEAT_INTERVAL_MAX_MS,
  HEARTBEAT_INTERVAL_MIN_MS,
  MULTI_LOCK_MAX,
  MULTI_LOCK_MIN,
  OWNER_MAX_BYTES,
  SEMAPHORE_LIMIT_MAX,
  WAIT_TIMEOUT_MAX_MS,
} from '../common/limits.js';
import { lockNameProblem } from '../common/lock-name-rule.js';
import { LockClientError } from './errors.js';

/** The error for an argument refused before sending. */
export function invalidArgument(lockName: string, details: string): LockClientError {
  return new LockClientError(lockName, Status.INVALID_ARGUMENT, details);
}

const CONTROL_CHARACTER = /\p{Cc}/u;

/** A lock name is 1 to LOCK_NAME_MAX_BYTES of UTF-8 without control characters (nor lone surrogates). */
export function checkLockName(name: unknown): asserts name is string {
  if (typeof name !== 'string') {
    throw invalidArgument('', `invalid lock name: expected a string, not ${typeof name}`);
  }
  const problem = lockNameProblem(name);
  if (problem !== undefined) throw invalidArgument(name, `invalid lock name: ${problem}`);
}

/** A free-form label (an owner, a revocation's reason): at most OWNER_MAX_BYTES, no control characters. */
export function checkLabel(lockName: string, field: string, value: unknown): asserts value is string {
  if (typeof value !== 'string') {
    throw invalidArgument(lockName, `${field} must be a string, not ${typeof value}`);
  }
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes > OWNER_MAX_BYTES) {
    throw invalidArgument(lockName, `${field} is ${bytes} bytes of UTF-8; the limit is ${OWNER_MAX_BYTES}`);
  }
  if (CONTROL_CHARACTER.test(value)) throw invalidArgument(lockName, `${field} contains a control character`);
}

/** A duration option in milliseconds: 0 to the longest the server accepts (WAIT_TIMEOUT_MAX_MS). */
export function checkMs(lockName: string, option: string, value: number): void {
  if (!(typeof value === 'number' && value >= 0 && value <= WAIT_TIMEOUT_MAX_MS)) {
    throw invalidArgument(
      lockName,
      `${option} must be a number of milliseconds from 0 to ${WAIT_TIMEOUT_MAX_MS}, not ${String(value)}`,
    );
  }
}

/** The largest term (a uint64 on the wire). */
const TERM_MAX = 2n ** 64n - 1n;

/** A term (an election's fencing token): a bigint from 0 to 2^64 - 1. */
export function checkTerm(electionName: string, field: string, value: unknown): asserts value is bigint {
  if (typeof value !== 'bigint' || value < 0n || value > TERM_MAX) {
    const shown = typeof value === 'bigint' ? `${value}n` : `${typeof value} ${String(value)}`;
    throw invalidArgument(electionName, `${field} must be a bigint from 0n to 2n ** 64n - 1n, not ${shown}`);
  }
}

/** A semaphore's limit and weight, or their absence in the lock modes (the server's rule). */
export function checkSemaphore(
  lockName: string,
  mode: string,
  limit: number | undefined,
  weight: number | undefined,
): void {
  // Whole numbers first: anything else cannot even be encoded.
  for (const [option, count] of [
    ['limit', limit],
    ['weight', weight],
  ] as const) {
    if (count !== undefined && !Number.isInteger(count)) {
      throw invalidArgument(lockName, `${option} must be a whole number, not ${count}`);
    }
  }
  // A limit of 0 is none, as on the wire.
  if (mode !== 'semaphore') {
    if (limit || weight !== undefined) {
      throw invalidArgument(
        lockName,
        `${limit ? 'limit' : 'weight'} applies to semaphore mode only; this request asks for ${mode} mode`,
      );
    }
    return;
  }
  if (!limit || limit < 1 || limit > SEMAPHORE_LIMIT_MAX) {
    throw invalidArgument(
      lockName,
      !limit
        ? `limit is required in semaphore mode: 1 to ${SEMAPHORE_LIMIT_MAX}`
        : `limit ${limit} is out of range: expected 1 to ${SEMAPHORE_LIMIT_MAX}`,
    );
  }
  if (weight !== undefined && !(weight >= 1 && weight <= limit)) {
    throw invalidArgument(
      lockName,
      weight > limit
        ? `weight ${weight} is more than the limit ${limit}: the request could never be granted`
        : `weight ${weight} is out of range: expected 1 to the limit (${limit})`,
    );
  }
}

/** A multi-lock's names: MULTI_LOCK_MIN to MULTI_LOCK_MAX, each named once. */
export function checkMultiLock(setName: string, names: readonly string[]): void {
  if (names.length < MULTI_LOCK_MIN || names.length > MULTI_LOCK_MAX) {
    throw invalidArgument(
      setName,
      `locks names ${names.length} lock${names.length === 1 ? '' : 's'}: a multi-lock takes ${MULTI_LOCK_MIN} to ${MULTI_LOCK_MAX}`,
    );
  }
  const seen = new Set<string>();
  names.forEach((name, i) => {
    if (seen.has(name)) {
      throw invalidArgument(setName, `locks[${i}]: "${name}" is named twice in one multi-lock`);
    }
    seen.add(name);
  });
}

/**
 * A client's resume grace and heartbeat interval in ms, which it sends when it opens a stream:
 * what the server accepts (0 is none of either). A RangeError, as for the client's other options.
 */
export function checkStreamOptions(resumeGraceMs: number, heartbeatIntervalMs: number): void {
  if (resumeGraceMs > WAIT_TIMEOUT_MAX_MS) {
    throw new RangeError(`resumeGraceMs must be at most ${WAIT_TIMEOUT_MAX_MS} ms, not ${resumeGraceMs}`);
  }
  if (
    heartbeatIntervalMs !== 0 &&
    (heartbeatIntervalMs < HEARTBEAT_INTERVAL_MIN_MS || heartbeatIntervalMs > HEARTBEAT_INTERVAL_MAX_MS)
  ) {
    throw new RangeError(
      `heartbeatIntervalMs must be 0 (none) or ${HEARTBEAT_INTERVAL_MIN_MS} to ${HEARTBEAT_INTERVAL_MAX_MS} ms, not ${heartbeatIntervalMs}`,
    );
  }
}
