/*
 * One request's node in a lock's queue, from its create to its end (LockRequestNode): queued, then
 * held as a Lease that can be released, given a new value, downgraded or revoked, or lost.
 */
import {
  NodeFollow,
  type CoordinationStore,
  type CreatedNode,
  type NodeReplacement,
  type NodeWatchHandlers,
  type StoreSession,
} from '../stores/store.js';
import type { AcquireRequest, Lease, LeaseHolder, RevokeRequest } from './lock-request.js';
import { isLockError, LockError } from '../lock-error.js';
import type { DeleteBatch } from './delete-batch.js';
import { replaceWithReadNode } from './node-downgrade.js';
import { recordedValue, updateNodeRecord, withValue } from './lock-nodes.js';
import type { ReleasedHolders } from './local-queue.js';
import { HeldRevocation } from './revocation.js';
import type { SessionDependent, SessionDependents } from './session-dependents.js';
import { Listeners, whenTold } from './loss-reasons.js';
import { lockLost, nodeGone, nodeVanished } from './loss-reasons.js';
import { notDowngradable, valueSizeProblem } from './request-validation.js';
import { plantedBug, RELEASED_EARLY_DELAY_MS } from '../planted-bugs.js';

/**
 * One lock request in the engine, from its node's create to its end, as one state machine:
 * queued → held → released, or lost (its session ended, its node was deleted by someone else,
 * or a revocation's deadline passed; then the node is deleted too). The node is followed from
 * its create on (the store reads it with a watch in the create's round trip, which also yields
 * the fencing token): while queued, its deletion ends the wait (`setVanishedListener`); once held, the
 * same watch brings revocation requests and the node's deletion. As a Lease it is handed out
 * once held.
 */
export class LockRequestNode implements Lease, NodeWatchHandlers, SessionDependent {
  readonly name: string;
  #mode: AcquireRequest['mode'];
  /** What to hand to the store's create: the node's watch, until the request ends (or a downgrade replaces the node). */
  follow = this.#newFollow();
  readonly #store: CoordinationStore;
  /** How a downgrade replaces the node, where the store can (see NodeReplacement). */
  readonly #replacement: NodeReplacement | undefined;
  #phase: 'queued' | 'held' | 'released' | 'lost' = 'queued';
  #path = '';
  #session: StoreSession | undefined;
  #token = 0n;
  /** While queued: told if the node is found deleted (see setVanishedListener). */
  #onVanished: ((reason: LockError) => void) | undefined;
  #vanishedReason: LockError | undefined;
  /** While queued: data seen that differs from what was written (a revocation, perhaps). */
  #changedData: Uint8Array | undefined;
  /** Why the lock was lost, once it is. */
  #lossReason: LockError | undefined;
  /** Made only when someone asks for `lost` (signals cost; the session path listens with onLost). */
  #lost: AbortController | undefined;
  /** Listener lists are made on first use: most leases have one listener, or none. */
  #lossListeners: Listeners<LockError, void | Promise<void>> | undefined;
  /** Made when first needed: most holds are never revoked, nor their node changed. */
  #revocation: HeldRevocation | undefined;
  /** Part of a multi-lock: its set keeps the deadlines (see leaveDeadlines). */
  #leavesDeadlines = false;
  #holder: LeaseHolder | undefined;
  #released: Promise<void> | undefined;
  /** The last change of the node (a value, a downgrade), so that the next one is applied after it. */
  #nodeChanged: Promise<void> | undefined;
  /** While a downgrade replaces the node: the old node's deletion is the replacement's. */
  #replacing = false;
  /** Told of a release that deletes the node while held (see hold). */
  #releasedTo: ReleasedHolders | undefined;
  /** Where the request hears of its session, and whether it is listed there now. */
  readonly #dependents: SessionDependents;
  #inSession = false;
  /** Set once downgraded: the mode it held before. */
  #downgradedFrom: AcquireRequest['mode'] | undefined;

  constructor(
    store: CoordinationStore,
    replacement: NodeReplacement | undefined,
    request: AcquireRequest,
    dependents: SessionDependents,
  ) {
    this.name = request.name;
    this.#mode = request.mode;
    this.#store = store;
    this.#replacement = replacement;
    this.#dependents = dependents;
  }

  get mode(): AcquireRequest['mode'] {
    return this.#mode;
  }

  get fencingToken(): bigint {
    return this.#token;
  }

