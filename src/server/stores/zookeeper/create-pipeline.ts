/* How the ZooKeeper store creates lock nodes (CoordinationStore.createNodes), one or several in one
 * step: the order of the tries, from the parents' barrier to the search after a lost reply (each
 * try itself is CreateTries'). */
import { LockError } from '../../lock-error.js';
import { joinPath } from '../node-paths.js';
import type { CreatedNode, SequentialEntry, StoreStats } from '../store.js';
import { CreateTries } from './create-tries.js';
import type { LinkOperations } from './link-operations.js';
import type { NodeWatches } from './node-watches.js';
import type { ParentBarrier } from './parent-barrier.js';
import { ErrorCode } from './protocol/records.js';
import type { SessionKeeper } from './session-keeper.js';
import type { TreeView } from './tree-view.js';
import type { TreeProtection } from './tree-protection.js';
import {
  MAX_ATTEMPTS,
  createFailure,
  isConnectionLoss,
  multiUnsupported,
  unavailable,
} from './zookeeper-failures.js';
import type { LinkOp } from './zookeeper-link.js';
import { type ZooKeeperSession } from './zookeeper-session.js';

const EMPTY = new Uint8Array(0);

export interface CreatePipelineParts {
  readonly keeper: SessionKeeper;
  readonly ops: LinkOperations;
  readonly watches: NodeWatches;
  readonly barrier: ParentBarrier;
  readonly protection: TreeProtection;
  readonly stats: StoreStats;
  /** The lock tree as its persistent recursive watch tells it, where the server has one. */
  readonly view?: TreeView | undefined;
}

/**
 * How lock nodes are created (CoordinationStore.createNodes): one, or several in one transaction,
 * through the same steps: wait for parents being made, send the create
 * with each parent's listing (and a guessed follow) behind it (CreateTries), make missing parents,
 * and after a lost reply look for the node before creating again (no ghost nodes).
 */
export class CreatePipeline {
  readonly #keeper: SessionKeeper;
  readonly #ops: LinkOperations;
  readonly #watches: NodeWatches;
  readonly #barrier: ParentBarrier;
  readonly #protection: TreeProtection;
  readonly #stats: StoreStats;
  readonly #view: TreeView | undefined;
  readonly #tries: CreateTries;
  /** Creates made and not answered yet, per lock parent. */
  readonly #underWay = new Map<string, number>();

  constructor(parts: CreatePipelineParts) {
    this.#keeper = parts.keeper;
    this.#ops = parts.ops;
    this.#watches = parts.watches;
    this.#barrier = parts.barrier;
    this.#protection = parts.protection;
    this.#stats = parts.stats;
    this.#view = parts.view;
    this.#tries = new CreateTries(parts);
  }

  /** Creates `entries`' nodes: one by a plain create, several in one multi (all or none). */
  async createAll(entries: readonly SequentialEntry[]): Promise<CreatedNode[]> {
    const atomic = entries.length !== 1;
    if (atomic && !this.#keeper.link.multi) throw multiUnsupported('several nodes created in one step');
    return this.#create(entries, atomic);
  }

  /**
   * Creates `entries`' nodes: one by a plain create, or all in one multi (`atomic`): the create
   * alone where the tree's watch knows every parent (CreateTries.inView), else with listings behind
   * it (CreateTries.listed); missing parents are made, and a lost reply looked into, the same way.
   */
  async #create(entries: readonly SequentialEntry[], atomic: boolean): Promise<CreatedNode[]> {
    const dirs = entries.length === 1 ? [entries[0]!.dir] : [...new Set(entries.map(({ dir }) => dir))];
    for (const dir of dirs) this.#underWay.set(dir, (this.#underWay.get(dir) ?? 0) + 1);
    try {
      return await this.#createInTurn(entries, dirs, atomic);
    } finally {
      for (const dir of dirs) {
        const left = this.#underWay.get(dir)! - 1;
        if (left === 0) this.#underWay.delete(dir);
        else this.#underWay.set(dir, left);
      }
    }
  }

