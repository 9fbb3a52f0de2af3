/*
 * How a semaphore request waiting right behind another is woken by that one's grant: directly in
 * this process, or through the granted node's record when the waiter is another instance's.
 */
import type { Logger } from 'pino';
import { onAbort } from '../../common/abort.js';
import { LockError } from '../lock-error.js';
import { joinPath, NodeFollow, waitUntilDeleted, type CoordinationStore } from '../stores/store.js';
import { parseNodeName } from './lock-nodes.js';
import { parseNodeRecord, updateNodeRecord } from './lock-nodes.js';
import type { SemaphoreWake } from './queue-position.js';

/** Why a semaphore wait's own watches are dropped once one of them has answered. */
const STOPPED = new LockError('CANCELLED', 'the wait is over');

/**
 * How a grant in this process wakes a semaphore request waiting right behind it, with the
 * listing it was granted on (nothing is deleted from a queue's listing without a release, so
 * the waiter may count on it: at worst it is a little behind). A wake that comes while the
 * request is not waiting is kept for its next wait.
 */
export class SemaphoreWakeup {
  #told: readonly string[] | undefined;
  #waiting: ((children: readonly string[]) => void) | undefined;

  wake(children: readonly string[]): void {
    if (this.#waiting) this.#waiting(children);
    else this.#told = children;
  }

  /** The listing of a wake that came while the request was not waiting, once. */
  take(): readonly string[] | undefined {
    const told = this.#told;
    this.#told = undefined;
    return told;
  }

  /** Resolves with the next wake's listing; never settles once `signal` aborts. */
  next(signal: AbortSignal): Promise<readonly string[]> {
    return new Promise((resolve) => {
      if (signal.aborted) return;
      this.#waiting = resolve;
      onAbort(signal, () => {
        if (this.#waiting === resolve) this.#waiting = undefined;
      });
    });
  }
}

/**
 * The wake-ups of one engine's semaphore requests. A waiting semaphore request is blocked by
 * the holders (the first waiter) or by the waiter right ahead of it (see SemaphoreWake); the
 * second is woken by that waiter's grant: in this process directly, with the listing of the
 * grant, or through the granted node's record (`granted`) when the waiter is another
 * instance's.
 */
export class SemaphoreWakeups {
  readonly #store: CoordinationStore;
  readonly #logger: Logger;
  /** This engine's semaphore requests that have not ended, by request id. */
  readonly #requests = new Map<string, SemaphoreWakeup>();

  constructor(store: CoordinationStore, logger: Logger) {
    this.#store = store;
    this.#logger = logger;
  }

  /**
   * A semaphore request of this engine, known before its node exists (a grant ahead that lists
   * the node finds it local); `forget` once it has ended.
   */
  register(requestId: string): SemaphoreWakeup {
    const wakeup = new SemaphoreWakeup();
    this.#requests.set(requestId, wakeup);
    return wakeup;
  }

  forget(requestId: string): void {
    this.#requests.delete(requestId);
  }

  /**
   * The semaphore request at `path` was granted on `children`; `successor`, right behind it,
   * may wait for that grant (its answer may change now: it may fit too, or it is now the first
   * waiter and must watch the holders), and is told.
   */
  granted(path: string, successor: string, children: readonly string[]): void {
    const entry = parseNodeName(successor);
    const local = entry ? this.#requests.get(entry.requestId) : undefined;
    if (local) {
      local.wake(children);
      return;
    }
    updateNodeRecord(this.#store, path, (record) =>
      record.granted ? undefined : { ...record, granted: true },
    ).catch((error: unknown) =>
      // The waiter behind is woken when we release instead: later, never wrongly.
      this.#logger.warn(
        { err: error, path },
        'could not tell the semaphore request behind this one of its grant',
      ),
    );
  }

  /**
   * Waits until something may have changed a waiting semaphore request's answer (see
   * SemaphoreWake), or a grant ahead in this process tells it so; resolves with the listing
   * that grant was made on, if it came with one.
   */
  async wait(
    dir: string,
    wake: SemaphoreWake,
    wakeup: SemaphoreWakeup,
    signal: AbortSignal,
  ): Promise<readonly string[] | undefined> {
    const told = wakeup.take();
    if (told) return told;
    const stop = new AbortController();
    const stopWith = onAbort(signal, () => stop.abort(signal.reason));
    if (signal.aborted) stop.abort(signal.reason);
    try {
      const waits: Array<Promise<readonly string[] | undefined>> = [wakeup.next(stop.signal)];
      if (wake.kind === 'release') {
        for (const holder of wake.holders) {
          waits.push(
            waitUntilDeleted(this.#store, joinPath(dir, holder), { signal: stop.signal }).then(
              () => undefined,
            ),
          );
        }
      } else {
        waits.push(this.#grantedOrGone(joinPath(dir, wake.predecessor), stop.signal).then(() => undefined));
      }
      return await Promise.race(waits);
    } finally {
      stop.abort(STOPPED);
      stopWith();
    }
  }

  /** Resolves once the node at `path` says it was granted (its record), changes, or is gone. */
  async #grantedOrGone(path: string, signal: AbortSignal): Promise<void> {
    let changed!: () => void;
    const change = new Promise<void>((resolve) => (changed = resolve));
    const follow = new NodeFollow({ onData: () => changed(), onDeleted: () => changed() });
    try {
      const node = await this.#store.watchNode(path, follow);
      if (!node || parseNodeRecord(node.data).granted || signal.aborted) return;
      const unlink = onAbort(signal, () => changed());
      await change;
      unlink();
    } finally {
      follow.stop();
    }
  }
}
