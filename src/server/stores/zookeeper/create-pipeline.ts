/* How the ZooKeeper store creates lock nodes (CoordinationStore.create), one or several in one
 * step, through every step from the parents' barrier to the search after a lost reply. */
import { LockError } from '../../lock-error.js';
import type { NodeFollow } from '../node-follow.js';
import { joinPath } from '../node-paths.js';
import type { CreatedNode, NodeData, SequentialEntry, StoreStats } from '../store.js';
import type { LinkOperations } from './link-operations.js';
import type { NodeWatches } from './node-watches.js';
import type { ParentBarrier } from './parent-barrier.js';
import { ErrorCode } from './protocol/records.js';
import type { SessionKeeper } from './session-keeper.js';
import { SequenceGuesses } from './sequence-guesses.js';
import type { TreeView } from './tree-view.js';
import type { TreeProtection } from './tree-protection.js';
import {
  MAX_ATTEMPTS,
  createFailure,
  isConnectionLoss,
  multiUnsupported,
  unavailable,
} from './zookeeper-failures.js';
import type { CreatedZNode, LinkOp, LinkReply } from './zookeeper-link.js';
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
 * How lock nodes are created (CoordinationStore.create): one, or several in one transaction,
 * through the same steps: wait for parents being made, send the create
 * with each parent's listing (and a guessed follow) behind it, make missing parents, and after
 * a lost reply look for the node before creating again (no ghost nodes).
 */
