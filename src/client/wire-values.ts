/*
 * Conversions between the SDK's values and the protobuf's: lock modes and durations.
 */
import type { Duration } from '../gen/google/protobuf/duration.js';
import { LockMode as WireLockMode } from '../gen/lockstream/v1/lockstream.js';
import type { LockMode } from './lock.js';

export const WIRE_MODES: Readonly<Record<LockMode, WireLockMode>> = {
  mutex: WireLockMode.MUTEX,
  read: WireLockMode.READ,
  write: WireLockMode.WRITE,
  semaphore: WireLockMode.SEMAPHORE,
};

const MODES_FROM_WIRE = new Map(
  (Object.entries(WIRE_MODES) as Array<[LockMode, WireLockMode]>).map(([mode, wire]) => [wire, mode]),
);

/** How a request in a queue is described: a lock mode, or an election's candidate (Campaign). */
export type DescribedMode = LockMode | 'candidate';

/** A mode from the wire; undefined for one this client does not know. */
export function fromWireMode(mode: WireLockMode): DescribedMode | undefined {
  return mode === WireLockMode.CANDIDATE ? 'candidate' : MODES_FROM_WIRE.get(mode);
}

/** Milliseconds as a protobuf Duration. */
export function toDuration(ms: number): Duration {
  const seconds = Math.floor(ms / 1000);
  return { seconds: BigInt(seconds), nanos: Math.round((ms - seconds * 1000) * 1e6) };
}

/** A protobuf Duration in milliseconds; 0 when absent. */
export function fromDuration(duration: Duration | undefined): number {
  return duration === undefined ? 0 : Number(duration.seconds) * 1000 + Math.floor(duration.nanos / 1e6);
}
