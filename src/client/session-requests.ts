/**
 * The Session requests a lock request sends about itself, named by its id: what a LockHandle
 * asks (`RequestMessage`) as it goes on the wire.
 */
import type { SessionRequest } from '../gen/lockstream/v1/lockstream.js';
import { wireRequest } from './lock.js';
import type { LockHandle, RequestMessage } from './lock-handle.js';

/** `message` about `lock`, as a Session request. */
export function sessionRequest(lock: LockHandle, message: RequestMessage): SessionRequest {
  const requestId = lock.id;
  switch (message.kind) {
    case 'acquire':
      return { kind: { $case: 'acquire', value: wireRequest(lock.request, requestId) } };
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
