import { describe, expect, it } from 'vitest';
import {
  AcquireRequest,
  AcquireStart,
  LockMode,
  LockTarget,
  SessionAcquire,
  SessionRequest,
} from '../../src/gen/lockstream/v1/lockstream.js';
import {
  LOCK_NAME_MAX_BYTES,
  MULTI_LOCK_MAX,
  OWNER_MAX_BYTES,
  VALUE_MAX_BYTES,
} from '../../src/common/limits.js';
import { DEFAULTS } from '../../src/server/config.js';
import { LARGEST_LEGAL_REQUEST_BYTES, largestLegalRequests } from '../../src/server/largest-request.js';

/** The fields of `message` not at their default (ts-proto's `create()` has every field at it). */
function fieldsSet<T extends object>(message: T, defaults: T): string[] {
  const json = (value: unknown): string =>
    JSON.stringify(value, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
  return (Object.keys(defaults) as Array<keyof T>)
    .filter((key) => json(message[key]) !== json(defaults[key]))
    .map(String);
}

describe('the largest legal lock request', () => {
  const { session, acquire } = largestLegalRequests();
  const sessionAcquire = session.kind?.$case === 'acquire' ? session.kind.value : SessionAcquire.create();
  const start = acquire.kind?.$case === 'start' ? acquire.kind.value : AcquireStart.create();

  it('sets every field a multi-lock may set, so a field added to the protocol is counted here too', () => {
    // A multi-lock leaves name, mode, limit and weight to its targets.
    const leftToTargets = ['name', 'mode', 'limit', 'weight'];
    expect(fieldsSet(sessionAcquire, SessionAcquire.create())).toEqual(
      Object.keys(SessionAcquire.create()).filter((key) => !leftToTargets.includes(key)),
    );
    expect(fieldsSet(start, AcquireStart.create())).toEqual(
      Object.keys(AcquireStart.create()).filter((key) => !leftToTargets.includes(key)),
    );
    for (const target of start.locks) {
      expect(fieldsSet(target, LockTarget.create())).toEqual(Object.keys(LockTarget.create()));
    }
  });

  it('takes as many locks, and as long names, owner and value as the server allows', () => {
    expect(start.locks).toHaveLength(MULTI_LOCK_MAX);
    expect(new Set(start.locks.map((target) => target.name)).size).toBe(MULTI_LOCK_MAX);
    for (const target of start.locks) {
      expect(Buffer.byteLength(target.name)).toBe(LOCK_NAME_MAX_BYTES);
      expect(target.mode).toBe(LockMode.SEMAPHORE);
    }
    expect(Buffer.byteLength(start.owner)).toBe(OWNER_MAX_BYTES);
    expect(start.value.byteLength).toBe(VALUE_MAX_BYTES);
    expect(sessionAcquire.locks).toEqual(start.locks);
  });

  it("is the larger of the two RPCs' encodings, and the default limit admits it", () => {
    const sizes = [
      SessionRequest.encode(session).finish().length,
      AcquireRequest.encode(acquire).finish().length,
    ];
    expect(LARGEST_LEGAL_REQUEST_BYTES).toBe(Math.max(...sizes));
    // 16 × (512-byte name + its framing, mode, limit, weight) alone is over 8 KiB.
    expect(LARGEST_LEGAL_REQUEST_BYTES).toBeGreaterThan(MULTI_LOCK_MAX * LOCK_NAME_MAX_BYTES);
    expect(DEFAULTS.maxMessageBytes).toBeGreaterThanOrEqual(LARGEST_LEGAL_REQUEST_BYTES);
    expect(DEFAULTS.maxMessageBytes % 1024).toBe(0);
  });
});
