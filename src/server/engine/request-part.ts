import type { Logger } from 'pino';
import type { CoordinationStore, NodeReplacement } from '../stores/store.js';
import type { LockRequestNode } from './lease.js';
import type { QueueListener } from './local-queue.js';
import type { AcquireRequest, Lease } from './lock-request.js';
import { releaseFreesWatchers, type HeldPosition } from './queue-position.js';
import type { QueueWaits } from './queue-wait.js';
import type { SemaphoreWakeup, SemaphoreWakeups } from './semaphore-wakeups.js';
import type { SessionDependents } from './session-dependents.js';

/*
 * What a request in the engine is made of and tells (see Acquisition), and how one of its
 * locks is handed out: shared by a single lock's wait and a multi-lock's (see waitForAll).
 */

/** What an Acquisition needs of its engine (one object per engine). */
export interface AcquisitionEngine {
  readonly store: CoordinationStore;
  /** How a downgrade replaces a node, where the store can. */
  readonly replacement: NodeReplacement | undefined;
  readonly logger: Logger;
  /** Identifies this server in lock nodes. */
  readonly instanceId: string;
  readonly semaphores: SemaphoreWakeups;
  readonly waits: QueueWaits;
  readonly dependents: SessionDependents;
  /** The store path of a lock's queue. */
  lockPath(name: string): string;
  /** Deletes a withdrawn request's node; never rejects. */
  withdraw(path: string): Promise<void>;
}

/** Told how a request of the engine goes: its place while it waits, then its lease or why it has none. */
export interface AcquireListener extends QueueListener {
  /** The request holds; told once, and then nothing else. */
  granted(lease: Lease): void;
  /** The request ended without a lease (nothing of it stays queued); told once. */
  failed(reason: unknown): void;
}

/** One lock of a request (a multi-lock has several): its node, and its semaphore wake-up. */
export interface Part {
  readonly request: AcquireRequest;
  readonly node: LockRequestNode;
  /** A semaphore request's wake-up, and the request id it is registered under. */
  readonly wakeup: SemaphoreWakeup | undefined;
  readonly requestId: string | undefined;
  /** Its node's path, once created (or adopted). */
  path: string;
}

/**
 * Hands out one lock whose turn came. A semaphore request may have a waiter right behind it
 * that waits for this grant: it is told (see SemaphoreWakeups).
 */
export function grantPart(
  engine: AcquisitionEngine,
  part: Part,
  current: HeldPosition,
  children: readonly string[],
): LockRequestNode {
  const { node } = part;
  node.hold(releaseFreesWatchers(part.request.mode) ? engine.waits.released : undefined);
  if (current.successor !== undefined) engine.semaphores.granted(part.path, current.successor, children);
  return node;
}
