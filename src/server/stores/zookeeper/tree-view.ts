/* What the lock tree's persistent recursive watch tells of the lock queues: the children of each
 * lock parent in step with it, and the parents known gone. */
import { parentPath } from '../node-paths.js';
import type { NodeEventKind } from './zookeeper-link.js';

/** Lock parents kept in step at most; the least recently used is forgotten first. */
const MAX_PARENTS = 10_000;

/**
 * A listing of one lock parent on its way (see TreeView.listing): the changes told under the
 * parent since it was sent, to replay onto its answer.
 */
export interface ListingTicket {
  readonly dir: string;
  readonly epoch: number;
  readonly changes: Array<{ readonly kind: NodeEventKind; readonly name: string | undefined }>;
}

/**
 * What this instance knows of the lock queues from one persistent recursive watch on the locks
 * path (ZooKeeper 3.6+'s addWatch): the children of each lock parent it is in step with, and
 * the parents it knows are gone. A parent is in step once its creation, or a listing of it, was
 * read while the watch was on: from then on every change under it arrives as an event, and a
 * session's events and replies arrive in zxid order (ZooKeeper Programmer's Guide, "ZooKeeper
 * Watches": a client sees a watch event before it sees the new state, and the order of events
 * and replies is the order of the changes). So when a create's reply arrives, the view holds
 * every node created before it and not deleted since: no listing is needed behind the create,
 * and no watch of its own on the node a waiter waits for.
 *
 * Nothing is in step while the watch is off, and after a gap (a reconnect: ZooKeeper does not
 * replay what changed in between) everything is forgotten and learnt again by listing.
 */
export class TreeView {
  readonly #locksPath: string;
  readonly #limit: number;
  /** In step: a parent's children by name, or null for a parent known not to exist; LRU order. */
  readonly #parents = new Map<string, Set<string> | null>();
  /**
   * Every lock parent that exists, from one listing of the locks path after the watch was set
   * (see `scanned`) and the watch's events since; undefined until then.
   */
  #existing: Set<string> | undefined;
  #on = false;
  /** Moves on whenever what is known is forgotten: a listing sent before then is stale. */
  #epoch = 0;
  /** Listings on their way, by the parent they list. */
  readonly #listings = new Map<string, Set<ListingTicket>>();

  constructor(locksPath: string, limit = MAX_PARENTS) {
    this.#locksPath = locksPath;
    this.#limit = limit;
  }

  /** The path whose subtree the watch covers. */
  get locksPath(): string {
    return this.#locksPath;
  }

  /** Whether the watch is on: events arrive, and the parents in step can be trusted. */
  get on(): boolean {
    return this.#on;
  }

  /** The watch is set, or set again after a gap: changes arrive from now on, nothing is known yet. */
  started(): void {
    this.#forget();
    this.#on = true;
  }

  /** The watch is gone (the session ended, or the store closed). */
  stopped(): void {
    this.#forget();
    this.#on = false;
  }

