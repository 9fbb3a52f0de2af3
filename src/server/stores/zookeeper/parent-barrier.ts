/* Makes missing lock parents without reordering the queue: creates that meet a parent being made
 * wait for it and go again in their first order. */
import { ancestors } from '../node-paths.js';
import type { LinkOperations } from './link-operations.js';
import type { TreeProtection } from './tree-protection.js';

/** Creates waiting for their lock's directory to be created, each with its place in line. */
interface Barrier {
  readonly waiting: Array<{ ticket: number; resolve: () => void; reject: (error: unknown) => void }>;
}

/**
 * Lock parents made on demand, without reordering the queue: a lock's parent is a container
 * (ZooKeeper removes it once empty), so the first create of a lock, or the first after a quiet
 * spell, finds it missing. Creates that meet a parent being made wait for it, and are then sent
 * again in the order they were first made (their ticket). Without this, a request arriving while
 * earlier ones make the parent would be sent before their second try and take an earlier place.
 */
export class ParentBarrier {
  readonly #ops: LinkOperations;
  readonly #protection: TreeProtection;
  /** Lock directories being created, with the creates waiting for them. */
  readonly #barriers = new Map<string, Barrier>();
  /** Persistent ancestors known to exist (they are never removed by lockstream). */
  readonly #ensured = new Set<string>();
  #lastTicket = 0;

  constructor(ops: LinkOperations, protection: TreeProtection) {
    this.#ops = ops;
    this.#protection = protection;
  }

  /** A create's place in line, taken when it is first made. */
  nextTicket(): number {
    return (this.#lastTicket += 1);
  }

  /**
   * Opens the barrier of each of `dirs` for a create that makes them itself, in the same multi
   * as its nodes (see CreatePipeline): undefined, opening nothing, when one is being made
   * already or an ancestor is not known to exist. Creates that meet them missing meanwhile wait
   * as for any barrier. Once the multi is answered, the caller calls the function returned:
   * with `again` (the multi made nothing), it waits its turn among them, by `ticket`.
   */
  madeInMulti(dirs: readonly string[], ticket: number): ((again: boolean) => Promise<void>) | undefined {
    if (
      dirs.some((dir) => this.#barriers.has(dir) || !ancestors(dir).every((path) => this.#ensured.has(path)))
    )
      return undefined;
    const barriers = dirs.map((dir) => ({ dir, barrier: this.#open(dir) }));
    return (again) => {
      const turns = again ? barriers.map(({ barrier }) => this.#join(barrier, ticket)) : [];
      for (const { dir, barrier } of barriers) this.#releaseLater(dir, barrier, undefined);
      return Promise.all(turns).then(() => undefined);
    };
  }

  /**
   * Waits, if `dir` is being created, until it is (undefined: nothing to wait for). With
   * `start` (the create found `dir` missing), starts its creation if nobody has.
   */
  after(dir: string, ticket: number, start: boolean): Promise<void> | undefined {
    let barrier = this.#barriers.get(dir);
    if (!barrier) {
      if (!start) return undefined;
      const created = this.#open(dir);
      barrier = created;
      void this.#ensureParents(dir).then(
        () => this.#releaseLater(dir, created, undefined),
        (error: unknown) => this.#releaseLater(dir, created, error),
      );
    }
    return this.#join(barrier, ticket);
  }

  #open(dir: string): Barrier {
    const barrier: Barrier = { waiting: [] };
    this.#barriers.set(dir, barrier);
    return barrier;
  }

  #join(barrier: Barrier, ticket: number): Promise<void> {
    return new Promise((resolve, reject) => barrier.waiting.push({ ticket, resolve, reject }));
  }

  /**
   * Every create sent before the parent's (or the multi that makes it) is answered before it (a
   * session's requests are answered in order), in the same read at the latest; but each reply
   * reaches its create through a chain of promises of its own length. Released a turn of the
   * event loop later, when every reply of that read has gone all the way: each has joined by then.
   */
  #releaseLater(dir: string, barrier: Barrier, error: unknown): void {
    setImmediate(() => this.#release(dir, barrier, error));
  }

  #release(dir: string, barrier: Barrier, error: unknown): void {
    this.#barriers.delete(dir);
    barrier.waiting.sort((a, b) => a.ticket - b.ticket);
    for (const waiter of barrier.waiting) {
      if (error === undefined) waiter.resolve();
      else waiter.reject(error);
    }
  }

  async #ensureParents(dir: string): Promise<void> {
    for (const path of ancestors(dir)) {
      if (this.#ensured.has(path)) continue;
      await this.#ops.createParent(path, 'persistent', this.#protection.aclFor(path));
      this.#ensured.add(path);
    }
    // The lock's own parent is a container: ZooKeeper removes it once it is empty.
    await this.#ops.createParent(dir, 'container', this.#protection.aclFor(dir));
  }
}
