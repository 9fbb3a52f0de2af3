/* The store port: what the lock engine needs of a coordination store (CoordinationStore), the
 * capabilities some stores add beside it (NodeReplacement, BulkListing, RecordTransactions,
 * SessionTakeover), and their data. */
import type { LockError } from '../lock-error.js';
import type { NodeFollow } from './node-follow.js';

// Kept importable from here, where the engine and the tests import them.
export { NodeFollow, type FollowerList, type NodeWatchHandlers } from './node-follow.js';
export { ancestors, baseName, joinPath, parentPath } from './node-paths.js';

/**
 * The store port: what the lock engine needs of a coordination store, and nothing more. A
 * small, ZooKeeper-shaped interface with two implementations (ZooKeeper, in-memory). The lock
 * recipe lives in the engine, once; a store only offers sequential ephemeral nodes, listings,
 * watches and a session. What only some stores can do, or only some callers need, is a
 * capability of its own beside it (NodeReplacement, BulkListing, SessionTakeover; see
 * StoreBackend).
 *
 * Contract, pinned down by test/contract/store-contract.ts because ZooKeeper behaves this way:
 * - `children()` comes back in no particular order.
 * - A node can vanish between `children()` and `onceDeleted()`: the wait then ends at once.
 * - Watches are one-shot and fire in the order the deletions happened.
 * - A lost session removes every ephemeral node it owned at once, and `session.lost` aborts.
 * - Lock parents are containers: they appear with their first child and disappear (sooner or
 *   later) once empty, so sequence numbers restart; creation ids never do.
 */
export interface CoordinationStore {
  /** The session that new nodes are created in; replaced by a new one after a loss. */
  readonly session: StoreSession;

  /**
   * Creates one ephemeral node per entry, named `prefix` + a 10-digit sequence number that
   * grows per parent, creating the (container) parent `dir` and its ancestors as needed, and
   * lists each `dir` right after: the listing is sent behind the create without waiting for
   * its reply (a store answers a session's requests in order), so it includes the new node and
   * costs no extra round trip. With `follow`, the new node is also followed as by `watchNode`
   * from the start (ZooKeeper: a getData with a watch, sent with the create, on the path the
   * node is expected to get; if it got another, one more round trip). `prefix` must be unique
   * per call: after a connection loss the store looks for it to find out whether the create
   * went through before trying again, so no ghost node is left behind.
   *
   * Several entries are created in one atomic step (ZooKeeper's multi): no listing anywhere
   * sees some of them and not the others, and every node of one call is ordered the same way
   * against the nodes of any other call in every parent they share (ZooKeeper: they have one
   * czxid, the transaction's). Results in the entries' order. Rejects with
   * `LockError('UNSUPPORTED')` for several entries where the store cannot (the ZooKeeper addon
   * client has no multi), `UNAVAILABLE` when the store cannot be reached.
   */
  createNodes(entries: readonly SequentialEntry[]): Promise<CreatedNode[]>;

  /**
   * Names (not paths) of the children of `dir`, unsorted; `[]` when `dir` does not exist.
   *
   * With `asTold`: as of every watch event and reply this store has read, without asking,
   * where its watch tells every change of `dir` (ZooKeeper 3.6+: the tree's watch, on a lock
   * parent in step); elsewhere as without. For waiters, who list after each change they are
   * told of: the listing then holds that change and every one before it, which is all the lock
   * recipe needs (a node ahead can only go, never come). Never sooner than a turn later, as a
   * reply would be. Not a round trip: a caller that must see the store's present state (a
   * barrier behind its own requests) lists without it.
   */
  children(dir: string, options?: ListingOptions): Promise<string[]>;

  /** The node's creation id and data; `null` when the node does not exist. */
  nodeData(path: string): Promise<NodeData | null>;

  /**
   * Replaces a node's data; with `version`, only if the node's data version (NodeData.version)
   * is still that one (compare-and-set: two writers of one node's record never lose each
   * other's fields). Says 'missing' when the node does not exist, 'conflict' when its version
   * differs. After a lost reply a write may have been applied: a caller that retries reads
   * again and finds its own write.
   */
  setData(path: string, data: Uint8Array, version?: number): Promise<SetDataOutcome>;

