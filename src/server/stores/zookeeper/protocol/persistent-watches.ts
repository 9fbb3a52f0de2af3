/* The protocol client's persistent watches (addWatch, ZooKeeper 3.6+), set again on each connection. */
import { AddWatchMode, EventType, type WatcherEvent } from './records.js';
import type { ZooKeeperError } from './zookeeper-error.js';

/**
 * The owner of a persistent watch (addWatch, ZooKeeper 3.6+). Unlike a one-shot watch, it is not
 * used up by its events, and it is set again on every new connection of the session.
 */
export interface PersistentWatcher {
  /**
   * A change the watch covers. Events and replies of one session arrive in zxid order: when a
   * reply with zxid z is read, every covered change with a lower zxid has been told here.
   */
  changed(event: WatcherEvent): void;
  /**
   * The connection was lost and the watch is set again on a new one (SetWatches2 answered), but
   * ZooKeeper does not replay what changed under it in between (see WatchRegistry.restore):
   * re-read what you keep. Called before any later reply or event of the session is read.
   */
  resumed(): void;
  /**
   * The watch is gone for good, not by its owner's doing: the session expired, or the member the
   * connection moved to cannot keep persistent watches (ZooKeeper 3.5).
   */
  ended(reason: ZooKeeperError): void;
}

interface Entry {
  readonly mode: AddWatchMode;
  readonly watchers: Set<PersistentWatcher>;
}

/** The parent of `path`; `/` for the root and its children. */
function parentOf(path: string): string {
  const slash = path.lastIndexOf('/');
  return slash <= 0 ? '/' : path.slice(0, slash);
}

/**
 * The persistent watches of one session, by path. The server keeps one watch mode per path and
 * session, so each path has one mode here too, and as many owners as asked for it.
 */
export class PersistentWatches {
  readonly #byPath = new Map<string, Entry>();

  get size(): number {
    return this.#byPath.size;
  }

  /** The mode `path` is watched with, or undefined. */
  modeOf(path: string): AddWatchMode | undefined {
    return this.#byPath.get(path)?.mode;
  }

  /** Adds `watcher` on `path`; a path already watched must be in the same `mode`. */
  add(path: string, mode: AddWatchMode, watcher: PersistentWatcher): void {
    const entry = this.#byPath.get(path);
    if (entry === undefined) this.#byPath.set(path, { mode, watchers: new Set([watcher]) });
    else if (entry.mode !== mode) throw new Error(`INVARIANT: ${path} is watched in mode ${entry.mode}`);
    else entry.watchers.add(watcher);
  }

  /** Removes `watcher` from `path`; true if it was the path's last (the server's watch can go). */
  remove(path: string, watcher: PersistentWatcher): boolean {
    const entry = this.#byPath.get(path);
    if (entry === undefined || !entry.watchers.delete(watcher)) return false;
    if (entry.watchers.size > 0) return false;
    this.#byPath.delete(path);
    return true;
  }

  /**
   * Tells `event` to the watches that cover it, as the server's WatchManager.triggerWatch picks
   * them: a watch on the event's own path (persistent, or recursive but for NodeChildrenChanged),
   * and a recursive one on any ancestor. A watcher covering it twice hears it once.
   */
  fire(event: WatcherEvent): void {
    if (this.#byPath.size === 0 || event.type === EventType.none) return;
    let first: Set<PersistentWatcher> | undefined;
    let told: Set<PersistentWatcher> | undefined;
    for (let path = event.path; ; path = parentOf(path)) {
      const entry = this.#byPath.get(path);
      const covers =
        entry !== undefined &&
        (entry.mode === AddWatchMode.persistentRecursive
          ? event.type !== EventType.nodeChildrenChanged
          : path === event.path);
      if (covers) {
        if (!first) first = entry.watchers;
        else {
          told ??= new Set(first);
          for (const watcher of entry.watchers) told.add(watcher);
        }
      }
      if (path === '/') break;
    }
    for (const watcher of [...(told ?? first ?? [])]) watcher.changed(event);
  }

  /** The watched paths of each mode, for a SetWatches2 after a reconnect. */
  paths(): { persistent: string[]; persistentRecursive: string[] } {
    const persistent: string[] = [];
    const persistentRecursive: string[] = [];
    for (const [path, { mode }] of this.#byPath)
      (mode === AddWatchMode.persistentRecursive ? persistentRecursive : persistent).push(path);
    return { persistent, persistentRecursive };
  }

  /** Tells every owner that its watch is back after a gap. */
  resumed(): void {
    for (const watcher of this.#owners()) watcher.resumed();
  }

  /** Forgets every watch; with `reason`, tells each owner that its watch ended. */
  clear(reason?: ZooKeeperError): void {
    const owners = this.#owners();
    this.#byPath.clear();
    if (reason) for (const watcher of owners) watcher.ended(reason);
  }

  #owners(): PersistentWatcher[] {
    const owners = new Set<PersistentWatcher>();
    for (const { watchers } of this.#byPath.values()) for (const watcher of watchers) owners.add(watcher);
    return [...owners];
  }
}
