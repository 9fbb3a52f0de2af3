/* ZooKeeper's protocol records as lockstream uses them: codes, and how each record is written and read. */
import type { JuteReader, JuteWriter } from './jute.js';

/**
 * ZooKeeper's client protocol records (zookeeper.jute, 3.5+), as lockstream uses them: the
 * operation codes, error codes and the requests and replies a lock store needs.
 */

export const OpCode = {
  notification: 0,
  create: 1,
  delete: 2,
  exists: 3,
  getData: 4,
  setData: 5,
  getACL: 6,
  setACL: 7,
  getChildren: 8,
  /** Answered by the member only once the leader has answered it (a follower forwards it). */
  sync: 9,
  ping: 11,
  check: 13,
  multi: 14,
  create2: 15,
  /** 3.5+, for persistent watches 3.6+. */
  removeWatches: 18,
  createContainer: 19,
  createTTL: 21,
  /** 3.6+; an older server answers UNIMPLEMENTED and drops the connection. */
  multiRead: 22,
  /** 3.6+; an older server answers UNIMPLEMENTED and drops the connection. */
  getEphemerals: 103,
  closeSession: -11,
  auth: 100,
  setWatches: 101,
  /** SetWatches with persistent watches (3.6+). */
  setWatches2: 105,
  /** 3.6+; an older server answers UNIMPLEMENTED and drops the connection. */
  addWatch: 106,
  error: -1,
} as const;

/** The xids the server and client reserve: everything else numbers requests. */
export const Xid = {
  notification: -1,
  ping: -2,
  auth: -4,
  setWatches: -8,
} as const;

export const ErrorCode = {
  ok: 0,
  runtimeInconsistency: -2,
  connectionLoss: -4,
  marshallingError: -5,
  unimplemented: -6,
  operationTimeout: -7,
  badArguments: -8,
  noNode: -101,
  noAuth: -102,
  badVersion: -103,
  noChildrenForEphemerals: -108,
  nodeExists: -110,
  notEmpty: -111,
  sessionExpired: -112,
  invalidAcl: -114,
  authFailed: -115,
  sessionMoved: -118,
  /** removeWatches: the session has no such watch on the path. */
  noWatcher: -121,
} as const;

export const CreateMode = {
  persistent: 0,
  ephemeral: 1,
  persistentSequential: 2,
  ephemeralSequential: 3,
  container: 4,
  persistentWithTtl: 5,
  persistentSequentialWithTtl: 6,
} as const;

export const EventType = {
  none: -1,
  nodeCreated: 1,
  nodeDeleted: 2,
  nodeDataChanged: 3,
  nodeChildrenChanged: 4,
} as const;

/**
 * The modes of addWatch (3.6+): persistent watches are not used up by their events.
 * `persistent` hears the path's own NodeCreated, NodeDeleted, NodeDataChanged and
 * NodeChildrenChanged; `persistentRecursive` hears NodeCreated, NodeDeleted and NodeDataChanged
 * of the path and of every node below it, and never NodeChildrenChanged.
 */
export const AddWatchMode = {
  persistent: 0,
  persistentRecursive: 1,
} as const;

export type AddWatchMode = (typeof AddWatchMode)[keyof typeof AddWatchMode];

/**
 * removeWatches' watch types. `any` is the one every server since 3.6 takes for a persistent
 * watch (the Programmer's Guide says so); 3.6–3.8 know no other type for it.
 */
export const WatcherType = {
  children: 1,
  data: 2,
  any: 3,
} as const;

export const KeeperState = {
  disconnected: 0,
  syncConnected: 3,
  authFailed: 4,
  expired: -112,
} as const;

export const Perms = { read: 1, write: 2, create: 4, delete: 8, admin: 16, all: 31 } as const;

export interface Acl {
  readonly perms: number;
  readonly scheme: string;
  readonly id: string;
}

export const OPEN_ACL_UNSAFE: readonly Acl[] = [{ perms: Perms.all, scheme: 'world', id: 'anyone' }];

/** A node's Stat; zxids and the owner's session id are exact (bigint). */
export interface Stat {
  readonly czxid: bigint;
  readonly mzxid: bigint;
  readonly ctime: bigint;
  readonly mtime: bigint;
  readonly version: number;
  readonly cversion: number;
  readonly aversion: number;
  readonly ephemeralOwner: bigint;
  readonly dataLength: number;
  readonly numChildren: number;
  readonly pzxid: bigint;
}

export function readStat(reader: JuteReader): Stat {
  return {
    czxid: reader.long(),
    mzxid: reader.long(),
    ctime: reader.long(),
    mtime: reader.long(),
    version: reader.int(),
    cversion: reader.int(),
    aversion: reader.int(),
    ephemeralOwner: reader.long(),
    dataLength: reader.int(),
    numChildren: reader.int(),
    pzxid: reader.long(),
  };
}

export function writeAcls(writer: JuteWriter, acls: readonly Acl[]): void {
  writer.vector(acls, (acl) => writer.int(acl.perms).string(acl.scheme).string(acl.id));
}

export function readAcls(reader: JuteReader): Acl[] {
  return (
    reader.vector(() => ({
      perms: reader.int(),
      scheme: reader.string() ?? '',
      id: reader.string() ?? '',
    })) ?? []
  );
}

export interface ConnectRequest {
  readonly lastZxidSeen: bigint;
  readonly timeoutMs: number;
  readonly sessionId: bigint;
  readonly password: Uint8Array;
}

