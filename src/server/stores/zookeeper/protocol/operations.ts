/* The operations a protocol client session offers, each one request, apart from how it connects. */
import { EventEmitter } from 'node:events';
import type { Chroot } from './chroot.js';
import type { PersistentWatcher } from './persistent-watches.js';
import {
  AddWatchMode,
  ErrorCode,
  type Acl,
  type ChildrenResult,
  type MultiOp,
  type MultiResult,
  type Stat,
} from './records.js';
import type { RequestSpec } from './request-pipeline.js';
import {
  addWatchRequest,
  createRequest,
  deleteRequest,
  existsRequest,
  getAclRequest,
  getChildrenRequest,
  getDataRequest,
  getEphemeralsRequest,
  syncRequest,
  multiFailure,
  multiGetChildrenRequest,
  multiRequest,
  removeWatchesRequest,
  setAclRequest,
  setDataRequest,
} from './requests.js';
import type { WatchRegistry, Watcher } from './watch-registry.js';
import { UnsupportedOperationError, ZooKeeperError } from './zookeeper-error.js';

function modeName(mode: AddWatchMode): string {
  return mode === AddWatchMode.persistentRecursive ? 'PERSISTENT_RECURSIVE' : 'PERSISTENT';
}

/**
 * The operations a ZooKeeper session offers, each one request: what ZooKeeperConnection
 * answers, apart from how it connects.
 */
export abstract class ZooKeeperOperations extends EventEmitter {
  /** Sends a request on the session; rejects with CONNECTIONLOSS while it is not connected. */
  protected abstract send<T>(spec: RequestSpec<T>): Promise<T>;
  /** Maps paths between the client's view and the server's. */
  protected abstract get chroot(): Chroot;
  /** The session's watches, the persistent ones among them. */
  protected abstract get watches(): WatchRegistry;

  /**
   * Creates a node with `acl` and answers with its path (with the sequence suffix) and Stat.
   * `mode`: CreateMode; containers and TTL nodes use their own operation, as the server asks.
   */
  create(
    path: string,
    data: Uint8Array,
    acl: readonly Acl[],
    mode: number,
    ttlMs?: bigint,
  ): Promise<{ path: string; stat: Stat }> {
    return this.send(createRequest(this.chroot, path, data, acl, mode, ttlMs));
  }

  /** Resolves with the deletion's zxid: every change with a lower one was told before it. */
  delete(path: string, version = -1): Promise<bigint> {
    return this.send(deleteRequest(this.chroot, path, version));
  }

  /** The node's Stat, or null if there is none; `watcher` fires on its creation, change or deletion. */
  async exists(path: string, watcher?: Watcher): Promise<Stat | null> {
    try {
      return await this.send(existsRequest(this.chroot, path, watcher));
    } catch (error) {
      if (!(error instanceof ZooKeeperError) || error.code !== ErrorCode.noNode) throw error;
      return null;
    }
  }

  /**
   * Resolves once the member serving the session has caught up with the leader as of this
   * request: the reply passed through the leader, which a read's does not.
   */
  sync(path: string): Promise<undefined> {
    return this.send(syncRequest(this.chroot, path));
  }

  /** The node's data and Stat; `watcher` fires on its change or deletion. NONODE if it is missing. */
  getData(path: string, watcher?: Watcher): Promise<{ data: Buffer; stat: Stat }> {
    return this.send(getDataRequest(this.chroot, path, watcher));
  }

  setData(path: string, data: Uint8Array, version = -1): Promise<Stat> {
    return this.send(setDataRequest(this.chroot, path, data, version));
  }

  /** The node's children's names; `watcher` fires when they change or the node is deleted. */
  getChildren(path: string, watcher?: Watcher): Promise<string[]> {
    return this.send(getChildrenRequest(this.chroot, path, watcher));
  }

  setACL(path: string, acl: readonly Acl[], version = -1): Promise<Stat> {
    return this.send(setAclRequest(this.chroot, path, acl, version));
  }

