import { VALUE_MAX_BYTES } from '../common/limits.js';
import type { LockMode, LockRequest, RevokeRequest } from './lock.js';

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

/** Never written to: the value of every request that publishes none. */
const NO_VALUE = Buffer.alloc(0);

/**
 * The request `acquire(name, options)` asks for, checked for what the wire cannot carry; throws
 * a TypeError naming the option otherwise.
 */
export function lockRequest(name: string, options: AcquireOptions): LockRequest {
  const { limit, weight } = options;
  const mode = options.mode ?? (limit === undefined ? 'mutex' : 'semaphore');
  if (mode !== 'mutex' && mode !== 'read' && mode !== 'write' && mode !== 'semaphore') {
    throw new TypeError(
      `lock "${name}": mode must be "mutex", "read", "write" or "semaphore", not ${JSON.stringify(mode)}`,
    );
  }
  // Ranges are the server's to check (it names what is wrong); here only what the wire cannot carry.
  for (const [option, count] of [
    ['limit', limit],
    ['weight', weight],
  ] as const) {
    if (count !== undefined && !(Number.isInteger(count) && Math.abs(count) < 2 ** 31)) {
      throw new TypeError(`lock "${name}": ${option} must be a whole number, not ${count}`);
    }
  }
  const { waitTimeout } = options;
  if (waitTimeout !== undefined && !(Number.isFinite(waitTimeout) && waitTimeout >= 0)) {
    throw new TypeError(
      `lock "${name}": waitTimeout must be a number of milliseconds >= 0, not ${waitTimeout}`,
    );
  }
  const value = options.value === undefined ? NO_VALUE : Buffer.from(options.value);
  if (value.byteLength > VALUE_MAX_BYTES) {
    throw new TypeError(
      `lock "${name}": value is ${value.byteLength} bytes; the limit is ${VALUE_MAX_BYTES}`,
    );
  }
  return {
    name,
    mode,
    waitTimeout,
    owner: options.owner ?? '',
    value,
    limit: limit ?? 0,
    weight,
    locks: undefined,
    onQueued: options.onQueued,
    onInDoubt: options.onInDoubt,
    onConfirmed: options.onConfirmed,
    onRevokeRequested: options.onRevokeRequested,
  };
}
