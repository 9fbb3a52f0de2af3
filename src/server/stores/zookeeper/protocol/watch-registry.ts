import { ListenerMap } from '../../listener-map.js';
import { EventType, type WatcherEvent } from './records.js';

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
 * them are read, fired (each once) by the events that use them up, and listed after a reconnect
 * so the server can be told which to restore.
 */
export class WatchRegistry {
  readonly #byKind: Record<WatchKind, ListenerMap<Watcher>> = {
    data: new ListenerMap(),
    exist: new ListenerMap(),
    child: new ListenerMap(),
  };

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
  }

  /** The watched paths of each kind, for a setWatches after a reconnect. */
  paths(): Record<WatchKind, string[]> {
    return {
      data: this.#byKind.data.keys(),
      exist: this.#byKind.exist.keys(),
      child: this.#byKind.child.keys(),
    };
  }

  /** Forgets every watch; with `event` (the session expired), tells each watcher first. */
  clear(event?: WatcherEvent): void {
    for (const watches of Object.values(this.#byKind)) {
      const all = watches.keys().flatMap((path) => watches.get(path));
      watches.clear();
      if (event) for (const watcher of all) watcher(event);
    }
  }
}