export class CreatePipeline {
  readonly #keeper: SessionKeeper;
  readonly #ops: LinkOperations;
  readonly #watches: NodeWatches;
  readonly #barrier: ParentBarrier;
  readonly #protection: TreeProtection;
  readonly #stats: StoreStats;
  readonly #view: TreeView | undefined;
  readonly #guesses = new SequenceGuesses();
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
  }

  async one(dir: string, prefix: string, data: Uint8Array, follow?: NodeFollow): Promise<CreatedNode> {
    const [created] = await this.#create([{ dir, prefix, data, follow }], false);
    return created!;
  }

  async all(entries: readonly SequentialEntry[]): Promise<CreatedNode[]> {
    if (!this.#keeper.link.multi) throw multiUnsupported('several nodes created in one step');
    return this.#create(entries, true);
  }

  /**
   * Creates `entries`' nodes: one by a plain create, or all in one multi (`atomic`): the create
   * alone where the tree's watch knows every parent (#createInView), else with listings behind
   * it (#createListed); missing parents are made, and a lost reply looked into, the same way.
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
        ? await this.#createInView(entries, ops, session)
        : await this.#createListed(entries, ops, session);
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
      tried = await this.#createInView(entries, [...parents, ...ops], session);
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
   * One try of a create whose parents the tree's watch is in step with: the create alone (see
   * #createdInView), behind the creates of missing parents if `ops` starts with them. The nodes
   * made, or the code of the failure.
   */
  async #createInView(
    entries: readonly SequentialEntry[],
    ops: readonly LinkOp[],
    session: ZooKeeperSession,
  ): Promise<{ created: CreatedNode[] } | { rc: number }> {
    const expected = entries.map(({ dir, prefix, follow }) =>
      follow ? this.#watches.expectCreated(dir, prefix) : undefined,
    );
    const forget = (): void => expected.forEach((expecting) => expecting?.forget());
    const reply = await this.#send(ops, session).catch((error: unknown) => {
      forget();
      throw error;
    });
    if (reply.rc === ErrorCode.ok && reply.value !== null) {
      this.#stats.creates += entries.length;
      const nodes = reply.value.slice(ops.length - entries.length);
      return { created: await this.#createdInView(entries, nodes, session, expected) };
    }
    forget();
    return { rc: reply.rc };
  }

  /**
   * One try of a create with each parent's listing (and a guessed follow) pipelined behind it,
   * answered in this order: the create, each listing, and for each `follow` a getData with a
   * watch on the path the node should get, the sequence number after the last one seen under its
   * parent. Prefixes are unique, so a wrong guess finds no node and costs only a read after the
   * create. The nodes made, or the code of the failure.
   */
  async #createListed(
    entries: readonly SequentialEntry[],
    ops: readonly LinkOp[],
    session: ZooKeeperSession,
  ): Promise<{ created: CreatedNode[] } | { rc: number }> {
    const view = this.#view;
    const tickets = entries.map(({ dir }) => view?.listing(dir));
    const creating = this.#send(ops, session);
    const listings = entries.map(({ dir }) => this.#keeper.send((link) => link.getChildren(dir, false)));
    const guesses = entries.map(({ dir, prefix, follow }) => follow && this.#guesses.next(dir, prefix));
    const guessed = entries.map(({ follow }, i) => {
      const guess = guesses[i];
      // A wrong guess (or a failed read) only costs the read after the create, below.
      return guess === undefined || !follow
        ? Promise.resolve(null)
        : this.#watches.watchNode(guess, follow).catch(() => null);
    });
    let reply: Awaited<typeof creating>;
    let listed: Array<Awaited<(typeof listings)[number]>>;
    let reads: Array<NodeData | null>;
    try {
      [reply, listed, reads] = await Promise.all([creating, Promise.all(listings), Promise.all(guessed)]);
    } catch (error) {
      for (const ticket of tickets) if (ticket) view?.unlisted(ticket);
      throw error;
    }
    // Taken in now, after the whole round trip: the view replays what it was told meanwhile.
    for (const [i, listing] of listed.entries()) {
      const ticket = tickets[i];
      if (!ticket) continue;
      if (listing.rc === ErrorCode.ok && listing.value !== null) view?.listed(ticket, listing.value);
      else view?.unlisted(ticket);
    }
    if (reply.rc !== ErrorCode.ok || reply.value === null) return { rc: reply.rc };
    const nodes = reply.value;
    this.#stats.creates += entries.length;
    this.#stats.childrenListings += entries.length;
    const created = await Promise.all(
      entries.map(async ({ dir, follow }, i) => {
        const { path, creationId } = nodes[i]!;
        const listing = listed[i]!;
        const ok = listing.rc === ErrorCode.ok && listing.value !== null;
        const siblings = ok ? listing.value : await this.#ops.children(dir);
        this.#guesses.saw(dir, path, siblings.length === 1);
        const node =
          creationId === undefined ? { path, session, siblings } : { path, session, siblings, creationId };
        if (!follow) return node;
        const read = reads[i];
        if (guesses[i] === path && read) return { ...node, followed: read };
        return { ...node, followed: await this.#watches.watchNode(path, follow) };
      }),
    );
    return { created };
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

  /**
   * The nodes of a create whose parents are in step with the tree's watch (see TreeView):
   * each one's siblings as the view holds them now, when every change before the reply has been
   * told, and each followed from its create, unread (version 0, the data just written). A view
   * that lost step meanwhile (a reconnect) or misses the node is not trusted: listed instead.
   */
  async #createdInView(
    entries: readonly SequentialEntry[],
    nodes: readonly CreatedZNode[],
    session: ZooKeeperSession,
    expected: ReadonlyArray<{ readonly key: string; forget(): void } | undefined>,
  ): Promise<CreatedNode[]> {
    // Every node taken in first, before any await: a change told later reaches its followers.
    const taken = entries.map(({ dir, data, follow }, i) => {
      const { path, creationId } = nodes[i]!;
      const seen = this.#view?.children(dir);
      const inView =
        seen !== undefined && creationId !== undefined && seen.includes(path.slice(dir.length + 1));
      const key = expected[i]?.key;
      const followed =
        follow && inView && key !== undefined
          ? this.#watches.followCreated(path, follow, { creationId, data, version: 0 }, key)
          : undefined;
      if (followed === undefined) expected[i]?.forget();
      return { dir, path, creationId, follow, siblings: inView ? seen : undefined, followed };
    });
    return Promise.all(
      taken.map(async ({ dir, path, creationId, follow, siblings, followed }) => {
        const listed = siblings ?? (await this.#ops.children(dir));
        const created =
          creationId === undefined
            ? { path, session, siblings: listed }
            : { path, session, siblings: listed, creationId };
        if (!follow) return created;
        return {
          ...created,
          followed: followed === undefined ? await this.#watches.watchNode(path, follow) : followed,
        };
      }),
    );
  }

  /**
   * Sends the create of `ops` (one op alone, several as a multi; behind the session's check
   * while published, see SessionKeeper.write); answers with the nodes made.
   */
  async #send(ops: readonly LinkOp[], session: ZooKeeperSession): Promise<LinkReply<CreatedZNode[]>> {
    const reply = await this.#keeper.write(ops, session);
    return {
      rc: reply.rc,
      value:
        reply.value &&
        reply.value.map((result): CreatedZNode => {
          if (result.op !== 'create') throw unavailable('multi', reply.rc);
          return result.creationId === undefined
            ? { path: result.path }
            : { path: result.path, creationId: result.creationId };
        }),
    };
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
