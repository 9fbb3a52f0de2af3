import { randomUUID } from 'node:crypto';
import { LockError } from '../lock-error.js';
import {
  baseName,
  parentPath,
  type CreatedNode,
  type OwnedNode,
  type SequentialEntry,
  type StoreSession,
} from '../stores/store.js';
import { LockRequestNode } from './lease.js';
import { HANDED_OVER } from './loss-reasons.js';
import type { AcquireRequest, Lease, QueuePlace, RequestOptions, Withdrawal } from './lock-request.js';
import { nodePrefix, parseNodeName } from './node-name.js';
import { requestRecords } from './node-record.js';
import type { RequestTag } from './lock-request.js';
import type { HeldPosition } from './queue-position.js';
import { endDeadline, withDeadline } from './queue-wait.js';
import { semaphoreShapeOf } from './request-validation.js';
import type { TurnOwner } from './turn-wait.js';
import { waitForAll } from './multi-wait.js';
import { grantPart, type AcquireListener, type AcquisitionEngine, type Part } from './request-part.js';

/**
 * One request in the engine, from its call to its lease or its end: creates its nodes (a
 * multi-lock's in one transaction), waits for their turn (QueueWaits), and hands the lease to
 * its listener; on any failure or withdrawal deletes its nodes first. A request whose store
 * session was lost while it waited queues again on the new one. It is a state machine told by
 * callbacks, not a suspended async function with a promise chain: thousands wait at once.
 */
export class Acquisition implements TurnOwner {
  readonly #engine: AcquisitionEngine;
  readonly #request: AcquireRequest;
  readonly #listener: AcquireListener;
  readonly #place: QueuePlace | undefined;
  readonly #tag: RequestTag | undefined;
  /** Withdrawn by the caller or, with a wait timeout, by the deadline (see withDeadline). */
  readonly #stop: Withdrawal;
  /** When the request was made (ms): its records say so, again if it queues again. */
  readonly #since = Date.now();
  /** Nodes another instance made (see LockEngine.adopt): a lost session ends the request. */
  readonly #adopted: boolean;
  #parts: readonly Part[] = [];
  #session: StoreSession | undefined;
  #ended = false;

  constructor(
    engine: AcquisitionEngine,
    request: AcquireRequest,
    options: RequestOptions,
    listener: AcquireListener,
    adopted: boolean,
  ) {
    this.#engine = engine;
    this.#request = request;
    this.#listener = listener;
    this.#place = options.place;
    this.#tag = options.tag;
    this.#adopted = adopted;
    this.#stop = withDeadline(request, options.withdrawal);
  }

  /**
   * Queues once: creates the request's nodes and waits for their turn. A failure before the
   * store is asked is told as any other (asynchronously).
   */
  queue(): void {
    const request = this.#request;
    this.#parts = [];
    try {
      const data = this.#records();
      const targets = request.locks?.map((target): AcquireRequest => ({
        ...request,
        ...target,
        locks: undefined,
      }));
      // Mapped, not pushed to: a waiter keeps `parts`, and a pushed-to empty array has seventeen slots.
      const made = (targets ?? [request]).map((target, i) => this.#part(target, data[i] ?? data[0]!));
      this.#parts = made.map(({ part }) => part);
      const written = data.map((record) => record.byteLength);
      const failed = (error: unknown): void => this.#createFailed(error);
      this.#engine.store
        .create(made.map(({ entry }) => entry))
        .then((created) => this.#created(created, written), failed);
    } catch (error) {
      this.#createFailed(error);
    }
  }

  /**
   * Carries on from nodes that exist already (see LockEngine.adopt), in the request's order:
   * each node's follow is armed first, then its queue listed (what the listing misses, the
   * follow tells); whatever a node's record says now (a revocation, perhaps) is news here.
   */
  adopt(nodes: readonly OwnedNode[]): void {
    const { store, replacement, semaphores, dependents } = this.#engine;
    const request = this.#request;
    this.#parts = nodes.map((owned, i): Part => {
      const target = request.locks ? { ...request, ...request.locks[i]!, locks: undefined } : request;
      const shape = semaphoreShapeOf(target);
      const requestId = shape ? parseNodeName(baseName(owned.path))?.requestId : undefined;
      const wakeup = requestId === undefined ? undefined : semaphores.register(requestId);
      const node = new LockRequestNode(store, replacement, target, dependents);
      return { request: target, node, wakeup, requestId, path: owned.path };
    });
    const session = store.session;
    this.#session = session;
    Promise.all(
      nodes.map(async (owned, i): Promise<CreatedNode> => {
        const followed = await store.watchNode(owned.path, this.#parts[i]!.node.follow);
        const siblings = await store.children(parentPath(owned.path));
        return { path: owned.path, session, siblings, creationId: owned.creationId, followed };
      }),
    ).then(
      (created) =>
        this.#created(
          created,
          nodes.map(() => -1),
        ),
      (error: unknown) => this.#waitFailed(error),
    );
  }

