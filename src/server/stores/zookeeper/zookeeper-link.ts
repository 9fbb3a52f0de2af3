/* The link: one ZooKeeper session as the ZooKeeper store uses it, whichever client carries it. */
import type { NodeData } from '../store.js';
import type { Acl } from './protocol/records.js';

/**
 * One ZooKeeper session as the ZooKeeper store uses it, whichever client carries it: the
 * TypeScript protocol client (the default) or the `zookeeper` addon (the native C client).
 * The store's recipe, its session health and its fault handling are written once against this.
 *
 * Every request answers with ZooKeeper's return code (`ErrorCode`: both clients use the
 * server's numbers) and never rejects; requests made in one turn of the event loop are answered
 * in the order they were made. Watches are armed with `watch: true` and reported, once each,
 * to `LinkEvents.node`, one report per event however many watches it used up.
 */
export interface ZooKeeperLink {
  /** Hex session id, for logs; "0" before the first connection. */
  readonly sessionId: string;
  /** The session's id and password, for fault-injection tests that attach to it and close it. */
  readonly credentials: { readonly id: bigint; readonly password: Uint8Array };
  /** The session timeout ZooKeeper granted, in ms; 0 or less before it has. */
  readonly negotiatedTimeoutMs: number;
  /**
   * Whether `create` sets the ACL in the create itself. Otherwise (the addon) it sends a
   * setACL after the create, and the node is open to everyone until that is applied.
   */
  readonly createsWithAcl: boolean;

  create(
    path: string,
    data: Uint8Array,
    mode: NodeMode,
    acl?: readonly Acl[],
  ): Promise<LinkReply<CreatedZNode>>;
  /** The node's creation id; with `watch`, a watch on its creation, change or deletion. */
  exists(path: string, watch: boolean): Promise<LinkReply<bigint>>;
  getData(path: string, watch: boolean): Promise<LinkReply<NodeData>>;
  getChildren(path: string, watch: boolean): Promise<LinkReply<string[]>>;
  /**
   * Answers once the member serving the session has caught up with the leader as of this
   * request. A follower forwards it and answers only after the leader has, so its reply, unlike
   * a read's, shows that the leader was reachable after it was sent (see SessionHealth).
   */
  sync(path: string): Promise<LinkReply<undefined>>;
  /** With `version` -1, whatever the node's version (else BADVERSION if it differs). */
  setData(path: string, data: Uint8Array, version: number): Promise<LinkReply<undefined>>;
  setAcl(path: string, acl: readonly Acl[]): Promise<LinkReply<undefined>>;
  delete(path: string): Promise<LinkReply<undefined>>;
  /**
   * Applies `ops` atomically (ZooKeeper's multi): all of them or none, `rc` the first failing
   * op's code. Undefined on a client without multi (the addon).
   */
  readonly multi: ((ops: readonly LinkOp[]) => Promise<LinkReply<LinkOpResult[]>>) | undefined;
  /**
   * The children of each of `paths`, in their order, in one request (ZooKeeper's multiRead,
   * 3.6+): each path answers with its children or its own code (NONODE for a missing one).
   * An older server answers UNIMPLEMENTED and drops the connection. Undefined on a client
   * without multiRead (the addon).
   */
  readonly multiGetChildren:
    ((paths: readonly string[]) => Promise<LinkReply<Array<LinkReply<string[]>>>>) | undefined;
  /**
   * The paths of the session's ephemeral nodes that start with `prefix` (ZooKeeper 3.6+'s
   * getEphemerals), in no particular order. Undefined on a client without it (the addon).
   */
  readonly getEphemerals: ((prefix: string) => Promise<LinkReply<string[]>>) | undefined;
  /**
   * Lets the session go without ending it: no closeSession, and no more pings or reconnection
   * from the call on, so the session lives on for its timeout, for another client to attach to
   * it. Undefined on a client that cannot let go without ending the session (the addon).
   */
  readonly drop: (() => void) | undefined;
  /**
   * Leaves the member the session is on for the next one, keeping the session (requests in
   * flight fail with CONNECTIONLOSS). Undefined on a client that cannot (the addon).
   */
  readonly moveOn: (() => void) | undefined;
  /**
   * Sets a persistent recursive watch on `path` (ZooKeeper 3.6+'s addWatch): `watcher` hears
   * every creation, deletion and data change below it, in zxid order with the replies, for the
   * rest of the session. UNIMPLEMENTED on ZooKeeper 3.5, which also drops the connection (the
   * session lives on). Undefined on a client without it (the addon).
   */
  readonly watchTree: ((path: string, watcher: TreeWatcher) => Promise<LinkReply<undefined>>) | undefined;
  /**
   * Ends the session and the connection, whatever the link is doing: connected, it sends a
   * closeSession (the session's ephemeral nodes go at once); in any case it stops pinging and
   * reconnecting, so nothing keeps the session alive and ZooKeeper expires it.
   */
  close(): void;
}