  /**
   * Deletes a node, or several: several in one atomic step where the store can (ZooKeeper's
   * multi: no listing sees some gone and others not), else one by one. Deleting a missing node
   * is not an error (several with a missing one then go one by one).
   */
  delete(paths: string | readonly string[]): Promise<void>;

  /**
   * Follows one node until `follow` stops: resolves with its creation id and data as read
   * when the watch was armed (`null`, and nothing follows, if it does not exist); then calls
   * `follow.handlers.onData` after every change and `onDeleted` once when it is deleted. One read arms it: for
   * a request to learn its fencing token, hear of its node's deletion while it waits, and, once
   * holding, of revocation requests.
   */
  watchNode(path: string, follow: NodeFollow): Promise<NodeData | null>;

  /**
   * Calls `onChange` whenever a child of `dir` is created or deleted (also while `dir` does not
   * exist yet), until the returned function is called. Changes close together may be reported
   * once. For WatchLock and for the places of a lock's waiters, never for a grant.
   */
  watchChildren(dir: string, onChange: () => void): () => void;

  /**
   * Calls `onDeleted` once `path` is deleted (soon, if it is already gone), or with the error if
   * the store cannot watch it; never after the returned function was called. Wakes only the
   * callers waiting on this path. A callback, not a promise: a waiting request is a state
   * machine, and a suspended async frame plus a signal per waiter cost more than its state.
   */
  onceDeleted(path: string, onDeleted: (error?: LockError) => void): () => void;

  /** Ends the session (its ephemeral nodes go at once) and releases resources. Idempotent. */
  close(): Promise<void>;
}

/** How `children` lists (see CoordinationStore.children). */
export interface ListingOptions {
  /** As told by the store's watch, where it tells every change of the parent. */
  readonly asTold?: boolean;
}

/** A waiter's listing: as told by the store's watch (see CoordinationStore.children). */
export const AS_TOLD: ListingOptions = { asTold: true };

/**
 * Replaces an ephemeral node by another in one atomic step: a WRITE hold's downgrade to READ.
 * Where the store cannot (the ZooKeeper addon client has no multi), it rejects with
 * `LockError('UNSUPPORTED')`.
 */
export interface NodeReplacement {
  /**
   * Replaces the ephemeral node at `path` by one named `name` under the same parent, with
   * `data`, in one atomic step (ZooKeeper's multi: no listing sees both, or neither), if the
   * node's data version is still `version` and `session` is still the store's session. The new
   * node is followed with `follow` from the start (as by `watchNode`). Says 'missing' when the
   * node or the session is gone, 'conflict' when the version differs.
   */
  replaceNode(
    path: string,
    name: string,
    data: Uint8Array,
    version: number,
    session: StoreSession,
    follow: NodeFollow,
  ): Promise<ReplacedNode | 'missing' | 'conflict'>;
}

/**
 * Persistent records written in one atomic step with checks of other nodes (ZooKeeper's multi):
 * what an election's history needs, each write conditional on its leader's node. Where the
 * store cannot (the ZooKeeper addon client has no multi), both reject with
 * `LockError('UNSUPPORTED')`.
 */
export interface RecordTransactions {
  /** False where the store cannot write in one step (the addon): `transact` then rejects. */
  readonly transactions: boolean;
  /**
   * Applies `ops` in order, all or none: 'done', or the first op that failed and why. After a
   * lost reply the whole step is sent again, so a create in it may then fail 'exists' because
   * the first try was applied: a caller that cannot tell its own record from another's reads it.
   */
  transact(ops: readonly RecordOp[]): Promise<TransactOutcome>;
  /** Creates `dir` and its ancestors as persistent nodes, where missing (never removed by lockstream). */
  makeDirs(dir: string): Promise<void>;
  /**
   * Each of `paths`' data, as `nodeData` reads it, but never older than every write completed
   * before the call (ZooKeeper: read behind a sync with the leader, as a follower may lag).
   */
  readLatest(paths: readonly string[]): Promise<Array<NodeData | null>>;
}