  #createFailed(error: unknown): void {
    for (const part of this.#parts) part.node.abandon();
    this.#forget();
    this.#fail(error);
  }

  /** The request's nodes exist: each takes its node, and the request waits for its turn. */
  #created(created: readonly CreatedNode[], written: readonly number[]): void {
    const parts = this.#parts;
    this.#session = created[0]!.session;
    parts.forEach((part, i) => (part.path = created[i]!.path));
    try {
      parts.forEach((part, i) => part.node.created(created[i]!, written[i] ?? written[0]!));
      if (this.#request.locks) {
        waitForAll(this.#engine, this.#request, parts, created, this.#stop, this.#place, this.#listener).then(
          (lease) => this.#granted(lease),
          (error: unknown) => this.#waitFailed(error),
        );
        return;
      }
      // What a waiter keeps until its turn: its part, not the created node (its record,
      // written and read back, and the first listing).
      const part = parts[0]!;
      this.#engine.waits.waitForTurn(
        part.request,
        created[0]!,
        part.node,
        this.#stop,
        this.#place,
        part.wakeup,
        this,
      );
    } catch (error) {
      this.#waitFailed(error);
    }
  }

  /** TurnOwner: the request waits with `ahead` requests ahead of it. */
  queued(ahead: number): void {
    this.#listener.queued(ahead);
  }

  /** TurnOwner: the single lock's turn came; it is handed out. */
  turn(current: HeldPosition, children: readonly string[]): void {
    let lease: Lease;
    try {
      lease = grantPart(this.#engine, this.#parts[0]!, current, children);
    } catch (error) {
      this.#waitFailed(error);
      return;
    }
    this.#granted(lease);
  }

  /** TurnOwner: the wait ended without the turn. */
  turnFailed(reason: unknown): void {
    this.#waitFailed(reason);
  }

  #granted(lease: Lease): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#forget();
    endDeadline(this.#stop);
    this.#listener.granted(lease);
  }

  /**
   * The wait failed: the nodes are deleted (unless their session took them, or the request
   * was handed over to another instance, which keeps them), then the request queues again if
   * only its session ended, or fails.
   */
  #waitFailed(error: unknown): void {
    if (this.#ended) return;
    const parts = this.#parts;
    const session = this.#session!;
    const stop = this.#stop;
    for (const part of parts) part.node.abandon();
    const after = (): void => {
      this.#forget();
      // Asked after the withdrawal: a closed session deletes its nodes before the store hears
      // that the session is over, so a waiter may see its node vanish first.
      if (!session.lost.aborted || stop.withdrawn) {
        this.#fail(stop.withdrawn ? stop.reason : error);
      } else if (this.#adopted) {
        // A taken-over session is not replaced: nothing is queued again.
        this.#fail(
          new LockError(
            'LOCK_LOST',
            `lock "${this.#request.name}": its taken-over session ended while it waited`,
          ),
        );
      } else {
        // The session (and with it our place in the queue) ended while we waited: queue again
        // on the new session rather than fail a caller who held nothing.
        this.#engine.logger.debug({ lock: this.#request.name }, 'session lost while waiting; queuing again');
        this.queue();
      }
    };
    if (!session.lost.aborted && stop.reason !== HANDED_OVER) {
      void Promise.all(parts.map((part) => this.#engine.withdraw(part.path))).then(after);
    } else {
      after();
    }
  }

  /** Ends the request without a lease; its listener hears of it after what is under way now. */
  #fail(reason: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    endDeadline(this.#stop);
    queueMicrotask(() => this.#listener.failed(reason));
  }

  #forget(): void {
    for (const part of this.#parts) {
      if (part.requestId !== undefined) this.#engine.semaphores.forget(part.requestId);
    }
  }

  /**
   * One lock of a request, before its node is created, and what the store is asked to create
   * for it (kept apart: a waiter keeps its part, not the node's record).
   */
  #part(request: AcquireRequest, data: Buffer): { part: Part; entry: SequentialEntry } {
    const { store, replacement, semaphores, dependents } = this.#engine;
    const shape = semaphoreShapeOf(request);
    const requestId = randomUUID();
    // Known here before its node exists: a grant ahead that lists the node finds it local.
    const wakeup = shape ? semaphores.register(requestId) : undefined;
    const node = new LockRequestNode(store, replacement, request, dependents);
    const entry = {
      dir: this.#engine.lockPath(request.name),
      prefix: nodePrefix(request.mode, requestId, shape),
      data,
      follow: node.follow,
    };
    // Only a semaphore part keeps its request id (a string of a dozen joined pieces, as
    // randomUUID makes it): nothing else needs it once the node's prefix is written.
    return { part: { request, node, wakeup, requestId: shape ? requestId : undefined, path: '' }, entry };
  }

  /** What the request's nodes record (see requestRecords). */
  #records(): Buffer[] {
    const since = new Date(this.#since).toISOString();
    return requestRecords(this.#request, { server: this.#engine.instanceId, since, tag: this.#tag });
  }
}