  getACL(path: string): Promise<{ acl: Acl[]; stat: Stat }> {
    return this.send(getAclRequest(this.chroot, path));
  }

  /**
   * Applies `ops` atomically. Resolves with one result per op; if any op fails, none is
   * applied and it rejects with the first failure's code.
   */
  async multi(ops: readonly MultiOp[]): Promise<MultiResult[]> {
    const results = await this.send(multiRequest(this.chroot, ops));
    const failure = multiFailure(ops, results);
    if (failure) throw failure;
    return results;
  }

  /**
   * The children of each of `paths`, in their order, in one request (ZooKeeper 3.6+'s
   * multiRead): a path that cannot be read (NONODE, NOAUTH) fails alone, with its code. Not one
   * snapshot: the reads are made one after the other. An older server answers UNIMPLEMENTED
   * and drops the connection.
   */
  multiGetChildren(paths: readonly string[]): Promise<ChildrenResult[]> {
    return this.send(multiGetChildrenRequest(this.chroot, paths));
  }

  /**
   * The paths of this session's ephemeral nodes that start with `prefix` (`/` for all), in no
   * particular order (ZooKeeper 3.6+'s getEphemerals): what a session holds, without reading
   * the tree. An older server answers UNIMPLEMENTED and drops the connection.
   */
  getEphemerals(prefix: string): Promise<string[]> {
    return this.send(getEphemeralsRequest(this.chroot, prefix));
  }

  /**
   * Sets a persistent watch on `path` (ZooKeeper 3.6+'s addWatch; the node need not exist):
   * `watcher` hears every change `mode` covers, each time, until removeWatches; it is told when
   * the watch is set again after a reconnect (`resumed`: what changed in between is not
   * replayed) and when it ends with the session. Watchers may share a path in one mode.
   *
   * Rejects with UnsupportedOperationError on a server without addWatch (3.5), which also closes
   * the connection: requests in flight fail with CONNECTIONLOSS, and the session lives on. Without
   * asking the server, rejects a path watched in the other mode or with a one-shot watch:
   * 3.6 to 3.8 keep one mode per path and session, and the watches would end each other.
   */
  async addWatch(path: string, mode: AddWatchMode, watcher: PersistentWatcher): Promise<void> {
    const persistent = this.watches.persistent;
    const watched = persistent.modeOf(path);
    const oneModePerPath = 'ZooKeeper 3.6 to 3.8 keep one watch mode per path and session';
    if (watched !== undefined && watched !== mode)
      throw new Error(
        `addWatch ${path}: this session watches it ${modeName(watched)} already (${oneModePerPath})`,
      );
    if (this.watches.hasOneShot(path))
      throw new Error(`addWatch ${path}: this session has a one-shot watch on it (${oneModePerPath})`);
    if (watched === mode) {
      // The server's watch is there already (a watch is registered once its reply is read).
      persistent.add(path, mode, watcher);
      return;
    }
    try {
      await this.send(addWatchRequest(this.chroot, path, mode, () => persistent.add(path, mode, watcher)));
    } catch (error) {
      if (error instanceof ZooKeeperError && error.code === ErrorCode.unimplemented)
        throw new UnsupportedOperationError('addWatch', '3.6', `addWatch ${path}`);
      throw error;
    }
  }

  /**
   * Ends `watcher`'s persistent watch on `path` (nothing if it has none); the server's goes with
   * the path's last watcher. Resolves once the server has forgotten it, or the connection that
   * held it is gone (a new one will not set it again).
   */
  async removeWatches(path: string, watcher: PersistentWatcher): Promise<void> {
    if (!this.watches.persistent.remove(path, watcher)) return;
    try {
      await this.send(removeWatchesRequest(this.chroot, path));
    } catch (error) {
      const gone: number[] = [ErrorCode.connectionLoss, ErrorCode.sessionExpired, ErrorCode.noWatcher];
      if (!(error instanceof ZooKeeperError && gone.includes(error.code))) throw error;
    }
  }
}
