/*
 * A multi-lock's locks held as one lease (MultiLease): one release, one loss and one revocation
 * request for all its parts.
 */
import { isLockError, LockError } from '../lock-error.js';
import type { LockMode } from './lock-request.js';
import type { CoordinationStore } from '../stores/store.js';
import type { Lease, LeaseHolder, RevokeRequest } from './lock-request.js';
import { DeleteBatch } from './delete-batch.js';
import type { LockRequestNode } from './lease.js';
import { escalates, MonotonicDeadline } from './revocation.js';
import { whenTold } from './loss-reasons.js';

/**
 * The locks of a multi-lock, held as one: one release, one loss (the first part lost ends the
 * hold, and the other parts are released at once), one revocation request (the first any part
 * gets, escalated by the first deadline any part gets, see escalates()). The parts live in one
 * store session, so they are confirmed or in doubt together.
 */
export class MultiLease implements Lease {
  readonly name: string;
  readonly tokens: ReadonlyArray<{ readonly name: string; readonly token: bigint }>;
  readonly #parts: readonly LockRequestNode[];
  readonly #store: CoordinationStore;
  #lossReason: LockError | undefined;
  #lost: AbortController | undefined;
  #lossListeners: Array<(reason: LockError) => void | Promise<void>> = [];
  #revokeListeners: Array<(request: RevokeRequest) => void> = [];
  #revokeRequest: RevokeRequest | undefined;
  /** The timer of the one deadline the holder was told, for the whole set. */
  #forceTimer: MonotonicDeadline | undefined;
  #holder: LeaseHolder | undefined;
  #unlinkConfirmation: (() => void) | undefined;
  #released: Promise<void> | undefined;
  readonly #unlinks: Array<() => void>;

  constructor(name: string, parts: readonly LockRequestNode[], store: CoordinationStore) {
    this.name = name;
    this.#parts = parts;
    this.#store = store;
    this.tokens = parts.map((part) => ({ name: part.name, token: part.fencingToken }));
    // The set keeps one deadline, the one its holder is told: a part's own deadline, set on
    // that part after the holder was told another, must not take the set earlier.
    for (const part of parts) part.leaveDeadlines();
    this.#unlinks = parts.flatMap((part) => [
      part.onLost((reason) => this.#lose(part, reason)),
      part.onRevokeRequested((request) => this.#revoked(part, request)),
    ]);
    for (const part of parts) {
      if (part.lossReason) void this.#lose(part, part.lossReason);
      else if (part.revokeRequest) this.#revoked(part, part.revokeRequest);
    }
  }

  /** The first lock's mode (each part keeps its own). */
  get mode(): LockMode {
    return this.#parts[0]!.mode;
  }

  /** The first lock's token; `tokens` has each. */
  get fencingToken(): bigint {
    return this.#parts[0]!.fencingToken;
  }

  get lossReason(): LockError | undefined {
    return this.#lossReason;
  }

  get lost(): AbortSignal {
    if (!this.#lost) {
      this.#lost = new AbortController();
      if (this.#lossReason) this.#lost.abort(this.#lossReason);
    }
    return this.#lost.signal;
  }

  onLost(listener: (reason: LockError) => void | Promise<void>): () => void {
    this.#lossListeners.push(listener);
    return () => {
      this.#lossListeners = this.#lossListeners.filter((each) => each !== listener);
    };
  }

  get confirmed(): boolean {
    return this.#lossReason === undefined && this.#parts.every((part) => part.confirmed);
  }

  onConfirmedChange(listener: (confirmed: boolean) => void): () => void {
    // One session: its changes reach every part at once, so the first part speaks for all.
    return this.#parts[0]!.onConfirmedChange(listener);
  }

  get revokeRequest(): RevokeRequest | undefined {
    return this.#revokeRequest;
  }

  setHolder(holder: LeaseHolder | undefined): void {
    this.#holder = holder;
    this.#unlinkConfirmation?.();
    this.#unlinkConfirmation = undefined;
    if (!holder) return;
    // One session: its changes reach every part at once, so the first part speaks for all.
    this.#unlinkConfirmation = this.#parts[0]!.onConfirmedChange((confirmed) =>
      this.#holder?.confirmation(confirmed),
    );
  }

  onRevokeRequested(listener: (request: RevokeRequest) => void): () => void {
    this.#revokeListeners.push(listener);
    return () => {
      this.#revokeListeners = this.#revokeListeners.filter((each) => each !== listener);
    };
  }

  release(): Promise<void> {
    this.#released ??= this.#lossReason
      ? Promise.reject(this.#lossReason)
      : this.#releaseParts().then(() => {
          if (this.#lossReason) throw this.#lossReason;
        });
    return this.#released;
  }

  setValue(value: Uint8Array): Promise<void> {
    return Promise.all(this.#parts.map((part) => part.setValue(value))).then(() => {});
  }

  downgrade(): Promise<void> {
    return Promise.reject(
      new LockError(
        'NOT_HELD',
        `locks ${this.name} are held as one multi-lock: a downgrade applies to a single WRITE lock`,
      ),
    );
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release().catch((error: unknown) => {
      if (!isLockError(error, 'LOCK_LOST')) throw error;
    });
  }

  /** Releases every part still held; a part lost meanwhile is not an error here. */
  async #releaseParts(): Promise<void> {
    this.#forceTimer?.clear();
    this.setHolder(undefined);
    for (const unlink of this.#unlinks) unlink();
    // One step: nobody sees part of the set released and part held.
    const batch = new DeleteBatch(this.#store);
    const results = await Promise.allSettled(this.#parts.map((part) => part.release(batch)));
    const failure = results.find(
      (result): result is PromiseRejectedResult =>
        result.status === 'rejected' && !isLockError(result.reason, 'LOCK_LOST'),
    );
    if (failure) throw failure.reason;
  }

  /** The first part lost ends the whole hold; returns what the listeners said about telling the holder. */
  #lose(part: Lease, reason: LockError): Promise<void> | undefined {
    if (this.#lossReason || this.#released) return undefined;
    this.#forceTimer?.clear();
    this.#lossReason = new LockError('LOCK_LOST', `${reason.message} (one of locks ${this.name})`, {
      cause: reason,
    });
    this.#lost?.abort(this.#lossReason);
    const telling = this.#lossListeners.map((listener) => listener(this.#lossReason!));
    this.#lossListeners = [];
    const holder = this.#holder;
    this.setHolder(undefined);
    if (holder) telling.push(holder.lost(this.#lossReason));
    const others = this.#parts.filter((other) => other !== part);
    // The other locks go as soon as the holder has heard (as the lost one does): nobody may be
    // granted one of them while it still believes it holds the set.
    const told = whenTold(telling);
    void told.then(() => Promise.allSettled(others.map((other) => other.release())));
    return told;
  }

  /** `part` was asked back; the set's holder is told if that escalates what it was told. */
  #revoked(part: LockRequestNode, request: RevokeRequest): void {
    if (this.#lossReason || this.#released || !escalates(this.#revokeRequest, request)) return;
    this.#revokeRequest = request;
    this.#holder?.revokeRequested(request);
    for (const listener of [...this.#revokeListeners]) listener(request);
    if (request.forceAtMonotonic === undefined) return;
    // Started as the holder is told, so it never fires before; the part it was asked of goes
    // first, and the others once the holder has heard (see #lose). By the monotonic clock: a
    // step of the wall clock moves neither (see revocation.ts).
    this.#forceTimer = new MonotonicDeadline(request.forceAtMonotonic, () => part.force(request));
  }
}
