import type { Logger } from 'pino';
import { baseName, joinPath, type CoordinationStore } from '../stores/store.js';
import { queueOrder } from './node-name.js';
import { updateNodeRecord, type NodeRecord } from './node-record.js';
import { holders } from './queue-position.js';
import { deadlineLeftMs, revokeToRecord } from './revocation.js';

/** How long after a forced revocation's deadline the revoking server deletes what is left. */
const FORCE_BACKSTOP_MS = 2_000;

/**
 * RevokeLock (Curator's Revoker): the request is written into each holder's node, where the
 * holder's server, which follows the node, sees it and tells the holder.
 */
export class Revoker {
  readonly #store: CoordinationStore;
  readonly #logger: Logger;
  /** Deletes a node, logging (not throwing) a failure. */
  readonly #withdraw: (path: string) => Promise<void>;

  constructor(options: {
    readonly store: CoordinationStore;
    readonly logger: Logger;
    readonly withdraw: (path: string) => Promise<void>;
  }) {
    this.#store = options.store;
    this.#logger = options.logger;
    this.#withdraw = options.withdraw;
  }

  /**
   * Asks every holder of the lock whose queue is `dir` to release it. With `forceAfterMs`, a
   * holder that has not released by then loses the lock (unless it was told a deadline before,
   * which stands): its own server tells it the deadline and ends the hold, and this one deletes
   * the node shortly after the deadline as a backstop. Resolves with how many holders were asked.
   */
  async revoke(name: string, dir: string, reason: string, forceAfterMs: number | undefined): Promise<number> {
    const queue = queueOrder(await this.#store.children(dir));
    const holding = queue.slice(0, holders(queue).count).map((entry) => joinPath(dir, entry.nodeName));
    // The deadline is recorded as a duration, which the holder's instance measures from when it
    // sees it by its monotonic clock; the wall clock times are for people (see revocation.ts).
    const now = Date.now();
    const revoke = {
      reason,
      requestedAt: new Date(now).toISOString(),
      ...(forceAfterMs === undefined
        ? {}
        : { forceAt: new Date(now + forceAfterMs).toISOString(), forceAfterMs }),
    };
    const asked = await Promise.all(
      holding.map(async (listed) => {
        // Asked before: the first request stands, but a deadline escalates a request without
        // one, and a deadline stands once written (see revokeToRecord).
        const ask = (path: string): Promise<NodeRecord | 'missing'> =>
          updateNodeRecord(this.#store, path, (current) => {
            const next = revokeToRecord(current.revoke, revoke);
            return next === undefined ? undefined : { ...current, revoke: next };
          });
        let path = listed;
        let record = await ask(path);
        // Downgraded since the listing: its node was replaced by one in the same place.
        const replacement = record === 'missing' ? await this.#replacementOf(path) : undefined;
        if (replacement !== undefined) {
          path = replacement;
          record = await ask(path);
        }
        if (record === 'missing') return false;
        const leftMs = deadlineLeftMs(record.revoke ?? revoke);
        if (leftMs !== undefined) this.#backstop(path, leftMs);
        return true;
      }),
    );
    this.#logger.info(
      { lock: name, reason, holders: asked.filter(Boolean).length, forceAfterMs },
      'revocation requested',
    );
    return asked.filter(Boolean).length;
  }

  /** The node that replaced `path` (a downgrade keeps the request id and sequence), if any. */
  async #replacementOf(path: string): Promise<string | undefined> {
    const dir = path.slice(0, path.lastIndexOf('/'));
    const name = baseName(path);
    const place = name.slice(name.indexOf('-'));
    const replacement = (await this.#store.children(dir)).find(
      (child) => child !== name && child.slice(child.indexOf('-')) === place,
    );
    return replacement === undefined ? undefined : joinPath(dir, replacement);
  }

  /**
   * Deletes a holder's node a little after the deadline it was told, should its own server not
   * have (it may be gone): its waiters must not wait on a holder that was told to go. `leftMs`
   * is the recorded duration, counted from now by this instance's monotonic clock: the holder's
   * server counts it from when it saw the request, which for ours is about now and for one an
   * earlier RevokeLock recorded was before now, so this never comes before the deadline it
   * keeps (later, for an earlier one: a backstop may be late, never early).
   */
  #backstop(path: string, leftMs: number): void {
    const timer = setTimeout(() => void this.#withdraw(path), leftMs + FORCE_BACKSTOP_MS);
    timer.unref();
  }
}