export interface LinkReply<T> {
  readonly rc: number;
  /** Set when `rc` is `ErrorCode.ok`. */
  readonly value: T | null;
  /** For a multi that failed: the index of the op that failed (the others were undone). */
  readonly failedOp?: number;
}

export type NodeMode = 'persistent' | 'container' | 'ephemeral' | 'ephemeralSequential';

/** One operation of a multi. */
export type LinkOp =
  | {
      readonly op: 'create';
      readonly path: string;
      readonly data: Uint8Array;
      readonly mode: NodeMode;
      readonly acl: readonly Acl[] | undefined;
    }
  | { readonly op: 'delete'; readonly path: string; readonly version: number }
  | { readonly op: 'setData'; readonly path: string; readonly data: Uint8Array; readonly version: number }
  /** Fails the multi (BADVERSION, or NONODE) unless the node's data version is `version`. */
  | { readonly op: 'check'; readonly path: string; readonly version: number };

/**
 * What one operation of a multi did: a create's path (with any sequence suffix) and czxid (a
 * multi always has it; a plain create only on a client whose create answers with it), a
 * setData's new data version.
 */
export type LinkOpResult =
  | { readonly op: 'create'; readonly path: string; readonly creationId?: bigint }
  | { readonly op: 'delete' }
  | { readonly op: 'setData'; readonly version: number }
  | { readonly op: 'check' };

export interface CreatedZNode {
  readonly path: string;
  /** The node's czxid, when the client's create answers with it (create2); else read it. */
  readonly creationId?: bigint;
}

export type NodeEventKind = 'created' | 'deleted' | 'changed' | 'children';

/** What a link reports, from the moment it is opened. */
/** The owner of a link's persistent recursive watch (see ZooKeeperLink.watchTree). */
export interface TreeWatcher {
  changed(kind: NodeEventKind, path: string): void;
  /** The watch is set again after a reconnect: what changed while away was not told. */
  resumed(): void;
  /** The watch is gone for good (its session ended, or a member without addWatch took it). */
  ended(): void;
}

export interface LinkEvents {
  /**
   * A member granted the session, or took it back after a disconnection. `handshakeSentAt`
   * (performance.now()) is when the handshake went out, where the client knows it: a new
   * session is a write, and a member that takes an existing one back has the leader revalidate
   * it first, so either way the leader heard the session after that time.
   */
  connected(handshakeSentAt: number | undefined): void;
  /** The connection was lost; the session may survive it (requests in flight fail). */
  disconnected(): void;
  /** The session is over on ZooKeeper's side (expired, or closed by another handle). */
  ended(expired: boolean, detail: string): void;
  node(kind: NodeEventKind, path: string): void;
}

export interface LinkOptions {
  /** `host:port[,host:port...]`, optionally followed by a chroot path. */
  readonly connectString: string;
  readonly sessionTimeoutMs: number;
  /** Digest credentials (`user:password`) sent ahead of every request after each connect. */
  readonly digest?: string;
  /** Attach to an existing session instead of creating one (a takeover; fault injection). */
  readonly session?: { readonly id: bigint; readonly password: Uint8Array };
}

/** The clients a ZooKeeper store can run on: `protocol` (TypeScript, the default) or `addon`. */
export const ZOOKEEPER_CLIENTS = ['protocol', 'addon'] as const;
export type ZooKeeperClientKind = (typeof ZOOKEEPER_CLIENTS)[number];

export type LinkFactory = (options: LinkOptions, events: LinkEvents) => ZooKeeperLink;