  /** The node's follow: this request handles its events itself (no closures per request). */
  #newFollow(): NodeFollow {
    return new NodeFollow(this);
  }

  /** NodeWatchHandlers, for the node's follow: its data changed (or was read). */
  onData(data: Uint8Array): void {
    this.#changed(data);
  }

  /** NodeWatchHandlers, for the node's follow: it was deleted. */
  onDeleted(): void {
    if (!this.#replacing) this.#deleted();
  }

  /**
   * The store created the node: takes its path, session and fencing token (from the create's
   * answer, or the follow's first read); LOCK_LOST if the node was already gone.
   */
  created(created: CreatedNode, writtenBytes: number): void {
    this.#path = created.path;
    this.#session = created.session;
    const node = created.followed;
    if (!node) {
      this.#deleted();
      throw this.#vanishedReason ?? nodeVanished(this.name);
    }
    this.#token = created.creationId ?? node.creationId;
    if (node.data.byteLength !== writtenBytes) this.#changed(node.data);
    // Told for the node's whole life: a queued request's wait ends with its session, a held lock
    // is lost with it, and its holder hears of the session's doubt.
    const { session } = created;
    if (!session.lost.aborted) {
      this.#dependents.add(session, this);
      this.#inSession = true;
    }
  }

  #leaveSession(): void {
    if (!this.#inSession) return;
    this.#inSession = false;
    this.#dependents.remove(this.#session!, this);
  }

  /** SessionDependent: the store's session is lost. */
  sessionLost(): void {
    this.#inSession = false;
    const session = this.#session!;
    if (this.#phase === 'held') {
      void this.#lose(lockLost(this.name, session.lost.reason));
    } else if (this.#phase === 'queued' && !this.#vanishedReason) {
      this.#vanishedReason = session.lost.reason as LockError;
      this.#onVanished?.(this.#vanishedReason);
    }
  }

  /**
   * While queued: calls `listener` if the node is found deleted or its session is lost (at once
   * if it was), until it is set to undefined (there is one listener: the request's wait).
   */
  setVanishedListener(listener: ((reason: LockError) => void) | undefined): void {
    if (listener && this.#vanishedReason) {
      listener(this.#vanishedReason);
      return;
    }
    this.#onVanished = listener;
  }

  /**
   * The request holds the lock from now on. A release that deletes the node while the lock is
   * still held is added to `releasedTo`, if given.
   */
  hold(releasedTo?: ReleasedHolders): Lease {
    const session = this.#session!;
    this.#phase = 'held';
    this.#releasedTo = releasedTo;
    this.#onVanished = undefined;
    if (session.lost.aborted) void this.#lose(lockLost(this.name, session.lost.reason));
    if (this.#changedData) this.#changed(this.#changedData);
    this.#changedData = undefined;
    return this;
  }

  /** The request ended before it held: its node is no longer followed. */
  abandon(): void {
    this.#leaveSession();
    this.follow.stop();
  }

  get lossReason(): LockError | undefined {
    return this.#lossReason;
  }

  onLost(listener: (reason: LockError) => void | Promise<void>): () => void {
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
    return (this.#session?.confirmed ?? false) && this.#lossReason === undefined;
  }

  onConfirmedChange(listener: (confirmed: boolean) => void): () => void {
    return this.#session?.onConfirmedChange(listener) ?? (() => {});
  }

  get revokeRequest(): RevokeRequest | undefined {
    return this.#revocation?.request;
  }

  #revocations(): HeldRevocation {
    if (!this.#revocation) {
      const revocation = new HeldRevocation(
        (request) => this.#forced(request),
        (request) => this.#holder?.revokeRequested(request),
      );
      if (this.#leavesDeadlines) revocation.leaveDeadlines();
      if (this.#phase === 'released' || this.#phase === 'lost') revocation.stop();
      this.#revocation = revocation;
    }
    return this.#revocation;
  }

  setHolder(holder: LeaseHolder | undefined): void {
    this.#holder = holder;
  }

  /** SessionDependent: the holder hears of the session's doubt (while held: see #stopWatching). */
  confirmationChanged(confirmed: boolean): void {
    this.#holder?.confirmation(confirmed);
  }

  onRevokeRequested(listener: (request: RevokeRequest) => void): () => void {
    return this.#revocations().onRequested(listener);
  }

  /** Part of a multi-lock: the set keeps one deadline for its parts (see MultiLease). */
  leaveDeadlines(): void {
    this.#leavesDeadlines = true;
    this.#revocation?.leaveDeadlines();
  }

  /** Takes the lock away as a passed deadline of `request` does (the multi-lock's deadline). */
  force(request: RevokeRequest): void {
    this.#forced(request);
  }

  /** `batch`: delete the node together with the other nodes of a multi-lock. */
  release(batch?: DeleteBatch): Promise<void> {
    if (!this.#released) {
      if (this.#lossReason) {
        this.#released = Promise.reject(this.#lossReason);
      } else {
        this.#phase = 'released';
        this.#stopWatching();
        this.#releasedTo?.add(this.#path);
        const remove = (): Promise<void> => (batch ? batch.add(this.#path) : this.#store.delete(this.#path));
        this.#released = plantedBug === 'released-early' ? releasedEarly(remove) : remove();
      }
    }
    return this.#released;
  }

  setValue(value: Uint8Array): Promise<void> {
    const tooLarge = valueSizeProblem(value);
    if (tooLarge) return Promise.reject(tooLarge);
    const encoded = recordedValue(value);
    const write = async (): Promise<void> => {
      this.#throwUnlessHeld();
      const record = await updateNodeRecord(this.#store, this.#path, (current) =>
        current.value === encoded ? undefined : withValue(current, encoded),
      );
      // Gone: deleted by someone else or with the session (its watch reports the loss), or
      // released meanwhile.
      if (record === 'missing') {
        this.#throwUnlessHeld(nodeGone(this.name));
      }
    };
    return this.#changeNode(write);
  }

  /**
   * Turns a write hold into a read hold in one step: the node is replaced by a read node with
   * the same place in the queue (the same sequence number) and the same record (the fencing
   * token, recorded in it, stays), so no writer or reader changes places in between; readers
   * queued behind it that waited only for it are granted (their watch on the old node fires).
   * Resolves at once for a hold downgraded before. Rejects with `NOT_HELD` for a MUTEX or READ
   * hold (there is no upgrade), `LOCK_LOST` if the lock is lost, `UNSUPPORTED` on a store that
   * cannot replace a node atomically.
   */
  downgrade(): Promise<void> {
    return this.#changeNode(async () => {
      this.#throwUnlessHeld();
      if (this.#mode === 'read' && this.#downgradedFrom === 'write') return;
      if (this.#mode !== 'write') throw notDowngradable(this.name, this.#mode);
      const replaced = await replaceWithReadNode(
        this.#store,
        this.#replacement,
        this.#path,
        this.#token,
        this.#session!,
        {
          checkHeld: () => this.#throwUnlessHeld(),
          newFollow: () => this.#newFollow(),
          replacing: (on) => (this.#replacing = on),
        },
      );
      if (replaced) {
        this.follow.stop();
        this.follow = replaced.follow;
        this.#path = replaced.path;
        this.#mode = 'read';
        this.#downgradedFrom = 'write';
        // A read hold's release frees no waiter the engine shortcut knows of.
        this.#releasedTo = undefined;
        return;
      }
      // The node is gone (deleted by a forced revocation, or with the session).
      void this.#lose(nodeGone(this.name));
      this.#throwUnlessHeld();
    });
  }

  /** Runs `change` once the changes asked for before it are done. */
  #changeNode(change: () => Promise<void>): Promise<void> {
    const changed = (this.#nodeChanged ?? Promise.resolve()).then(change, change);
    this.#nodeChanged = changed.catch(() => {});
    return changed;
  }

  #throwUnlessHeld(otherwise?: LockError): void {
    if (this.#lossReason) throw this.#lossReason;
    if (this.#phase !== 'held') {
      throw new LockError('NOT_HELD', `lock "${this.name}" is not held: it was released`);
    }
    if (otherwise) throw otherwise;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release().catch((error: unknown) => {
      if (!isLockError(error, 'LOCK_LOST')) throw error;
    });
  }

  /** The node's data changed (or was read): a revocation request may be in it. */
  #changed(data: Uint8Array): void {
    if (this.#phase === 'queued') this.#changedData = data;
    else if (this.#phase === 'held') this.#revocations().seen(data);
  }

  /**
   * A revocation's deadline passed while held: the lock is lost, and nobody else may wait on a
   * holder that was told to go, so the node is deleted as soon as the holder has heard it lost
   * the lock (it must hear before anyone is granted it).
   */
  #forced(request: RevokeRequest): void {
    const telling = this.#lose(
      new LockError(
        'LOCK_LOST',
        `lock "${this.name}" was revoked and not released in time: ${request.reason || 'no reason given'}`,
      ),
    );
    void whenTold(telling)
      .then(() => this.#store.delete(this.#path))
      .catch(() => {});
  }

  /** The node was deleted, by someone else or with the session. */
  #deleted(): void {
    if (this.#phase === 'queued') {
      if (this.#vanishedReason) return;
      this.#vanishedReason = nodeVanished(this.name);
      this.#onVanished?.(this.#vanishedReason);
      return;
    }
    if (this.#phase !== 'held') return;
    const session = this.#session!;
    if (session.lost.aborted) {
      void this.#lose(lockLost(this.name, session.lost.reason));
      return;
    }
    const revoked = this.#revocation?.request;
    const why = revoked
      ? `lock "${this.name}" was revoked: ${revoked.reason || 'no reason given'}`
      : `lock "${this.name}" was lost: its node was deleted by someone else`;
    void this.#lose(new LockError('LOCK_LOST', why));
  }

  /** Ends the hold as lost; returns what the loss listeners said about telling the holder. */
  #lose(reason: LockError): Array<void | Promise<void>> {
    if (this.#phase !== 'held') return [];
    this.#phase = 'lost';
    this.#lossReason = reason;
    this.#stopWatching();
    this.#lost?.abort(reason);
    const holder = this.#holder;
    this.setHolder(undefined);
    const listeners = this.#lossListeners;
    this.#lossListeners = undefined;
    const telling = listeners?.tell(reason) ?? [];
    if (holder) telling.push(holder.lost(reason));
    return telling;
  }

  #stopWatching(): void {
    this.#revocation?.stop();
    this.#leaveSession();
    this.follow.stop();
  }
}

/** The planted bug `released-early` (planted-bugs.ts): resolves now, deletes later. */
function releasedEarly(remove: () => Promise<void>): Promise<void> {
  setTimeout(() => void remove().catch(() => {}), RELEASED_EARLY_DELAY_MS);
  return Promise.resolve();
}
