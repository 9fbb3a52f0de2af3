/*
 * The Session requests a lock request sends about itself: what a LockHandle asks
 * (`RequestMessage`), named by the request's id as it goes on the wire.
 */
import {
  LockMode as WireLockMode,
  type LockTarget,
  type SessionAcquire,
  type SessionRequest,
} from '../gen/lockstream/v1/lockstream.js';
import type { LockRequest } from './acquire-options.js';
import type { LockSpec } from './lock.js';
import { toDuration, WIRE_MODES } from './wire-values.js';

/** What a request asks of the server: to be queued, let go, and a holder's asks. */
export type RequestMessage =
  | { readonly kind: 'acquire' | 'release' | 'cancel' | 'downgrade' }
  | { readonly kind: 'value'; readonly value: Buffer };

/** `message` about request `requestId` (asking for `request`), as a Session request. */
export function sessionRequest(
  requestId: number,
  request: LockRequest,
  message: RequestMessage,
): SessionRequest {
  switch (message.kind) {
    case 'acquire':
      return { kind: { $case: 'acquire', value: wireRequest(request, requestId) } };
    case 'release':
      return { kind: { $case: 'release', value: { requestId } } };
    case 'cancel':
      return { kind: { $case: 'cancel', value: { requestId } } };
    case 'value':
      return { kind: { $case: 'setValue', value: { requestId, value: message.value } } };
    case 'downgrade':
      return { kind: { $case: 'downgrade', value: { requestId } } };
  }
}

/** A request's `acquire`, named `requestId`. One object, no spread: it is made for every acquire. */
function wireRequest(request: LockRequest, requestId: number): SessionAcquire {
  // A multi-lock names its locks in `locks` only.
  const locks = request.locks;
  return {
    requestId,
    name: locks ? '' : request.name,
    mode: locks ? WireLockMode.UNSPECIFIED : WIRE_MODES[request.mode],
    waitTimeout: request.waitTimeout === undefined ? undefined : toDuration(request.waitTimeout),
    owner: request.owner,
    value: request.value,
    limit: locks ? 0 : request.limit,
    weight: locks ? undefined : request.weight,
    locks: locks ? locks.map(lockTarget) : NO_TARGETS,
  };
}

/** Never changed: the `locks` of every single-lock request. */
const NO_TARGETS: LockTarget[] = [];

function lockTarget(lock: LockSpec): LockTarget {
  const mode = lock.mode ?? (lock.limit === undefined ? 'mutex' : 'semaphore');
  return { name: lock.name, mode: WIRE_MODES[mode], limit: lock.limit ?? 0, weight: lock.weight };
}
