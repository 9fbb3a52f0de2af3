/* Persistent records written in one multi with checks of other nodes (RecordTransactions). */
import { ancestors } from '../node-paths.js';
import type { NodeData, RecordOp, TransactOutcome } from '../store.js';
import type { LinkOperations } from './link-operations.js';
import { ErrorCode } from './protocol/records.js';
import type { SessionKeeper } from './session-keeper.js';
import type { TreeProtection } from './tree-protection.js';
import { MAX_ATTEMPTS, isConnectionLoss, multiUnsupported, unavailable } from './zookeeper-failures.js';
import type { LinkOp } from './zookeeper-link.js';

/** What a failed op's code says, in the store's words; undefined for a code that is a fault. */
const REASONS = new Map<number, 'missing' | 'conflict' | 'exists' | 'not-empty'>([
  [ErrorCode.noNode, 'missing'],
  [ErrorCode.badVersion, 'conflict'],
  [ErrorCode.nodeExists, 'exists'],
  [ErrorCode.notEmpty, 'not-empty'],
]);

/**
 * The ZooKeeper store's RecordTransactions: each transaction one multi, written as every write
 * of the store's session is (fenced by the session's ownership, where it is published), and
 * sent again after a connection loss.
 */
export class RecordWrites {
  readonly #keeper: SessionKeeper;
  readonly #ops: LinkOperations;
  readonly #protection: TreeProtection;
  /** Directories known to exist (lockstream never removes them). */
  readonly #made = new Set<string>();

  constructor(keeper: SessionKeeper, ops: LinkOperations, protection: TreeProtection) {
    this.#keeper = keeper;
    this.#ops = ops;
    this.#protection = protection;
  }

  get transactions(): boolean {
    return this.#keeper.link.multi !== undefined;
  }

  async transact(ops: readonly RecordOp[]): Promise<TransactOutcome> {
    if (!this.#keeper.link.multi) throw multiUnsupported('records written with checks in one step');
    const linkOps = ops.map((op) => this.#linkOp(op));
    const issuedIn = this.#keeper.session;
    // Sent again after each connection loss, as LinkOperations.write does, noting that it was.
    let lostReply = false;
    for (let attempt = 1; ; attempt += 1) {
      await this.#keeper.whenConnected('multi', issuedIn);
      const reply = await this.#keeper.write(linkOps, issuedIn);
      if (isConnectionLoss(reply.rc) && attempt < MAX_ATTEMPTS) {
        lostReply = true;
        continue;
      }
      if (reply.rc === ErrorCode.ok) return { kind: 'done' };
      const reason = REASONS.get(reply.rc);
      if (reason === undefined) throw unavailable('multi', reply.rc);
      const failed = { kind: 'failed', index: reply.failedOp ?? 0, reason } as const;
      return lostReply ? { ...failed, afterLostReply: true } : failed;
    }
  }

  /**
   * A sync and the reads pipelined behind it on one connection: the member serving the session
   * answers them in order, so the reads come after it has caught up with the leader as of the
   * sync. All sent again after a connection loss.
   */
  async readLatest(paths: readonly string[]): Promise<Array<NodeData | null>> {
    for (let attempt = 1; ; attempt += 1) {
      await this.#keeper.whenConnected('sync');
      const synced = this.#keeper.sendThroughLeader('sync', (link) => link.sync('/'));
      const reads = paths.map((path) => this.#keeper.send('getData', (link) => link.getData(path, false)));
      const [sync, ...replies] = await Promise.all([synced, ...reads]);
      const lost = [sync, ...replies].some(({ rc }) => isConnectionLoss(rc));
      if (lost && attempt < MAX_ATTEMPTS) continue;
      if (sync.rc !== ErrorCode.ok) throw unavailable('sync', sync.rc);
      return replies.map((reply) => {
        if (reply.rc === ErrorCode.noNode) return null;
        if (reply.rc !== ErrorCode.ok || reply.value === null) throw unavailable('getData', reply.rc);
        return reply.value;
      });
    }
  }

  async makeDirs(dir: string): Promise<void> {
    if (this.#made.has(dir)) return;
    for (const path of [...ancestors(dir), dir]) {
      if (this.#made.has(path)) continue;
      await this.#ops.createParent(path, 'persistent', this.#protection.aclFor(path));
      this.#made.add(path);
    }
  }

  #linkOp(op: RecordOp): LinkOp {
    switch (op.op) {
      case 'check':
        return { op: 'check', path: op.path, version: op.version ?? -1 };
      case 'create':
        return {
          op: 'create',
          path: op.path,
          data: op.data,
          mode: 'persistent',
          acl: this.#protection.aclFor(op.path),
        };
      case 'set':
        return { op: 'setData', path: op.path, data: op.data, version: op.version ?? -1 };
      case 'delete':
        return { op: 'delete', path: op.path, version: op.version ?? -1 };
    }
  }
}
