/* Keeps the lock tree's persistent recursive watch set on each session of the store, and the
 * TreeView told of what it reports (ZooKeeper 3.6+, the protocol client). */
import type { Logger } from 'pino';
import type { StoreSession } from '../store.js';
import type { LinkOperations } from './link-operations.js';
import type { NodeWatches } from './node-watches.js';
import { ErrorCode } from './protocol/records.js';
import type { SessionKeeper } from './session-keeper.js';
import type { TreeView } from './tree-view.js';
import { isConnectionLoss } from './zookeeper-failures.js';

export interface TreeWatchParts {
  readonly keeper: SessionKeeper;
  readonly ops: LinkOperations;
  readonly watches: NodeWatches;
  readonly view: TreeView;
  readonly logger: Logger;
}

/**
 * The tree's watch (see ZooKeeperStoreOptions.locksPath): one persistent recursive watch on the
 * locks path per session, whose events keep the view (TreeView) and the node watches
 * (NodeWatches) told of every change under it.
 */
export class TreeWatch {
  readonly #keeper: SessionKeeper;
  readonly #ops: LinkOperations;
  readonly #watches: NodeWatches;
  readonly #view: TreeView;
  readonly #logger: Logger;
  /** The session whose link has the tree's watch, or is being asked for it. */
  #treeWatchedSession: StoreSession | undefined;
  #treeUnsupported = false;

  constructor(parts: TreeWatchParts) {
    this.#keeper = parts.keeper;
    this.#ops = parts.ops;
    this.#watches = parts.watches;
    this.#view = parts.view;
    this.#logger = parts.logger;
  }

  /**
   * Sets the tree's watch (see `locksPath`) on the current session's link, once per session;
   * until its reply, creates list their parents as without it. A server without addWatch
   * (3.5) keeps the store on that path for good.
   */
  async watch(): Promise<void> {
    const view = this.#view;
    try {
      await this.#keeper.whenConnected('watch the lock tree');
    } catch {
      return; // closed, or the session's fate reaches everyone through it
    }
    const session = this.#keeper.session;
    const link = this.#keeper.link;
    if (this.#treeWatchedSession === session || !link.watchTree || this.#treeUnsupported) return;
    this.#treeWatchedSession = session;
    const watches = this.#watches;
    // An earlier session's watch tells nothing any more.
    const current = (): boolean => this.#treeWatchedSession === session;
    const reply = await link.watchTree(view.locksPath, {
      changed: (kind, path) => {
        if (!current()) return;
        view.changed(kind, path);
        watches.onTreeEvent(kind, path);
      },
      resumed: () => {
        if (!current()) return;
        view.started();
        watches.onTreeResumed();
        void this.#scanTree(view);
      },
      ended: () => {
        if (current()) view.stopped();
      },
    });
    if (reply.rc === ErrorCode.ok) {
      if (!current() || this.#keeper.session !== session) return;
      view.started();
      await this.#scanTree(view);
      return;
    }
    if (reply.rc === ErrorCode.unimplemented) {
      // Asked once: on 3.5 the question costs the connection.
      this.#treeUnsupported = true;
      this.#logger.info(
        'ZooKeeper has no persistent watches (3.5): each create lists its lock, each node is watched',
      );
      return;
    }
    if (!current()) return;
    this.#treeWatchedSession = undefined;
    // Asked again once connected (a lost reply), or with the next session.
    if (isConnectionLoss(reply.rc)) void this.watch();
  }

  /**
   * Lists the locks path once the tree's watch is (again) set, so that the view knows which lock
   * parents exist: a create on one it knows is gone makes it in the same step. A failed listing
   * leaves that unknown (each such parent is listed behind its create instead).
   */
  async #scanTree(view: TreeView): Promise<void> {
    const ticket = view.listing(view.locksPath);
    try {
      const listed = await this.#ops.call('getChildren', (link) => link.getChildren(view.locksPath, false));
      if (listed.rc === ErrorCode.ok && listed.value !== null) view.scanned(ticket, listed.value);
      else if (listed.rc === ErrorCode.noNode) view.scanned(ticket, []);
      else view.unlisted(ticket);
    } catch {
      // Closed or unreachable: known again after the next gap, or never.
      view.unlisted(ticket);
    }
  }
}
