/*
 * How a caller campaigns in an election: the options of `campaign`, checked into the request the
 * SDK carries (a lock request, sent as a candidate on a Campaign stream of its own).
 */
import { publishedValue, type LockRequest } from './acquire-options.js';
import type { RevokeRequest } from './lock.js';
import { checkLabel, checkLockName, checkMs, invalidArgument } from './request-checks.js';

/** How to campaign. Every field is optional. */
export interface CampaignOptions {
  /**
   * Milliseconds to wait to be elected before rejecting with `LockTimeoutError`. Absent: wait
   * until `signal` aborts. 0: lead now or not at all.
   */
  readonly waitTimeout?: number | undefined;
  /** Who is campaigning (e.g. "api@host-7"), shown to observers and operators; at most 256 bytes. */
  readonly owner?: string;
  /** Aborting it while waiting withdraws the candidate and rejects with the signal's reason. */
  readonly signal?: AbortSignal;
  /** Called with the number of candidates ahead (the leader included) whenever it changes. */
  readonly onQueued?: (ahead: number) => void;
  /** Called when the server can no longer vouch for the leadership (see `Leadership.inDoubt`). */
  readonly onInDoubt?: () => void;
  /** Called when a leadership that was in doubt is confirmed again. */
  readonly onConfirmed?: () => void;
  /** Called when someone asks the leader to step down (see `Leadership.resignRequested`). */
  readonly onResignRequested?: (request: RevokeRequest) => void;
}

/**
 * The request `campaign(name, value, options)` asks for, checked before anything is sent as
 * `acquire` checks its own (LockClientError, INVALID_ARGUMENT). A candidate is a lock request
 * with a value: its stream says it is a candidate.
 */
export function candidateRequest(
  name: string,
  value: Uint8Array | string,
  options: CampaignOptions,
): LockRequest {
  checkLockName(name);
  if (typeof value !== 'string' && !(value instanceof Uint8Array)) {
    throw invalidArgument(name, `value must be a string or a Uint8Array, not ${typeof value}`);
  }
  const { waitTimeout } = options;
  if (waitTimeout !== undefined) checkMs(name, 'waitTimeout', waitTimeout);
  const owner = options.owner ?? '';
  checkLabel(name, 'owner', owner);
  return {
    name,
    mode: 'mutex',
    waitTimeout,
    owner,
    value: publishedValue(name, value),
    limit: 0,
    weight: undefined,
    locks: undefined,
    onQueued: options.onQueued,
    onInDoubt: options.onInDoubt,
    onConfirmed: options.onConfirmed,
    onRevokeRequested: options.onResignRequested,
  };
}
