import type { RevokeRequest } from './lock-request.js';
import { parseNodeRecord } from './node-record.js';
import { Listeners } from './telling.js';

/**
 * A holder's revocation: what RevokeLock asked of it (written into its node's record, see
 * Revoker), as its node's watch brings it, told to the holder's listeners; and with a deadline,
 * the timer that takes the lock away once it passes.
 */
export class HeldRevocation {
  /** Called once the deadline of the request told has passed. */
  readonly #forced: (request: RevokeRequest) => void;
  #request: RevokeRequest | undefined;
  #listeners: Listeners<RevokeRequest> | undefined;
  #forceTimer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(forced: (request: RevokeRequest) => void) {
    this.#forced = forced;
  }

  /** The request the holder was told, if any. */
  get request(): RevokeRequest | undefined {
    return this.#request;
  }

  onRequested(listener: (request: RevokeRequest) => void): () => void {
    return (this.#listeners ??= new Listeners()).add(listener);
  }

  /** The holder's node record, as read or changed: a revocation request may be in it. */
  seen(data: Uint8Array): void {
    if (this.#stopped || this.#request) return;
    const request = parseRevokeRequest(data);
    if (!request) return;
    this.#request = request;
    this.#listeners?.tell(request);
    if (request.forceAt === undefined) return;
    this.#forceTimer = setTimeout(
      () => this.#forced(request),
      Math.max(0, request.forceAt.getTime() - Date.now()),
    );
  }

  /** The hold ended: nothing more is told or forced. */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#forceTimer);
    this.#listeners = undefined;
  }
}

function parseRevokeRequest(data: Uint8Array): RevokeRequest | undefined {
  const revoke = parseNodeRecord(data).revoke;
  if (typeof revoke !== 'object' || revoke === null) return undefined;
  const forceAt = typeof revoke.forceAt === 'string' ? new Date(revoke.forceAt) : undefined;
  return {
    reason: typeof revoke.reason === 'string' ? revoke.reason : '',
    forceAt: forceAt && !Number.isNaN(forceAt.getTime()) ? forceAt : undefined,
  };
}
