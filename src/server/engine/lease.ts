import { onAbort } from '../../common/abort.js';
import type { CoordinationStore, StoreSession } from '../stores/store.js';
import type { AcquireRequest, Lease, RevokeRequest } from './lock-request.js';
import { isLockError, LockError } from '../lock-error.js';

/**
 * A held lock: its node, the session it lives in, and the watch on the node (armed when the
 * request was queued, see LockEngine) that tells the holder about a revocation request, and
 * about the node being deleted by someone else (a forced revocation, an operator). Lost when
 * the session is lost, when the node goes, or when a revocation's deadline passes; then the
 * node is deleted too.
 */
export class HeldLease implements Lease {
  readonly name: string;
  readonly mode: AcquireRequest['mode'];
  readonly fencingToken: bigint;
  readonly #store: CoordinationStore;
  readonly #path: string;
  readonly #session: StoreSession;
  /** Why the lock was lost, once it is. */
  #lossReason: LockError | undefined;
  /** Made only when someone asks for `lost` (signals cost; the session path listens with onLost). */
  #lost: AbortController | undefined;
  /** Listener lists are made on first use: most leases have one listener, or none. */
  #lossListeners: Listeners<LockError> | undefined;
  readonly #unfollow: () => void;
  readonly #releasing: () => void;
  readonly #unlinkSession: () => void;
  #revokeListeners: Listeners<RevokeRequest> | undefined;
  #revokeRequest: RevokeRequest | undefined;
  #forceTimer: NodeJS.Timeout | undefined;
  #released: Promise<void> | undefined;

  /**
   * `unfollow` stops the watch on the node; until then, its events go to nodeChanged/nodeDeleted.
   * `releasing` is called when a release deletes the node while the lock is still held.
   */
  constructor(
    store: CoordinationStore,
    request: AcquireRequest,
    node: { readonly path: string; readonly session: StoreSession; readonly token: bigint },
    unfollow: () => void,
    releasing: () => void = () => {},
  ) {
    this.name = request.name;
    this.mode = request.mode;
    this.fencingToken = node.token;
    this.#store = store;
    this.#path = node.path;
    this.#session = node.session;
    this.#unfollow = unfollow;
    this.#releasing = releasing;
    const { session } = node;
    const sessionLost = (): void => this.#lose(lockLost(this.name, session.lost.reason));
    this.#unlinkSession = session.lost.aborted ? () => {} : onAbort(session.lost, sessionLost);
    if (session.lost.aborted) sessionLost();
  }

  /** The node was deleted, by someone else or with the session. */
  nodeDeleted(): void {
    if (this.#session.lost.aborted) {
      this.#lose(lockLost(this.name, this.#session.lost.reason));
      return;
    }
    const why = this.#revokeRequest
      ? `lock "${this.name}" was revoked: ${this.#revokeRequest.reason || 'no reason given'}`
      : `lock "${this.name}" was lost: its node was deleted by someone else`;
    this.#lose(new LockError('LOCK_LOST', why));
  }

  get lossReason(): LockError | undefined {
    return this.#lossReason;
  }

  onLost(listener: (reason: LockError) => void): () => void {
    return (this.#lossListeners ??= new Listeners()).add(listener);
  }

  get lost(): AbortSignal {
    if (!this.#lost) {
      this.#lost = new AbortController();
      if (this.#lossReason) this.#lost.abort(this.#lossReason);
    }
    return this.#lost.signal;
  }

  get confirmed(): boolean {
    return this.#session.confirmed && this.#lossReason === undefined;
  }

  onConfirmedChange(listener: (confirmed: boolean) => void): () => void {
    return this.#session.onConfirmedChange(listener);
  }

  get revokeRequest(): RevokeRequest | undefined {
    return this.#revokeRequest;
  }

  onRevokeRequested(listener: (request: RevokeRequest) => void): () => void {
    return (this.#revokeListeners ??= new Listeners()).add(listener);
  }

  release(): Promise<void> {
    this.#released ??= this.#lossReason
      ? Promise.reject(this.#lossReason)
      : (this.#stopWatching(), this.#releasing(), this.#store.delete(this.#path));
    return this.#released;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release().catch((error: unknown) => {
      if (!isLockError(error, 'LOCK_LOST')) throw error;
    });
  }

  /** The node's data changed (or was read): a revocation request may be in it. */
  nodeChanged(data: Uint8Array): void {
    if (this.#revokeRequest || this.#lossReason) return;
    const request = parseRevokeRequest(data);
    if (!request) return;
    this.#revokeRequest = request;
    this.#revokeListeners?.tell(request);
    if (request.forceAt === undefined) return;
    const reason = request.reason || 'no reason given';
    this.#forceTimer = setTimeout(
      () => {
        this.#lose(
          new LockError('LOCK_LOST', `lock "${this.name}" was revoked and not released in time: ${reason}`),
        );
        // Nobody else may wait on a holder that was told to go: free the lock now.
        void this.#store.delete(this.#path).catch(() => {});
      },
      Math.max(0, request.forceAt.getTime() - Date.now()),
    );
  }

  #lose(reason: LockError): void {
    if (this.#lossReason || this.#released) return;
    this.#lossReason = reason;
    this.#stopWatching();
    this.#lost?.abort(reason);
    const listeners = this.#lossListeners;
    this.#lossListeners = undefined;
    listeners?.tell(reason);
  }

  #stopWatching(): void {
    clearTimeout(this.#forceTimer);
    this.#unlinkSession();
    this.#revokeListeners = undefined;
    this.#unfollow();
  }
}

/** A short list of listeners: an array is a fraction of a Set's size, and these lists hold one or two. */
class Listeners<T> {
  #listeners: Array<(value: T) => void> = [];

  add(listener: (value: T) => void): () => void {
    this.#listeners.push(listener);
    return () => {
      const index = this.#listeners.indexOf(listener);
      if (index >= 0) this.#listeners.splice(index, 1);
    };
  }

  tell(value: T): void {
    for (const listener of [...this.#listeners]) listener(value);
  }
}

/**
 * What a holder is told when its lock was lost: the engine's reason (which names the lock and
 * says how), and that the work the lock protects must stop.
 */
export function lossReport(name: string, reason: unknown): LockError {
  // The engine's reasons name the lock and say how it was lost.
  const why = reason instanceof Error ? reason.message : `lock "${name}" was lost`;
  return new LockError('LOCK_LOST', `${why}; stop the work it protects`, { cause: reason });
}

function lockLost(name: string, reason: unknown): LockError {
  const why = reason instanceof Error ? reason.message : 'the store session ended';
  return new LockError('LOCK_LOST', `lock "${name}" was lost: ${why}`, { cause: reason });
}

/** What a request's node records (see LockEngine.acquire); `revoke` is added by RevokeLock. */
export interface NodeRecord {
  owner?: string;
  peer?: string;
  server?: string;
  since?: string;
  revoke?: { reason: string; requestedAt: string; forceAt?: string };
}

export function parseNodeRecord(data: Uint8Array): NodeRecord {
  try {
    const value: unknown = JSON.parse(Buffer.from(data).toString('utf8'));
    return typeof value === 'object' && value !== null ? value : {};
  } catch {
    return {};
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
