/* How each operation of the protocol client is written on the wire and its reply read. */
import type { Chroot } from './chroot.js';
import type { RequestSpec } from './request-pipeline.js';
import {
  CreateMode,
  ErrorCode,
  OpCode,
  readAcls,
  readMultiGetChildren,
  readMultiResults,
  readStat,
  writeAcls,
  writeMulti,
  writeMultiGetChildren,
  WatcherType,
  type Acl,
  type AddWatchMode,
  type ChildrenResult,
  type MultiOp,
  type MultiResult,
  type Stat,
} from './records.js';
import type { Watcher } from './watch-registry.js';
import { ZooKeeperError, errorName } from './zookeeper-error.js';

/**
 * How each operation is written on the wire and its reply read: ZooKeeper's request records,
 * with paths under the connection's chroot.
 */

/** `mode`: CreateMode; containers and TTL nodes use their own operation, as the server asks. */
export function createRequest(
  chroot: Chroot,
  path: string,
  data: Uint8Array,
  acl: readonly Acl[],
  mode: number,
  ttlMs?: bigint,
): RequestSpec<{ path: string; stat: Stat }> {
  const withTtl = mode === CreateMode.persistentWithTtl || mode === CreateMode.persistentSequentialWithTtl;
  return {
    op: mode === CreateMode.container ? OpCode.createContainer : withTtl ? OpCode.createTTL : OpCode.create2,
    what: `create ${path}`,
    write: (writer) => {
      writer.string(chroot.serverPath(path)).buffer(data);
      writeAcls(writer, acl);
      writer.int(mode);
      if (withTtl) writer.long(ttlMs ?? 0n);
    },
    read: (reader) => ({ path: chroot.clientPath(reader.string() ?? ''), stat: readStat(reader) }),
  };
}

/** Answers with the deletion's zxid (the reply's). */
export function deleteRequest(chroot: Chroot, path: string, version: number): RequestSpec<bigint> {
  return {
    op: OpCode.delete,
    what: `delete ${path}`,
    write: (writer) => writer.string(chroot.serverPath(path)).int(version),
    read: (_reader, zxid) => zxid,
  };
}

/** A watch set on a missing node waits for its creation. */
export function existsRequest(chroot: Chroot, path: string, watcher?: Watcher): RequestSpec<Stat> {
  return {
    op: OpCode.exists,
    what: `exists ${path}`,
    write: (writer) => writer.string(chroot.serverPath(path)).bool(watcher !== undefined),
    read: readStat,
    watch: watcher && { path, watcher, found: 'data', missing: 'exist' },
  };
}

export function getDataRequest(
  chroot: Chroot,
  path: string,
  watcher?: Watcher,
): RequestSpec<{ data: Buffer; stat: Stat }> {
  return {
    op: OpCode.getData,
    what: `getData ${path}`,
    write: (writer) => writer.string(chroot.serverPath(path)).bool(watcher !== undefined),
    read: (reader) => ({ data: reader.buffer() ?? Buffer.alloc(0), stat: readStat(reader) }),
    watch: watcher && { path, watcher, found: 'data' },
  };
}

export function setDataRequest(
  chroot: Chroot,
  path: string,
  data: Uint8Array,
  version: number,
): RequestSpec<Stat> {
  return {
    op: OpCode.setData,
    what: `setData ${path}`,
    write: (writer) => writer.string(chroot.serverPath(path)).buffer(data).int(version),
    read: readStat,
  };
}

export function getChildrenRequest(chroot: Chroot, path: string, watcher?: Watcher): RequestSpec<string[]> {
  return {
    op: OpCode.getChildren,
    what: `getChildren ${path}`,
    write: (writer) => writer.string(chroot.serverPath(path)).bool(watcher !== undefined),
    read: (reader) => reader.vector(() => reader.string() ?? '') ?? [],
    watch: watcher && { path, watcher, found: 'child' },
  };
}

/**
 * Asks the member serving the session to catch up with the leader: a follower forwards it, and
 * answers only once the leader has (a read is answered by the member alone).
 */
export function syncRequest(chroot: Chroot, path: string): RequestSpec<undefined> {
  return {
    op: OpCode.sync,
    what: `sync ${path}`,
    write: (writer) => writer.string(chroot.serverPath(path)),
    read: () => undefined,
  };
}