  async #createInTurn(
    entries: readonly SequentialEntry[],
    dirs: readonly string[],
    atomic: boolean,
  ): Promise<CreatedNode[]> {
    const what = atomic ? 'multi' : 'create';
    const ticket = this.#barrier.nextTicket();
    const ops: LinkOp[] = entries.map(({ dir, prefix, data }) => ({
      op: 'create',
      path: joinPath(dir, prefix),
      data,
      mode: 'ephemeralSequential',
      acl: this.#protection.aclFor(dir),
    }));
    const view = this.#view;
    // Set when a create found a parent missing: it waits for it like any later create, and
    // through the same steps, so the creates are sent again in ticket order. Where the tree's
    // watch says a parent is gone, it is made with the nodes (#createWithParents) or, where that
    // could put this create ahead of an earlier one, first, without a create bound to fail.
    let parentsMade: Promise<unknown> | undefined;
    const missing = view === undefined ? [] : dirs.filter((dir) => view.exists(dir) === false);
    if (missing.length > 0) {
      // Decided before anything is awaited: no other create can slip in between.
      const made =
        this.#keeper.link.multi && missing.every((dir) => this.#underWay.get(dir) === 1)
          ? this.#barrier.madeInMulti(missing, ticket)
          : undefined;
      if (made) {
        const tried = await this.#createWithParents(entries, ops, missing, made);
        if (tried !== 'again') return tried;
      } else {
        parentsMade = this.#afterParents(entries, ticket, true);
      }
    }
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt += 1) {
      await (parentsMade ?? this.#afterParents(entries, ticket, false));
      parentsMade = undefined;
      await this.#keeper.whenConnected(what);
      const session = this.#keeper.session;
      // Every parent in step with the tree's watch: its children are known when the create's
      // reply arrives, and the new node is followed by that watch. Just the create, then.
      const viewed = view !== undefined && entries.every(({ dir }) => view.exists(dir) && view.inStep(dir));
      const tried = viewed
        ? await this.#tries.inView(entries, ops, session)
        : await this.#tries.listed(entries, ops, session);
      if ('created' in tried) return tried.created;
      const { rc } = tried;
      if (rc === ErrorCode.noNode) {
        // A lock's parent does not exist (first use, or its empty container was removed): make
        // each missing one (those that exist cost a NODEEXISTS).
        parentsMade = this.#afterParents(entries, ticket, true);
        continue;
      }
      if (!isConnectionLoss(rc)) throw createFailure(entries[0]!.dir, rc);
      const found = await this.#afterLostReply(entries, session, rc, what);
      if (found) return found;
    }
    throw new LockError(
      'UNAVAILABLE',
      `ZooKeeper ${what} under ${entries[0]?.dir} kept losing its connection`,
    );
  }

  /**
   * A create under lock parents the tree's watch says are missing (a lock's first use, or its
   * first since ZooKeeper removed its empty container): each parent made in the same multi as
   * the nodes, so a cycle on a fresh name costs two requests, not three. Taken only when no
   * other create under them is under way (#create): none made earlier can then be queued
   * behind this one, and later ones wait for the multi (`made`, see ParentBarrier.madeInMulti).
   * 'again' when the multi made nothing and the create is to be sent again, in its turn.
   */
  async #createWithParents(
    entries: readonly SequentialEntry[],
    ops: readonly LinkOp[],
    missing: readonly string[],
    made: (again: boolean) => Promise<void>,
  ): Promise<CreatedNode[] | 'again'> {
    const parents: LinkOp[] = missing.map((dir) => ({
      op: 'create',
      path: dir,
      data: EMPTY,
      mode: 'container',
      acl: this.#protection.aclFor(dir),
    }));
    let tried: { created: CreatedNode[] } | { rc: number };
    let session: ZooKeeperSession;
    try {
      await this.#keeper.whenConnected('multi');
      session = this.#keeper.session;
      tried = await this.#tries.inView(entries, [...parents, ...ops], session);
    } catch (error) {
      await made(false);
      throw error;
    }
    if ('created' in tried) {
      await made(false);
      return tried.created;
    }
    const { rc } = tried;
    // A parent made by someone else meanwhile (NODEEXISTS), or an ancestor gone (NONODE, made
    // on the next try): sent again in turn.
    if (rc === ErrorCode.nodeExists || rc === ErrorCode.noNode) {
      await made(true);
      return 'again';
    }
    await made(false);
    if (!isConnectionLoss(rc)) throw createFailure(entries[0]!.dir, rc);
    return (await this.#afterLostReply(entries, session, rc, 'multi')) ?? 'again';
  }

  /**
   * The create may have been applied although its reply was lost (a multi all or nothing).
   * Prefixes are unique, so look for them before creating again: a second node would block the
   * queue as a ghost. Undefined: not made, create again.
   */
  async #afterLostReply(
    entries: readonly SequentialEntry[],
    session: ZooKeeperSession,
    rc: number,
    what: string,
  ): Promise<CreatedNode[] | undefined> {
    await this.#keeper.whenConnected(what, session);
    if (this.#keeper.session !== session) {
      // Let go alive (taken over), the session may keep the node for its new owner: the
      // create is not made again elsewhere. Otherwise the session died, and any node with it.
      if (session.letGo) throw session.letGo;
      return undefined;
    }
    const found = await Promise.all(
      entries.map(async ({ dir, prefix }) => {
        const siblings = await this.#ops.children(dir);
        const name = siblings.find((child) => child.startsWith(prefix));
        return name === undefined ? undefined : { path: joinPath(dir, name), siblings };
      }),
    );
    if (found.every((node) => node === undefined)) return undefined;
    this.#stats.creates += entries.length;
    return Promise.all(
      entries.map(async ({ follow }, i) => {
        const node = found[i];
        if (!node) throw unavailable(what, rc); // all or none: cannot be
        const created = { path: node.path, session, siblings: node.siblings };
        return follow ? { ...created, followed: await this.#watches.watchNode(node.path, follow) } : created;
      }),
    );
  }

  /** Waits for the parents of `entries` being made (see ParentBarrier); undefined if none is. */
  #afterParents(
    entries: readonly SequentialEntry[],
    ticket: number,
    start: boolean,
  ): Promise<unknown> | undefined {
    const waits = entries.flatMap(({ dir }) => this.#barrier.after(dir, ticket, start) ?? []);
    return waits.length === 0 ? undefined : Promise.all(waits);
  }
}
