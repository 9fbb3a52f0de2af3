/*
 * A lock held by an in-process caller (CallerLease, see LockEngine.acquire): the session of one
 * request whose news it turns into a Lease — a promise of the grant, a `lost` signal, doubt and
 * revocation listeners, and a release that resolves once the lock is free.
 */
import type { LockError } from '../lock-error.js';
import type { AcquireRequest, Lease, LockMode, RequestTag, RevokeRequest } from './lock-request.js';
import { Listeners } from './loss-reasons.js';
import type { RequestAccounting, RequestListener, RequestNews, RequestSession } from './request-news.js';
import type { LockRequest } from './request.js';

/** How an in-process caller hears of its request before the grant. */
export interface CallerOptions {
  readonly onQueued?: ((ahead: number) => void) | undefined;
  readonly tag?: RequestTag | undefined;
}

/**
 * The session of an in-process caller's one request, and the Lease it holds: the request tells
 * it its place (to `onQueued`), its grant (which resolves `granted`), or its end (which rejects
 * it); once held, its doubt, revocation and loss, and the end of a release.
 */
export class CallerLease implements RequestSession, RequestListener, Lease {
  readonly listener = this;
  readonly accounting = UNCOUNTED;
  readonly ended = false;
  readonly streamNoun = 'call';
  /** Resolves with this lease once the request holds; rejects with why it never will. */
  readonly granted: Promise<Lease>;
  #request: LockRequest | undefined;
  #held = false;
  readonly #options: CallerOptions;
  #grant: { resolve: (lease: Lease) => void; reject: (reason: unknown) => void } | undefined;
  #releasing: { resolve: () => void; reject: (reason: unknown) => void } | undefined;
  #released: Promise<void> | undefined;
  #lost: AbortController | undefined;
  #lossListeners: Listeners<LockError, void | Promise<void>> | undefined;
  #confirmed = true;
  #confirmationListeners: Listeners<boolean> | undefined;
  #revokeRequest: RevokeRequest | undefined;
  #revokeListeners: Listeners<RevokeRequest> | undefined;
  /** Called once the request is over (the caller's withdrawal is no longer followed). */
  over: (() => void) | undefined;

  constructor(options: CallerOptions) {
    this.#options = options;
    this.granted = new Promise((resolve, reject) => (this.#grant = { resolve, reject }));
  }

  /** The request this lease is the session of (set once, right after it is made). */
  set request(request: LockRequest) {
    this.#request = request;
  }

  get name(): string {
    return this.#request!.name;
  }

  get mode(): LockMode {
    return this.#request!.mode;
  }

  get fencingToken(): bigint {
    return this.#request!.fencingToken;
  }

  get tokens(): ReadonlyArray<{ readonly name: string; readonly token: bigint }> | undefined {
    return this.#request!.tokens;
  }

  get lossReason(): LockError | undefined {
    return this.#request?.lossReason;
  }

  get lost(): AbortSignal {
    if (!this.#lost) {
      this.#lost = new AbortController();
      if (this.lossReason) this.#lost.abort(this.lossReason);
    }
    return this.#lost.signal;
  }

  onLost(listener: (reason: LockError) => void | Promise<void>): () => void {
    return (this.#lossListeners ??= new Listeners()).add(listener);
  }

  get confirmed(): boolean {
    return this.#confirmed && this.lossReason === undefined;
  }

  onConfirmedChange(listener: (confirmed: boolean) => void): () => void {
    return (this.#confirmationListeners ??= new Listeners()).add(listener);
  }

  get revokeRequest(): RevokeRequest | undefined {
    return this.#revokeRequest;
  }

  onRevokeRequested(listener: (request: RevokeRequest) => void): () => void {
    return (this.#revokeListeners ??= new Listeners()).add(listener);
  }

  release(): Promise<void> {
    if (this.#released) return this.#released;
    const lossReason = this.lossReason;
    if (lossReason) {
      this.#released = Promise.reject(lossReason);
      return this.#released;
    }
    this.#released = new Promise((resolve, reject) => (this.#releasing = { resolve, reject }));
    this.#request!.release('release');
    return this.#released;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release().catch((error: unknown) => {
      if (!this.lossReason) throw error;
    });
  }

  // RequestListener: the request's news.

  tell(_id: number, _request: AcquireRequest, news: RequestNews): void | Promise<void> {
    switch (news.kind) {
      case 'waiting':
        this.#options.onQueued?.(news.ahead);
        return undefined;
      case 'granted':
        if (this.#held) return undefined;
        this.#held = true;
        this.#grant?.resolve(this);
        return undefined;
      case 'confirmation':
        this.#confirmed = news.confirmed;
        this.#confirmationListeners?.tell(news.confirmed);
        return undefined;
      case 'revoke-requested':
        this.#revokeRequest = news.revoke;
        this.#revokeListeners?.tell(news.revoke);
        return undefined;
      case 'lost':
        return this.#lose();
      case 'ended':
        this.over?.();
        if (!this.#held) this.#grant?.reject(news.error);
        else if (news.error === undefined) this.#releasing?.resolve();
        else this.#releasing?.reject(this.lossReason ?? news.error);
        return undefined;
      case 'released':
      case 'value-published':
      case 'downgraded':
        return undefined;
    }
  }

  /** The hold was lost: `lost` aborts and every loss listener is called; settles once they have had it. */
  #lose(): void | Promise<void> {
    this.over?.();
    const reason = this.lossReason!;
    this.#confirmed = false;
    this.#lost?.abort(reason);
    const listeners = this.#lossListeners;
    this.#lossListeners = undefined;
    const pending = (listeners?.tell(reason) ?? []).filter(
      (told): told is Promise<void> => told instanceof Promise,
    );
    if (pending.length === 0) return undefined;
    return Promise.allSettled(pending).then(() => {});
  }

  replaced(): void {}

  handedOver(): void {}

  isAttached(listener: RequestListener): boolean {
    return listener === this;
  }

  storeWork<T>(work: () => Promise<T>): Promise<T> {
    return work();
  }

  forgetRequest(): void {}

  tag(): RequestTag | undefined {
    return this.#options.tag;
  }
}

const uncounted = (): void => {};

/** The counts of an in-process caller's request: none (the server's metrics count its sessions' requests). */
const UNCOUNTED: RequestAccounting = {
  waiting: uncounted,
  waitEnded: uncounted,
  granted: uncounted,
  holdEnded: uncounted,
  notGranted: uncounted,
  termBegan: uncounted,
};