  /** A change the watch reported. */
  changed(kind: NodeEventKind, path: string): void {
    if (!this.#on) return;
    const parent = parentPath(path);
    if (this.#listings.size > 0) this.#noteForListings(kind, path, parent);
    if (parent === this.#locksPath) {
      // A lock parent: made empty (its first child arrives as an event of its own), or gone.
      if (kind === 'created') {
        this.#keep(path, new Set());
        this.#existing?.add(path);
      } else if (kind === 'deleted') {
        this.#keep(path, null);
        this.#existing?.delete(path);
      }
      return;
    }
    if (parentPath(parent) !== this.#locksPath) return;
    const children = this.#parents.get(parent);
    if (!children) return;
    const name = path.slice(parent.length + 1);
    if (kind === 'created') children.add(name);
    else if (kind === 'deleted') children.delete(name);
  }

  /**
   * The listing of the locks path sent with `ticket` (see `listing`) came back with `parents`:
   * from it on, whether any lock parent exists is known (the children of those not in step are
   * not). Parents made or removed since it was sent are replayed onto it, as for any listing.
   */
  scanned(ticket: ListingTicket, parents: readonly string[]): void {
    this.unlisted(ticket);
    if (!this.#on || ticket.epoch !== this.#epoch || ticket.dir !== this.#locksPath) return;
    const names = replayed(ticket, parents) ?? [];
    this.#existing = new Set(Array.from(names, (name) => `${this.#locksPath}/${name}`));
  }

  /**
   * A listing of `dir` is being sent: hand its answer to `listed` with this ticket, or the
   * ticket to `unlisted` if there is none. The answer is as of its own moment, but it is taken
   * in later (after other replies of the same round trip, a promise turn or more): the changes
   * told under `dir` since it was sent are replayed onto it, which makes it current. A node is
   * created once and deleted once, so replaying a change the answer already holds changes
   * nothing.
   */
  listing(dir: string): ListingTicket {
    const ticket: ListingTicket = { dir, epoch: this.#epoch, changes: [] };
    let tickets = this.#listings.get(dir);
    if (!tickets) this.#listings.set(dir, (tickets = new Set()));
    tickets.add(ticket);
    return ticket;
  }

  /** The listing of `ticket` came back with `children`: its parent is in step from now on. */
  listed(ticket: ListingTicket, children: readonly string[]): void {
    this.unlisted(ticket);
    if (!this.#on || ticket.epoch !== this.#epoch) return;
    this.#keep(ticket.dir, replayed(ticket, children));
  }

  /** The listing of `ticket` failed, or its answer is not wanted. */
  unlisted(ticket: ListingTicket): void {
    const tickets = this.#listings.get(ticket.dir);
    if (tickets?.delete(ticket) && tickets.size === 0) this.#listings.delete(ticket.dir);
  }

  /**
   * The children of `dir` as of the last reply read (`[]` if it is known to be gone), or
   * undefined when the view is not in step with it.
   */
  children(dir: string): string[] | undefined {
    const children = this.#touch(dir);
    if (children === undefined) return undefined;
    return children === null ? [] : [...children];
  }

  /** Whether lock parent `dir` exists: undefined when the view does not know. */
  exists(dir: string): boolean | undefined {
    const children = this.#touch(dir);
    if (children !== undefined) return children !== null;
    if (!this.#on || this.#existing === undefined || parentPath(dir) !== this.#locksPath) return undefined;
    return this.#existing.has(dir);
  }

  /** Whether the children of `dir` are known (it is in step, or known to be gone). */
  inStep(dir: string): boolean {
    return this.#touch(dir) !== undefined;
  }

  /** Whether the node at `path` (a lock node) exists: undefined when the view does not know. */
  has(path: string): boolean | undefined {
    const dir = parentPath(path);
    if (parentPath(dir) !== this.#locksPath) return undefined;
    const children = this.#touch(dir);
    if (children === undefined) return undefined;
    return children !== null && children.has(path.slice(dir.length + 1));
  }

  /** Lock parents the view keeps (for tests and the page's numbers). */
  get size(): number {
    return this.#parents.size;
  }

  #touch(dir: string): Set<string> | null | undefined {
    if (!this.#on) return undefined;
    const children = this.#parents.get(dir);
    if (children === undefined) return undefined;
    // Most recently used last: the first in line is the one forgotten.
    this.#parents.delete(dir);
    this.#parents.set(dir, children);
    return children;
  }

  #keep(dir: string, children: Set<string> | null): void {
    this.#parents.delete(dir);
    this.#parents.set(dir, children);
    if (this.#parents.size > this.#limit) {
      const oldest = this.#parents.keys().next().value;
      if (oldest !== undefined) this.#parents.delete(oldest);
    }
  }

  /** Notes a change for the listings on their way of the lock parent it is in (or is). */
  #noteForListings(kind: NodeEventKind, path: string, parent: string): void {
    const own = this.#listings.get(path);
    if (own && parent === this.#locksPath)
      for (const ticket of own) ticket.changes.push({ kind, name: undefined });
    const ofParent = this.#listings.get(parent);
    if (ofParent) {
      const name = path.slice(parent.length + 1);
      for (const ticket of ofParent) ticket.changes.push({ kind, name });
    }
  }

  #forget(): void {
    this.#parents.clear();
    this.#existing = undefined;
    this.#epoch += 1;
  }
}

/**
 * A listing's answer made current: the changes noted on its ticket since it was sent, replayed
 * onto it (null: the listed path itself is gone).
 */
function replayed(ticket: ListingTicket, answer: readonly string[]): Set<string> | null {
  let now: Set<string> | null = new Set(answer);
  for (const { kind, name } of ticket.changes) {
    if (name === undefined) now = kind === 'deleted' ? null : new Set();
    else if (kind === 'created') (now ??= new Set()).add(name);
    else if (kind === 'deleted') now?.delete(name);
  }
  return now;
}
