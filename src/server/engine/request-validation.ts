/*
 * What makes a request one the engine accepts; each error names the field and the problem
 * (INVALID_ARGUMENT), and nothing is queued for a request refused here.
 */
import {
  MULTI_LOCK_MAX,
  MULTI_LOCK_MIN,
  SEMAPHORE_LIMIT_MAX,
  VALUE_MAX_BYTES,
  WAIT_TIMEOUT_MAX_MS,
} from '../../common/limits.js';
import { LockError } from '../lock-error.js';
import { validateLockName } from './lock-nodes.js';
import type { LockMode } from './lock-request.js';
import type { AcquireRequest, LockTarget } from './lock-request.js';
import type { SemaphoreShape } from './lock-nodes.js';

/** Checks a request before anything is queued for it. */
export function validateRequest(request: AcquireRequest): void {
  if (request.locks) {
    validateMultiLock(request.locks);
  } else {
    validateLockName(request.name);
    validateSemaphore(request);
  }
  const { waitTimeoutMs } = request;
  if (
    waitTimeoutMs !== undefined &&
    !(Number.isInteger(waitTimeoutMs) && waitTimeoutMs >= 0 && waitTimeoutMs <= WAIT_TIMEOUT_MAX_MS)
  ) {
    throw new LockError(
      'INVALID_ARGUMENT',
      `invalid wait timeout ${waitTimeoutMs} ms: expected a whole number from 0 to ${WAIT_TIMEOUT_MAX_MS}`,
    );
  }
}

/** A semaphore request's limit and weight (default 1); undefined in the lock modes. */
export function semaphoreShapeOf(request: AcquireRequest): SemaphoreShape | undefined {
  return request.mode === 'semaphore' ? { limit: request.limit!, weight: request.weight ?? 1 } : undefined;
}

/** A multi-lock's targets: MULTI_LOCK_MIN to MULTI_LOCK_MAX distinct, valid locks; errors say which one. */
function validateMultiLock(locks: readonly LockTarget[]): void {
  if (locks.length < MULTI_LOCK_MIN || locks.length > MULTI_LOCK_MAX) {
    throw new LockError(
      'INVALID_ARGUMENT',
      `locks names ${locks.length} lock${locks.length === 1 ? '' : 's'}: a multi-lock takes ${MULTI_LOCK_MIN} to ${MULTI_LOCK_MAX}`,
    );
  }
  const seen = new Set<string>();
  locks.forEach((target, i) => {
    try {
      validateLockName(target.name);
      validateSemaphore(target);
    } catch (error) {
      if (error instanceof LockError) throw new LockError(error.code, `locks[${i}]: ${error.message}`);
      throw error;
    }
    if (seen.has(target.name)) {
      throw new LockError(
        'INVALID_ARGUMENT',
        `locks[${i}]: "${target.name}" is named twice in one multi-lock`,
      );
    }
    seen.add(target.name);
  });
}

/** A semaphore's limit and weight, or their absence in the other modes. */
function validateSemaphore({ mode, limit, weight }: Pick<AcquireRequest, 'mode' | 'limit' | 'weight'>): void {
  if (mode !== 'semaphore') {
    if (limit || weight !== undefined) {
      throw new LockError(
        'INVALID_ARGUMENT',
        `${limit ? 'limit' : 'weight'} applies to SEMAPHORE mode only; this request asks for ${mode.toUpperCase()} mode`,
      );
    }
    return;
  }
  if (limit === undefined || limit === 0) {
    throw new LockError(
      'INVALID_ARGUMENT',
      `limit is required in SEMAPHORE mode: 1 to ${SEMAPHORE_LIMIT_MAX}`,
    );
  }
  if (!Number.isInteger(limit) || limit < 1 || limit > SEMAPHORE_LIMIT_MAX) {
    throw new LockError(
      'INVALID_ARGUMENT',
      `limit ${limit} is out of range: expected 1 to ${SEMAPHORE_LIMIT_MAX}`,
    );
  }
  if (weight !== undefined && !(Number.isInteger(weight) && weight >= 1 && weight <= limit)) {
    throw new LockError(
      'INVALID_ARGUMENT',
      weight > limit && Number.isInteger(weight)
        ? `weight ${weight} is more than the limit ${limit}: the request could never be granted`
        : `weight ${weight} is out of range: expected 1 to the limit (${limit})`,
    );
  }
}

/** Why a value cannot be published in a lock's node, or undefined if it can. */
export function valueSizeProblem(value: Uint8Array): LockError | undefined {
  if (value.byteLength <= VALUE_MAX_BYTES) return undefined;
  return new LockError(
    'INVALID_ARGUMENT',
    `value is ${value.byteLength} bytes; the limit is ${VALUE_MAX_BYTES}`,
  );
}

/** Why a hold in `mode` cannot be downgraded: only WRITE can, and nothing is upgraded. */
export function notDowngradable(name: string, mode: LockMode): LockError {
  return new LockError(
    'NOT_HELD',
    `lock "${name}" is held in ${mode.toUpperCase()} mode: only a WRITE hold can be downgraded, and nothing is upgraded (two readers upgrading at once would wait for each other forever: release and acquire WRITE instead)`,
  );
}
