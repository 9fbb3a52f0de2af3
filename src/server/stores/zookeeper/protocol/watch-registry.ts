/* The protocol client's one-shot watches: registered with their requests, fired by events, and
 * listed for restoring after a reconnection. */
import { ListenerMap } from '../../listener-map.js';
import type { Chroot } from './chroot.js';
import type { JuteWriter } from './jute.js';
import { PersistentWatches } from './persistent-watches.js';
import { ErrorCode, EventType, KeeperState, OpCode, type WatcherEvent } from './records.js';
import { UnsupportedOperationError, ZooKeeperError, errorName } from './zookeeper-error.js';

export type Watcher = (event: WatcherEvent) => void;

/** The three kinds of watches a server keeps per session (data, exists on a missing node, children). */
export type WatchKind = 'data' | 'exist' | 'child';

/** Where a request's watcher goes once its reply arrives: the node found, or missing. */
export interface WatchRequest {
  readonly path: string;
  readonly watcher: Watcher;
  readonly found: WatchKind;
  readonly missing?: WatchKind;
}

/**
 * The watches of one session, as the client keeps them: registered as the replies that armed
 * them are read, fired by the events (a one-shot watch once, a persistent one each time), and
 * set again on each new connection.
 */
export class WatchRegistry {
  readonly #byKind: Record<WatchKind, ListenerMap<Watcher>> = {
    data: new ListenerMap(),
    exist: new ListenerMap(),
    child: new ListenerMap(),
  };
  /** The persistent watches (addWatch); the one-shot ones are kept above. */
  readonly persistent = new PersistentWatches();
  /** The restore request in flight is a SetWatches2: its answer resumes the persistent watches. */
  #restoringPersistent = false;

  /** Whether `path` has a one-shot watch of any kind. */
  hasOneShot(path: string): boolean {
    return Object.values(this.#byKind).some((watches) => watches.has(path));
  }

  /** Registers `request`'s watcher for a reply that found the node (`found`) or did not. */
  register(request: WatchRequest, found: boolean): void {
    const kind = found ? request.found : request.missing;
    if (kind === undefined) return;
    this.#byKind[kind].add(request.path, request.watcher);
  }

  /** Fires the watches `event` uses up; a watcher set on several of them hears it once. */
  fire(event: WatcherEvent): void {
    const { path } = event;
    let first: Watcher[] | undefined;
    let told: Set<Watcher> | undefined;
    const take = (kind: WatchKind): void => {
      const watches = this.#byKind[kind];
      if (!watches.has(path)) return;
      const watchers = watches.get(path);
      watches.delete(path);
      if (!first) first = watchers;
      else {
        told ??= new Set(first);
        for (const watcher of watchers) told.add(watcher);
      }
    };
    switch (event.type) {
      case EventType.nodeCreated:
        take('exist');
        take('data');
        break;
      case EventType.nodeDeleted:
        take('data');
        take('exist');
        take('child');
        break;
      case EventType.nodeDataChanged:
        take('data');
        take('exist');
        break;
      case EventType.nodeChildrenChanged:
        take('child');
        break;
    }
    for (const watcher of told ?? first ?? []) watcher(event);
    this.persistent.fire(event);
  }

  /**
   * The request that sets every watch again on a new connection (a server keeps watches per
   * connection), relative to `lastZxid`, with paths as the server knows them; undefined if there
   * is no watch. SetWatches2 if a watch is persistent, else SetWatches, which 3.5 knows (as
   * ZooKeeper's ClientCnxn.primeConnection chooses).
   *
   * What a server does with them (DataTree.setWatches, 3.6 to 3.9): a one-shot watch whose node
   * changed after `lastZxid` fires at once; a persistent one is only added back to its
   * WatchManager, with nothing that happened under it while the session had no connection
   * replayed. Hence PersistentWatcher.resumed, once the server has answered.
   */
  restore(lastZxid: bigint, chroot: Chroot): { op: number; write: (writer: JuteWriter) => void } | undefined {
    const oneShot = [this.#byKind.data.keys(), this.#byKind.exist.keys(), this.#byKind.child.keys()];
    const { persistent, persistentRecursive } = this.persistent.paths();
    this.#restoringPersistent = persistent.length + persistentRecursive.length > 0;
    const lists = this.#restoringPersistent ? [...oneShot, persistent, persistentRecursive] : oneShot;
    if (lists.every((paths) => paths.length === 0)) return undefined;
    return {
      op: this.#restoringPersistent ? OpCode.setWatches2 : OpCode.setWatches,
      write: (writer) => {
        writer.long(lastZxid);
        for (const paths of lists) writer.vector(paths, (path) => writer.string(chroot.serverPath(path)));
      },
    };
  }

  /**
   * The server answered the restore request with `err`. Its answer comes before the reply to any
   * request sent after it, so the persistent watches' owners hear `resumed` before those. A
   * member that cannot keep them (3.5 answers SetWatches2 UNIMPLEMENTED and closes the
   * connection) ends them; the one-shot watches are set again on the next connection.
   */
  restoreAnswered(err: number): void {
    if (!this.#restoringPersistent) return;
    this.#restoringPersistent = false;
    if (err === ErrorCode.ok) this.persistent.resumed();
    else
      this.persistent.clear(
        err === ErrorCode.unimplemented
          ? new UnsupportedOperationError('persistent watches', '3.6', 'restoring persistent watches')
          : new ZooKeeperError(err, `restoring persistent watches: ${errorName(err)}`),
      );
  }

  /** Forgets every watch; with `expired` (the session expired), tells each owner first. */
  clear(expired?: ZooKeeperError): void {
    const event: WatcherEvent = { type: EventType.none, state: KeeperState.expired, path: '' };
    for (const watches of Object.values(this.#byKind)) {
      const all = watches.keys().flatMap((path) => watches.get(path));
      watches.clear();
      if (expired) for (const watcher of all) watcher(event);
    }
    this.persistent.clear(expired);
  }
}
