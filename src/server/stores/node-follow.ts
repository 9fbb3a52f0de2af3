/* How a caller follows one node's changes and deletion until it stops (NodeFollow), and how a
 * store takes its handlers off when it does. */

export interface NodeWatchHandlers {
  onData(data: Uint8Array): void;
  onDeleted(): void;
}

/**
 * Who follows a node (see `watchNode`), until they `stop()`. A plain object rather than an
 * AbortSignal: every lock request follows its node, and a signal per request costs an
 * EventTarget, an abort event and a listener for each store that registers it.
 */
export class NodeFollow {
  readonly handlers: NodeWatchHandlers;
  #stopped = false;
  #detach: (() => void) | undefined;
  /** Where a store listed the handlers (see attachTo): kept as two fields, not a closure per follow. */
  #list: FollowerList | undefined;
  #path = '';

  constructor(handlers: NodeWatchHandlers) {
    this.handlers = handlers;
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  /** For stores: `detach` unregisters the handlers; called once the follower stops (at once if it has). */
  attach(detach: () => void): void {
    if (this.#stopped) {
      detach();
      return;
    }
    const previous = this.#detach;
    this.#detach = previous
      ? () => {
          previous();
          detach();
        }
      : detach;
  }

  /**
   * For stores: the handlers are listed under `path` in `list`, which takes them off when the
   * follower stops (at once if it has).
   */
  attachTo(list: FollowerList, path: string): void {
    if (this.#stopped) {
      list.delete(path, this.handlers);
      return;
    }
    if (this.#list === undefined) {
      this.#list = list;
      this.#path = path;
    } else {
      this.attach(() => list.delete(path, this.handlers));
    }
  }

  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    const list = this.#list;
    this.#list = undefined;
    list?.delete(this.#path, this.handlers);
    const detach = this.#detach;
    this.#detach = undefined;
    detach?.();
  }
}

/** Where a store lists followers' handlers by node path (a ListenerMap). */
export interface FollowerList {
  delete(path: string, handlers: NodeWatchHandlers): void;
}
