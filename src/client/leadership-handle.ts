/*
 * An elected candidate's Leadership: the lock request its Campaign stream carries, seen as a
 * leadership (its grant is the election, its token the term, its release the resignation).
 */
import type { ElectionCalls } from './election-calls.js';
import type { Leadership } from './election.js';
import type { RevokeRequest } from './lock.js';
import type { LockHandle } from './lock-handle.js';

/**
 * The Leadership of a granted candidate: what it tells and does is its LockHandle's (loss, doubt,
 * a request to step down, the release as the resignation), and `proclaim` is the Proclaim call
 * naming its term.
 */
export class LeadershipHandle implements Leadership {
  readonly #candidate: LockHandle;
  readonly #elections: ElectionCalls;

  /** `candidate`: a granted request, carried on a Campaign stream. */
  constructor(candidate: LockHandle, elections: ElectionCalls) {
    this.#candidate = candidate;
    this.#elections = elections;
  }

  get name(): string {
    return this.#candidate.name;
  }

  get term(): bigint {
    return this.#candidate.token;
  }

  get lost(): AbortSignal {
    return this.#candidate.lost;
  }

  get inDoubt(): boolean {
    return this.#candidate.inDoubt;
  }

  whenConfirmed(): Promise<void> {
    return this.#candidate.whenConfirmed();
  }

  get resignRequested(): RevokeRequest | undefined {
    return this.#candidate.revokeRequested;
  }

  proclaim(value: Uint8Array | string): Promise<void> {
    const lost = this.#candidate.lost;
    if (lost.aborted) return Promise.reject(lost.reason as Error);
    return this.#elections.proclaim(this.name, this.term, value);
  }

  resign(): Promise<void> {
    return this.#candidate.release();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.#candidate[Symbol.asyncDispose]();
  }
}