/** One step of a transaction (see RecordTransactions). */
export type RecordOp =
  /** Fails 'missing' unless the node exists, 'conflict' unless its data version is `version` (if given). */
  | { readonly op: 'check'; readonly path: string; readonly version?: number }
  /** A persistent node (its parent must exist: 'missing' otherwise); 'exists' if it does. */
  | { readonly op: 'create'; readonly path: string; readonly data: Uint8Array }
  /** New data, if the data version is still `version` (if given): 'missing', 'conflict'. */
  | { readonly op: 'set'; readonly path: string; readonly data: Uint8Array; readonly version?: number }
  /** Removes a node without children, if its data version is still `version` (if given): 'missing', 'conflict'. */
  | { readonly op: 'delete'; readonly path: string; readonly version?: number };

export type TransactOutcome =
  | { readonly kind: 'done' }
  | {
      readonly kind: 'failed';
      /** The index in `ops` of the first op that failed; none was applied. */
      readonly index: number;
      readonly reason: 'missing' | 'conflict' | 'exists' | 'not-empty';
      /**
       * Set when the transaction was sent again after a lost reply: the first try may have been
       * applied, and this failure be the second try's (a create's 'exists', a check's 'conflict').
       */
      readonly afterLostReply?: true;
    };

/** Lists many parents at once: for inspection (ListLocks reads every lock parent). */
export interface BulkListing {
  /**
   * `children()` of each of `dirs`, in their order, at a fraction of the cost of one call each
   * (ZooKeeper: a thousand reads per request, multiRead). Not one snapshot: each listing is as
   * of its own moment, as with one call each.
   */
  childrenOfEach(dirs: readonly string[]): Promise<string[][]>;
}

/**
 * A store as made: the port, its capabilities, and what the server around the engine (start-up,
 * metrics, tests, benchmarks) reads of it. The engine itself is written against
 * CoordinationStore and is handed the capabilities it uses.
 */
export interface StoreBackend
  extends CoordinationStore, NodeReplacement, BulkListing, RecordTransactions, AsyncDisposable {
  /** `memory` or `zookeeper`, for logs. */
  readonly kind: string;
  /** Operation counts since start, for tests that check the absence of a herd and for benchmarks. */
  readonly stats: Readonly<StoreStats>;
  /**
   * The node's creation id (ZooKeeper's czxid): unique across the store, larger for every
   * later creation, never reused. `null` when the node does not exist. For tests.
   */
  creationId(path: string): Promise<bigint | null>;
  /**
   * Present where the store's session can move to another lockstream instance (ZooKeeper on
   * lockstream's own client); absent on the memory store and the ZooKeeper addon.
   */
  readonly takeover?: SessionTakeover | undefined;
}

export interface StoreSession {
  /** Store-specific session id, for logs. */
  readonly id: string;
  /**
   * Aborts, with a `LockError('LOCK_LOST')` as reason, when the session's ephemeral nodes are
   * gone, or must be assumed gone because the back end has been out of reach for so long that
   * it may already have expired the session.
   */
  readonly lost: AbortSignal;
  /**
   * True while the store can vouch that the session and its nodes are alive (connected, and
   * heard from the back end recently). False while that is in doubt: disconnected, though the
   * session may yet survive. Always false once `lost` has aborted.
   */
  readonly confirmed: boolean;
  /** Calls `listener` whenever `confirmed` changes (not after `lost`); returns an unsubscribe function. */
  onConfirmedChange(listener: (confirmed: boolean) => void): () => void;
}

/**
 * How a session, with every node it owns (and so every lock and queue place), outlives the
 * instance that made it: another instance takes it over. Each session is published under a
 * name, with what it takes to attach to it (kept where only lockstream's own identity can read
 * it); a taker attaches and marks itself the owner, and from then on the previous owner can
 * change nothing in it: every write of an owner is conditional on still owning the session
 * (ZooKeeper: a multi with a check on the published record, whose version the taker bumps).
 */
