/* The ZooKeeper store's single requests on the current session, retried across connection losses,
 * with ZooKeeper's answers turned into the store's. */
import type { NodeData, SetDataOutcome, StoreStats } from '../store.js';
import type { Acl } from './protocol/records.js';
import { ErrorCode } from './protocol/records.js';
import type { SessionKeeper } from './session-keeper.js';
import { MAX_ATTEMPTS, createFailure, isConnectionLoss, unavailable } from './zookeeper-failures.js';
import type { LinkOp, LinkOpResult, LinkReply, NodeMode, ZooKeeperLink } from './zookeeper-link.js';

const EMPTY = new Uint8Array(0);

/**
 * The store's single requests on the current session, each sent again after a connection loss
 * (they are idempotent), with ZooKeeper's answers turned into the store's.
 */
export class LinkOperations {
  readonly #keeper: SessionKeeper;
  readonly #stats: StoreStats;

  constructor(keeper: SessionKeeper, stats: StoreStats) {
    this.#keeper = keeper;
    this.#stats = stats;
  }

  /** Sends an idempotent request, waiting out connection losses and sending it again. */
  async call<T>(
    what: string,
    request: (link: ZooKeeperLink) => Promise<LinkReply<T>>,
  ): Promise<LinkReply<T>> {
    for (let attempt = 1; ; attempt += 1) {
      await this.#keeper.whenConnected(what);
      const reply = await this.#keeper.send(what, request);
      if (!isConnectionLoss(reply.rc) || attempt === MAX_ATTEMPTS) return reply;
    }
  }

  /**
   * Sends a write (see SessionKeeper.write) made for the current session, waiting out
   * connection losses and sending it again; rejects with LOCK_LOST, without sending it again,
   * once that session was taken over.
   */
  async write(
    what: string,
    ops: readonly LinkOp[],
    issuedIn = this.#keeper.session,
  ): Promise<LinkReply<LinkOpResult[]>> {
    for (let attempt = 1; ; attempt += 1) {
      await this.#keeper.whenConnected(what, issuedIn);
      const reply = await this.#keeper.write(ops, issuedIn);
      if (!isConnectionLoss(reply.rc) || attempt === MAX_ATTEMPTS) return reply;
    }
  }

  async children(dir: string): Promise<string[]> {
    const reply = await this.call('getChildren', (link) => link.getChildren(dir, false));
    this.#stats.childrenListings += 1;
    if (reply.rc === ErrorCode.noNode) return [];
    if (reply.rc !== ErrorCode.ok || reply.value === null) throw unavailable('getChildren', reply.rc);
    return reply.value;
  }

  async creationId(path: string): Promise<bigint | null> {
    const reply = await this.call('exists', (link) => link.exists(path, false));
    this.#stats.creationIdReads += 1;
    if (reply.rc === ErrorCode.noNode) return null;
    if (reply.rc !== ErrorCode.ok || reply.value === null) throw unavailable('exists', reply.rc);
    return reply.value;
  }

  /** getData, with a watch on the node if `watch` (the link reports it); null when it is missing. */
  async getData(path: string, watch: boolean): Promise<NodeData | null> {
    const reply = await this.call('getData', (link) => link.getData(path, watch));
    if (reply.rc === ErrorCode.noNode) return null;
    if (reply.rc !== ErrorCode.ok || reply.value === null) throw unavailable('getData', reply.rc);
    return reply.value;
  }

  async setData(path: string, data: Uint8Array, version?: number): Promise<SetDataOutcome> {
    const reply = await this.write('setData', [{ op: 'setData', path, data, version: version ?? -1 }]);
    if (reply.rc === ErrorCode.noNode) return 'missing';
    if (reply.rc === ErrorCode.badVersion) return 'conflict';
    if (reply.rc !== ErrorCode.ok) throw unavailable('setData', reply.rc);
    return 'set';
  }

  async delete(path: string, issuedIn = this.#keeper.session): Promise<void> {
    const reply = await this.write('delete', [{ op: 'delete', path, version: -1 }], issuedIn);
    this.#stats.deletes += 1;
    if (reply.rc !== ErrorCode.ok && reply.rc !== ErrorCode.noNode) throw unavailable('delete', reply.rc);
  }

  async deleteAll(paths: readonly string[]): Promise<void> {
    const issuedIn = this.#keeper.session;
    if (this.#keeper.link.multi && paths.length > 1) {
      const ops: LinkOp[] = paths.map((path) => ({ op: 'delete', path, version: -1 }));
      const reply = await this.write('multi', ops, issuedIn);
      if (reply.rc === ErrorCode.ok) {
        this.#stats.deletes += paths.length;
        return;
      }
      // A node already gone (NONODE fails the whole transaction), or a lost reply: one by one,
      // which is idempotent.
      if (reply.rc !== ErrorCode.noNode && !isConnectionLoss(reply.rc)) throw unavailable('multi', reply.rc);
    }
    await Promise.all(paths.map((path) => this.delete(path, issuedIn)));
  }

  /**
   * Creates a node (a lock's parent or one of its ancestors) unless it exists, with `acl` from
   * its create on (the addon sets it by a setACL right behind the create instead). A node that
   * exists already keeps its ACL: start-up protects the tree (see TreeProtection).
   */
  async createParent(path: string, mode: NodeMode, acl: readonly Acl[] | undefined): Promise<void> {
    for (let attempt = 1; ; attempt += 1) {
      await this.#keeper.whenConnected('create');
      const created = await this.#keeper.send('create', (link) => link.create(path, EMPTY, mode, acl));
      if (isConnectionLoss(created.rc) && attempt < MAX_ATTEMPTS) continue;
      if (created.rc === ErrorCode.ok || created.rc === ErrorCode.nodeExists) return;
      throw createFailure(path, created.rc);
    }
  }
}