export function writeConnectRequest(writer: JuteWriter, request: ConnectRequest): void {
  writer
    .int(0)
    .long(request.lastZxidSeen)
    .int(request.timeoutMs)
    .long(request.sessionId)
    .buffer(request.password)
    // readOnly: not a read-only client (servers since 3.4 read it when present).
    .bool(false);
}

export interface ConnectResponse {
  /** Zero or less: the session asked for has expired. */
  readonly timeoutMs: number;
  readonly sessionId: bigint;
  readonly password: Buffer;
}

export function readConnectResponse(reader: JuteReader): ConnectResponse {
  reader.int(); // protocolVersion
  const timeoutMs = reader.int();
  const sessionId = reader.long();
  const password = reader.buffer() ?? Buffer.alloc(16);
  // readOnly follows on servers since 3.4; nothing here depends on it.
  return { timeoutMs, sessionId, password };
}

export interface WatcherEvent {
  readonly type: number;
  readonly state: number;
  readonly path: string;
}

export function readWatcherEvent(reader: JuteReader): WatcherEvent {
  return { type: reader.int(), state: reader.int(), path: reader.string() ?? '' };
}

/** One operation of a `multi`: all of them happen, or none. */
export type MultiOp =
  | {
      readonly op: 'create';
      readonly path: string;
      readonly data: Uint8Array;
      readonly acl: readonly Acl[];
      readonly mode: number;
    }
  | { readonly op: 'delete'; readonly path: string; readonly version: number }
  | { readonly op: 'setData'; readonly path: string; readonly data: Uint8Array; readonly version: number }
  | { readonly op: 'check'; readonly path: string; readonly version: number };

export type MultiResult =
  /**
   * ZooKeeper 3.8 applies a create inside a multi as a plain create (no Stat). Every operation
   * of a multi is one transaction, so the node's czxid is the multi's zxid.
   */
  | { readonly op: 'create'; readonly path: string; readonly czxid: bigint }
  | { readonly op: 'delete' }
  | { readonly op: 'setData'; readonly stat: Stat }
  | { readonly op: 'check' }
  | { readonly op: 'error'; readonly err: number };

export function writeMulti(writer: JuteWriter, ops: readonly MultiOp[]): void {
  for (const op of ops) {
    switch (op.op) {
      case 'create':
        writer.int(OpCode.create2).bool(false).int(-1);
        writer.string(op.path).buffer(op.data);
        writeAcls(writer, op.acl);
        writer.int(op.mode);
        break;
      case 'delete':
        writer.int(OpCode.delete).bool(false).int(-1).string(op.path).int(op.version);
        break;
      case 'setData':
        writer.int(OpCode.setData).bool(false).int(-1).string(op.path).buffer(op.data).int(op.version);
        break;
      case 'check':
        writer.int(OpCode.check).bool(false).int(-1).string(op.path).int(op.version);
        break;
    }
  }
  writer.int(-1).bool(true).int(-1);
}

/** The results of a multi whose reply carried `zxid`. */
export function readMultiResults(reader: JuteReader, zxid: bigint): MultiResult[] {
  const results: MultiResult[] = [];
  for (const { type, err } of multiReplyHeaders(reader)) {
    switch (type) {
      case OpCode.create:
        results.push({ op: 'create', path: reader.string() ?? '', czxid: zxid });
        break;
      case OpCode.create2: {
        const path = reader.string() ?? '';
        results.push({ op: 'create', path, czxid: readStat(reader).czxid });
        break;
      }
      case OpCode.delete:
        results.push({ op: 'delete' });
        break;
      case OpCode.setData:
        results.push({ op: 'setData', stat: readStat(reader) });
        break;
      case OpCode.check:
        results.push({ op: 'check' });
        break;
      case OpCode.error:
        results.push({ op: 'error', err: reader.int() });
        break;
      default:
        throw new Error(`multi result of unexpected type ${type} (err ${err})`);
    }
  }
  return results;
}

/**
 * The header of each result in a multi or multiRead reply (its type and error), up to the
 * closing one; the caller reads each result's body before asking for the next header.
 */
function* multiReplyHeaders(reader: JuteReader): Generator<{ type: number; err: number }> {
  for (;;) {
    const type = reader.int();
    const done = reader.bool();
    const err = reader.int();
    if (done) return;
    yield { type, err };
  }
}

/**
 * One getChildren of a multiRead: the node's children's names, or its own error (NONODE,
 * NOAUTH). Unlike a multi's, the reads of a multiRead fail one by one.
 */
export type ChildrenResult = { readonly children: string[] } | { readonly err: number };

/** A multiRead of one getChildren (without a watch) per path. */
export function writeMultiGetChildren(writer: JuteWriter, paths: readonly string[]): void {
  for (const path of paths) writer.int(OpCode.getChildren).bool(false).int(-1).string(path).bool(false);
  writer.int(-1).bool(true).int(-1);
}

export function readMultiGetChildren(reader: JuteReader): ChildrenResult[] {
  const results: ChildrenResult[] = [];
  for (const { type, err } of multiReplyHeaders(reader)) {
    switch (type) {
      case OpCode.getChildren:
        results.push({ children: reader.vector(() => reader.string() ?? '') ?? [] });
        break;
      case OpCode.error:
        results.push({ err: reader.int() });
        break;
      default:
        throw new Error(`multiRead result of unexpected type ${type} (err ${err})`);
    }
  }
  return results;
}
