// The SDK's public door: everything a user of `lockstream/client` may import, and nothing else.
/**
 * The lockstream client SDK: hold distributed locks, and elect leaders, on a lockstream server.
 *
 * ```ts
 * import { LockClient } from 'lockstream/client';
 *
 * const locks = new LockClient('127.0.0.1:50051');
 * await locks.withLock('jobs/nightly', { waitTimeout: 10_000 }, async (signal) => {
 *   await runNightlyJob({ signal });
 * });
 * ```
 *
 * @packageDocumentation
 */
export {
  LockClient,
  type AcquireOptions,
  type CampaignOptions,
  type GuardedRecord,
  type HolderRecords,
  type LockClientOptions,
  type LockDescription,
  type LockPage,
  type LockRequestInfo,
  type RecordWriteOptions,
} from './lock-client.js';
export type { Lock, LockMode, LockSpec, RevokeRequest } from './lock.js';
export type { ElectionEvent, ElectionLeader, Leadership } from './election.js';
export type { DescribedMode } from './wire-values.js';
export {
  LockClientClosedError,
  LockClientError,
  LockLostError,
  LockTimeoutError,
  NotLeaderError,
  RevisionConflictError,
  TokenNotHeldError,
} from './errors.js';
export { status as Status } from '@grpc/grpc-js';
