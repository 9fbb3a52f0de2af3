/*
 * How a caller asks for a lock: the options of `acquire`, checked into the request the SDK
 * carries.
 */
import { VALUE_MAX_BYTES } from '../common/limits.js';
import type { LockMode, LockSpec, RevokeRequest } from './lock.js';
import {
  checkLabel,
  checkLockName,
  checkMs,
  checkMultiLock,
  checkSemaphore,
  invalidArgument,
} from './request-checks.js';

/** How to wait for a lock. Every field is optional. */
export interface AcquireOptions {
  /** `mutex` (default), `read` or `write`; `semaphore` (the default when `limit` is given). */
  readonly mode?: LockMode;
  /**
   * Makes the request a semaphore request: the lock is held by as many requests at once as
   * their weights fit this limit (1 to 1,000,000), granted in queue order. Every request for
   * the name must name the same limit.
   */
  readonly limit?: number;
  /** A semaphore request's share of the limit, 1 to `limit`; default 1. */
  readonly weight?: number;
  /**
   * Milliseconds to wait in the queue before rejecting with `LockTimeoutError`. Absent: wait
   * until `signal` aborts. 0: try once, fail at once if the lock is not free (`tryAcquire`).
   */
  readonly waitTimeout?: number | undefined;
  /** Who is asking (e.g. "invoicer@host-7"), shown to operators; at most 256 bytes. */
  readonly owner?: string;
  /**
   * Published with the request (a string as UTF-8; at most 1024 bytes): `describe` and `watch`
   * show it, e.g. a leader's address. A holder changes it with `lock.setValue()`.
   */
  readonly value?: Uint8Array | string;
  /** Aborting it while waiting leaves the queue and rejects with the signal's reason. */
  readonly signal?: AbortSignal;
  /** Called with the number of requests ahead whenever the wait starts or that number changes. */
  readonly onQueued?: (ahead: number) => void;
  /** Called when the server can no longer vouch for the held lock (see `Lock.inDoubt`). */
  readonly onInDoubt?: () => void;
  /** Called when a lock that was in doubt is confirmed held again. */
  readonly onConfirmed?: () => void;
  /** Called when someone asks for the held lock back (see `Lock.revokeRequested`). */
  readonly onRevokeRequested?: (request: RevokeRequest) => void;
}

/**
 * A lock request as the SDK carries it, checked: what one `acquire` or `acquireAll` asks for, or
 * one `campaign` (see campaign-options.ts).
 */
export interface LockRequest {
  readonly name: string;
  /** A candidate's is `mutex` (one leader at a time): its RPC, Campaign, sends no mode. */
  readonly mode: LockMode;
  /** ms; absent: wait until cancelled; 0: try once. */
  readonly waitTimeout: number | undefined;
  readonly owner: string;
  /** Published with the request; empty: none. */
  readonly value: Buffer;
  /** A semaphore's limit; 0 in the lock modes. */
  readonly limit: number;
  /** A semaphore request's weight; undefined: 1 (and in the lock modes). */
  readonly weight: number | undefined;
  /** A multi-lock's locks (`name` then only names the set); undefined for one lock. */
  readonly locks: readonly LockSpec[] | undefined;
  readonly onQueued: ((ahead: number) => void) | undefined;
  readonly onInDoubt: (() => void) | undefined;
  readonly onConfirmed: (() => void) | undefined;
  readonly onRevokeRequested: ((request: RevokeRequest) => void) | undefined;
}

/** Never written to: the value of every request that publishes none. */
const NO_VALUE = Buffer.alloc(0);

/**
 * The request `acquire(name, options)` asks for, checked before anything is sent; throws a
 * LockClientError (INVALID_ARGUMENT) naming the option and the rule otherwise, as the server
 * would refuse it.
 */
export function lockRequest(name: string, options: AcquireOptions): LockRequest {
  checkLockName(name);
  const request = requestOptions(name, options);
  checkSemaphore(name, request.mode, options.limit, options.weight);
  return request;
}

/**
 * The request `acquireAll(locks, options)` asks for (`options` without mode, limit and weight),
 * each lock and the set checked as `lockRequest` checks one lock.
 */
export function multiLockRequest(locks: readonly LockSpec[], options: AcquireOptions): LockRequest {
  const name = locks.map((lock) => String(lock.name)).join(' + ');
  for (const lock of locks) lockRequest(lock.name, lock);
  checkMultiLock(
    name,
    locks.map((lock) => lock.name),
  );
  return { ...requestOptions(name, options), locks };
}

/** A request's options other than its name, limit and weight (checked where they apply), checked. */
function requestOptions(name: string, options: AcquireOptions): LockRequest {
  const { limit, weight } = options;
  const mode = options.mode ?? (limit === undefined ? 'mutex' : 'semaphore');
  if (mode !== 'mutex' && mode !== 'read' && mode !== 'write' && mode !== 'semaphore') {
    throw invalidArgument(
      name,
      `mode must be "mutex", "read", "write" or "semaphore", not ${JSON.stringify(mode)}`,
    );
  }
  const { waitTimeout } = options;
  if (waitTimeout !== undefined) checkMs(name, 'waitTimeout', waitTimeout);
  const owner = options.owner ?? '';
  checkLabel(name, 'owner', owner);
  return {
    name,
    mode,
    waitTimeout,
    owner,
    value: options.value === undefined ? NO_VALUE : publishedValue(name, options.value),
    limit: limit ?? 0,
    weight,
    locks: undefined,
    onQueued: options.onQueued,
    onInDoubt: options.onInDoubt,
    onConfirmed: options.onConfirmed,
    onRevokeRequested: options.onRevokeRequested,
  };
}

/** A value to publish (a string as UTF-8), checked: at most VALUE_MAX_BYTES. */
export function publishedValue(name: string, value: Uint8Array | string): Buffer {
  const bytes = Buffer.from(value);
  if (bytes.byteLength > VALUE_MAX_BYTES) {
    throw invalidArgument(name, `value is ${bytes.byteLength} bytes; the limit is ${VALUE_MAX_BYTES}`);
  }
  return bytes;
}
