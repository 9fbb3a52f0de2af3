/*
 * What a holder is told about its lock while it holds it: doubt and confirmation, a request to
 * give it back, and its loss; the callbacks it asked for, `lost`, and `whenConfirmed()`.
 */
import type { LockRequest } from './acquire-options.js';
import type { LockLostError } from './errors.js';
import type { RevokeRequest } from './lock.js';

type Callbacks = Pick<LockRequest, 'onInDoubt' | 'onConfirmed' | 'onRevokeRequested'>;

/**
 * The signals of one held lock; a LockHandle is one, and says when each applies (`doubt`,
 * `confirm`, `revoke`, `lose`). Each is told once: doubt until confirmed, a revocation once
 * (again if a deadline is added), a loss for good.
 */
export abstract class HoldSignals {
  readonly #callbacks: Callbacks;
  /** Made when someone asks for `lost` (most callers only acquire and release). */
  #lost: AbortController | undefined;
  #lossFailure: LockLostError | undefined;
  #inDoubt = false;
  #revokeRequested: RevokeRequest | undefined;
  #confirmationWaiters: Array<{ resolve: () => void; reject: (error: unknown) => void }> | undefined;

  constructor(callbacks: Callbacks) {
    this.#callbacks = callbacks;
  }

  get lost(): AbortSignal {
    if (!this.#lost) {
      this.#lost = new AbortController();
      if (this.#lossFailure) this.#lost.abort(this.#lossFailure);
    }
    return this.#lost.signal;
  }

  get revokeRequested(): RevokeRequest | undefined {
    return this.#revokeRequested;
  }

  get inDoubt(): boolean {
    return this.#inDoubt;
  }

  whenConfirmed(): Promise<void> {
    if (this.#lossFailure) return Promise.reject(this.#lossFailure);
    if (!this.#inDoubt) return Promise.resolve();
    return new Promise((resolve, reject) => (this.#confirmationWaiters ??= []).push({ resolve, reject }));
  }

  /** Why the lock was lost; undefined while it was not. */
  protected get lossFailure(): LockLostError | undefined {
    return this.#lossFailure;
  }

  /** Nobody can vouch for the lock now (the server said so, or the stream broke). */
  protected doubt(): void {
    if (this.#inDoubt) return;
    this.#inDoubt = true;
    this.#callbacks.onInDoubt?.();
  }

  /** The lock in doubt is held still. */
  protected confirm(): void {
    if (!this.#inDoubt) return;
    this.#inDoubt = false;
    const waiters = this.#confirmationWaiters;
    this.#confirmationWaiters = undefined;
    if (waiters) for (const waiter of waiters) waiter.resolve();
    this.#callbacks.onConfirmed?.();
  }

  /** Someone asked for the lock back; told to the caller once, and again if a deadline is added. */
  protected revoke(request: RevokeRequest): void {
    const told = this.#revokeRequested;
    if (told && !(told.forceAt === undefined && request.forceAt !== undefined)) return;
    this.#revokeRequested = request;
    this.#callbacks.onRevokeRequested?.(request);
  }

  /** The held lock is lost: `lost` aborts, and whoever waits for a confirmation hears it. */
  protected lose(failure: LockLostError): void {
    this.#lossFailure = failure;
    this.#lost?.abort(failure);
    const waiters = this.#confirmationWaiters;
    this.#confirmationWaiters = undefined;
    if (waiters) for (const waiter of waiters) waiter.reject(failure);
  }
}