export interface SessionTakeover {
  /**
   * The name the store's current session is published under: in resume tokens, so that any
   * instance can find the session a token's requests live in. Changes when the session does.
   */
  readonly publishedAs: string;
  /**
   * Takes over the session published as `name` (by another instance, or taken over by one
   * since). Resolves with a store on that session, which never opens another one (closing it
   * ends the session, and its nodes go), and the nodes the session owns; undefined when no
   * session is published under that name any more (it ended, expired, or never was).
   */
  takeOver(name: string): Promise<TakenSession | undefined>;
  /**
   * A proof that the session this store published (`publishedAs`, while it is the store's own)
   * issued `claim`: a signature by a key whose public half is in the session's published
   * record, so that whoever can read the record can check proofs (`vouched`), never make them.
   */
  vouch(claim: string): string;
  /**
   * Whether `proof` is the proof of `claim` by the session published as `name` (another
   * instance's): reads the session's record and changes nothing, here or on its owner. False
   * when no session is published under that name (any more), or its record has no key.
   */
  vouched(name: string, claim: string, proof: string): Promise<boolean>;
  /**
   * Calls `listener` when another instance has taken this store's session over, before the
   * session's `lost` aborts: its nodes are someone else's now, and nothing here may act on
   * them. Returns an unsubscribe function.
   */
  onTakenOver(listener: (by: string) => void): () => void;
  /**
   * Lets the session go without ending it: stops every request, ping and reconnection, so
   * the session lives on (for its timeout) for another instance to take over. Then as close().
   */
  handOver(): Promise<void>;
}

export interface TakenSession {
  /** A store on the taken session (with `takeover` too: it can be taken over again). */
  readonly store: StoreBackend;
  /** Every node the session owns, as read after the takeover (no write of the previous owner follows). */
  readonly nodes: readonly OwnedNode[];
  /**
   * How long the back end keeps a session it hears nothing from (ZooKeeper's session timeout):
   * had nobody taken this one over, its nodes would have gone at the latest that long after
   * its previous owner was last heard, which is no later than the takeover.
   */
  readonly expiresAfterMs: number;
}

export interface OwnedNode extends NodeData {
  readonly path: string;
}

export interface NodeData {
  /** As `creationId()`. */
  readonly creationId: bigint;
  readonly data: Uint8Array;
  /** The data's version (ZooKeeper's Stat.version): 0 at the create, one more per setData. */
  readonly version: number;
}

export type SetDataOutcome = 'set' | 'missing' | 'conflict';

export interface ReplacedNode {
  readonly path: string;
  readonly creationId: bigint;
}

/** One node to create (see CoordinationStore.createNodes). */
export interface SequentialEntry {
  readonly dir: string;
  readonly prefix: string;
  readonly data: Uint8Array;
  readonly follow?: NodeFollow | undefined;
}

export interface CreatedNode {
  readonly path: string;
  readonly session: StoreSession;
  /** The names of `dir`'s children right after the create, this node's among them. */
  readonly siblings: string[];
  /**
   * The node's creation id, when the create answered with it (ZooKeeper's create2, the memory
   * store); otherwise the follow's read gives it.
   */
  readonly creationId?: bigint;
  /**
   * With `follow`: the node as the follow's first read saw it (`null` if it was already gone,
   * and then nothing follows).
   */
  readonly followed?: NodeData | null;
}

export interface StoreStats {
  creates: number;
  childrenListings: number;
  creationIdReads: number;
  deletes: number;
  /** Deletion watches armed on the back end (several waiters on one path share one). */
  watchesArmed: number;
  /** Waiters woken by a deletion (not counting waits that resolved because the node was already gone). */
  waitersWoken: number;
}

export function emptyStats(): StoreStats {
  return {
    creates: 0,
    childrenListings: 0,
    creationIdReads: 0,
    deletes: 0,
    watchesArmed: 0,
    waitersWoken: 0,
  };
}

/**
 * `onceDeleted` as a promise: resolves once `path` is deleted, rejects with the store's error,
 * or with the signal's reason when `signal` aborts.
 */
export function waitUntilDeleted(
  store: CoordinationStore,
  path: string,
  options: { signal: AbortSignal },
): Promise<void> {
  const { signal } = options;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<void>((resolve, reject) => {
    const onAbort = (): void => {
      cancel();
      reject(signal.reason);
    };
    const cancel = store.onceDeleted(path, (error) => {
      signal.removeEventListener('abort', onAbort);
      if (error) reject(error);
      else resolve();
    });
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** Creates one node (see CoordinationStore.createNodes). */
export async function createSequential(
  store: CoordinationStore,
  dir: string,
  prefix: string,
  data: Uint8Array,
  follow?: NodeFollow,
): Promise<CreatedNode> {
  const [created] = await store.createNodes([{ dir, prefix, data, follow }]);
  return created!;
}
