/* One try of a lock node create on ZooKeeper, and the nodes it made as the store answers them:
 * the create alone where the tree's watch is in step with every parent, else with each parent's
 * listing and a guessed follow pipelined behind it. */
import type { CreatedNode, NodeData, SequentialEntry, StoreStats } from '../store.js';
import type { LinkOperations } from './link-operations.js';
import type { NodeWatches } from './node-watches.js';
import { ErrorCode } from './protocol/records.js';
import type { SessionKeeper } from './session-keeper.js';
import { SequenceGuesses } from './sequence-guesses.js';
import type { TreeView } from './tree-view.js';
import { unavailable } from './zookeeper-failures.js';
import type { CreatedZNode, LinkOp, LinkReply } from './zookeeper-link.js';
import { type ZooKeeperSession } from './zookeeper-session.js';

/** A try's outcome: the nodes made, or the code of the failure. */
export type CreateTried = { created: CreatedNode[] } | { rc: number };

export interface CreateTriesParts {
  readonly keeper: SessionKeeper;
  readonly ops: LinkOperations;
  readonly watches: NodeWatches;
  readonly stats: StoreStats;
  /** The lock tree as its persistent recursive watch tells it, where the server has one. */
  readonly view?: TreeView | undefined;
}

/**
 * One try of a create (see CreatePipeline, which decides when to try, and what after a failure):
 * sends it, behind the session's check while published, and reads back the nodes made, each
 * with its siblings and, asked for, followed.
 */
export class CreateTries {
  readonly #keeper: SessionKeeper;
  readonly #ops: LinkOperations;
  readonly #watches: NodeWatches;
  readonly #stats: StoreStats;
  readonly #view: TreeView | undefined;
  readonly #guesses = new SequenceGuesses();

  constructor(parts: CreateTriesParts) {
    this.#keeper = parts.keeper;
    this.#ops = parts.ops;
    this.#watches = parts.watches;
    this.#stats = parts.stats;
    this.#view = parts.view;
  }

  /**
   * One try of a create whose parents the tree's watch is in step with: the create alone (see
   * #createdInView), behind the creates of missing parents if `ops` starts with them. The nodes
   * made, or the code of the failure.
   */
  async inView(
    entries: readonly SequentialEntry[],
    ops: readonly LinkOp[],
    session: ZooKeeperSession,
  ): Promise<CreateTried> {
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
  async listed(
    entries: readonly SequentialEntry[],
    ops: readonly LinkOp[],
    session: ZooKeeperSession,
  ): Promise<CreateTried> {
    const view = this.#view;
    const tickets = entries.map(({ dir }) => view?.listing(dir));
    const creating = this.#send(ops, session);
    const listings = entries.map(({ dir }) =>
      this.#keeper.send('getChildren', (link) => link.getChildren(dir, false)),
    );
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
}