/**
 * The paths of this session's ephemeral nodes whose path starts with `prefix` (a prefix of the
 * string, as ZooKeeper compares it; `/` for all), in no particular order (getEphemerals, 3.6+).
 */
export function getEphemeralsRequest(chroot: Chroot, prefix: string): RequestSpec<string[]> {
  return {
    op: OpCode.getEphemerals,
    what: `getEphemerals ${prefix}`,
    write: (writer) => writer.string(chroot.serverPath(prefix)),
    read: (reader) =>
      (reader.vector(() => reader.string() ?? '') ?? []).map((path) => chroot.clientPath(path)),
  };
}

export function setAclRequest(
  chroot: Chroot,
  path: string,
  acl: readonly Acl[],
  version: number,
): RequestSpec<Stat> {
  return {
    op: OpCode.setACL,
    what: `setACL ${path}`,
    write: (writer) => {
      writer.string(chroot.serverPath(path));
      writeAcls(writer, acl);
      writer.int(version);
    },
    read: readStat,
  };
}

export function getAclRequest(chroot: Chroot, path: string): RequestSpec<{ acl: Acl[]; stat: Stat }> {
  return {
    op: OpCode.getACL,
    what: `getACL ${path}`,
    write: (writer) => writer.string(chroot.serverPath(path)),
    read: (reader) => ({ acl: readAcls(reader), stat: readStat(reader) }),
  };
}

/** A failed multi answers with the results, each op's error among them (see multiFailure). */
export function multiRequest(chroot: Chroot, ops: readonly MultiOp[]): RequestSpec<MultiResult[]> {
  return {
    op: OpCode.multi,
    what: `multi of ${ops.length}`,
    write: (writer) =>
      writeMulti(
        writer,
        chroot.root === '' ? ops : ops.map((op) => ({ ...op, path: chroot.serverPath(op.path) })),
      ),
    read: (reader, zxid) =>
      readMultiResults(reader, zxid).map((result) =>
        result.op === 'create' ? { ...result, path: chroot.clientPath(result.path) } : result,
      ),
    readOnError: true,
  };
}

/** The children of each path in one request (multiRead, 3.6+), each with its own error. */
export function multiGetChildrenRequest(
  chroot: Chroot,
  paths: readonly string[],
): RequestSpec<ChildrenResult[]> {
  return {
    op: OpCode.multiRead,
    what: `multiRead of ${paths.length}`,
    write: (writer) =>
      writeMultiGetChildren(
        writer,
        paths.map((path) => chroot.serverPath(path)),
      ),
    read: (reader) => readMultiGetChildren(reader),
  };
}

/** The first failure among a multi's results (the one that undid the others), if any. */
export function multiFailure(
  ops: readonly MultiOp[],
  results: readonly MultiResult[],
): ZooKeeperError | undefined {
  const index = results.findIndex(
    (result) =>
      result.op === 'error' && result.err !== ErrorCode.ok && result.err !== ErrorCode.runtimeInconsistency,
  );
  const failed = results[index];
  if (failed?.op !== 'error') return undefined;
  return new ZooKeeperError(
    failed.err,
    `multi: op ${index} (${ops[index]?.op} ${ops[index]?.path}) failed: ${errorName(failed.err)}`,
    index,
  );
}

/**
 * A persistent watch on `path` (addWatch, 3.6+); the node need not exist. `armed` runs as the
 * reply is read, so that an event read right behind it finds the watch.
 */
export function addWatchRequest(
  chroot: Chroot,
  path: string,
  mode: AddWatchMode,
  armed: () => void,
): RequestSpec<void> {
  return {
    op: OpCode.addWatch,
    what: `addWatch ${path}`,
    write: (writer) => writer.string(chroot.serverPath(path)).int(mode),
    // The body (an ErrorResponse of 0) says nothing the header did not.
    read: () => armed(),
  };
}

/** Removes every watch of this session on `path` (WatcherType any: the type 3.6+ take for a persistent one). */
export function removeWatchesRequest(chroot: Chroot, path: string): RequestSpec<void> {
  return {
    op: OpCode.removeWatches,
    what: `removeWatches ${path}`,
    write: (writer) => writer.string(chroot.serverPath(path)).int(WatcherType.any),
    read: () => undefined,
  };
}

export const closeSessionRequest: RequestSpec<void> = {
  op: OpCode.closeSession,
  what: 'closeSession',
  write: () => {},
  read: () => undefined,
};
