/* The ZooKeeper store's SessionTakeover capability: taking over a session another instance
 * published, with the nodes it owns, vouching for claims, and handing the store's own session over. */
import { LockError } from '../../lock-error.js';
import type { OwnedNode, SessionTakeover, StoreBackend, TakenSession } from '../store.js';
import type { LinkOperations } from './link-operations.js';
import { ErrorCode } from './protocol/records.js';
import type { SessionKeeper, SessionKeeperOptions } from './session-keeper.js';
import { vouchedBy, type SessionOwnership } from './session-ownership.js';
import { parseRecord, recordCredentials, recordName, recordPath } from './session-record.js';
import { unavailable } from './zookeeper-failures.js';

/** What a store made by takeOver attaches to (see SessionKeeperOptions.attach). */
export type Attach = NonNullable<SessionKeeperOptions['attach']>;

export interface ZooKeeperTakeoverParts {
  readonly keeper: SessionKeeper;
  readonly ops: LinkOperations;
  readonly ownership: SessionOwnership;
  /** Stops the store's tree view and node watches, once its session is handed over. */
  readonly stopWatching: () => void;
  /** A new store, as this one but on the session `attach` names, and that store's takeover. */
  readonly attachTo: (attach: Attach) => {
    readonly store: StoreBackend;
    readonly takeover: ZooKeeperTakeover;
  };
}

/**
 * SessionTakeover on the ZooKeeper store (with `publish`, on the protocol client): the store
 * hands it out as `takeover`. A taken session gets a store of its own (`attachTo`), on the
 * same options, that claims it through its keeper (see OwnershipGuard).
 */
export class ZooKeeperTakeover implements SessionTakeover {
  readonly #keeper: SessionKeeper;
  readonly #ops: LinkOperations;
  readonly #ownership: SessionOwnership;
  readonly #stopWatching: () => void;
  readonly #attachTo: ZooKeeperTakeoverParts['attachTo'];

  constructor(parts: ZooKeeperTakeoverParts) {
    this.#keeper = parts.keeper;
    this.#ops = parts.ops;
    this.#ownership = parts.ownership;
    this.#stopWatching = parts.stopWatching;
    this.#attachTo = parts.attachTo;
  }

  get publishedAs(): string {
    return this.#keeper.publishedAs;
  }

  vouch(claim: string): string {
    return this.#ownership.vouch(claim);
  }

  onTakenOver(listener: (by: string) => void): () => void {
    return this.#keeper.onTakenOver(listener);
  }

  /** As SessionTakeover.vouched: one read of the record, nothing attached to or written. */
  async vouched(name: string, claim: string, proof: string): Promise<boolean> {
    if (!/^[0-9a-f]{16}$/.test(name) || name === this.#keeper.publishedAs) return false;
    const node = await this.#ops.getData(recordPath(this.#ownership.root, name), false);
    const record = node && parseRecord(node.data);
    return record !== null && record !== undefined && vouchedBy(record, claim, proof);
  }

  /** As SessionTakeover.takeOver. */
  async takeOver(name: string): Promise<TakenSession | undefined> {
    const ownership = this.#ownership;
    const path = recordPath(ownership.root, name);
    if (name === this.#keeper.publishedAs)
      throw new LockError('INVALID_ARGUMENT', `ZooKeeper session ${name} is this store's own`);
    const node = await this.#ops.getData(path, false);
    if (!node) return undefined;
    const record = parseRecord(node.data);
    const credentials = record && recordCredentials(record);
    if (!record || !credentials || recordName(credentials.id) !== name)
      throw new LockError('UNAVAILABLE', `the record at ${path} is not a session record lockstream wrote`);
    const claim = ownership.claim(name, record, node.version);
    const { store: taken, takeover } = this.#attachTo({ claim, ...credentials });
    try {
      await takeover.#keeper.whenConnected('takeover');
    } catch (error) {
      await taken.close(); // lets the session go: it was never claimed
      if (takeover.#keeper.overBeforeClaim) return undefined;
      throw error;
    }
    try {
      const nodes = await takeover.#ownedNodes(path);
      return { store: taken, nodes, expiresAfterMs: takeover.#keeper.timeoutMs };
    } catch (error) {
      // Claimed: leave the session alive for another try rather than end it with its nodes.
      await takeover.handOver();
      throw error;
    }
  }

  /**
   * The session's ephemeral nodes under lockstream's root, other than its record, each with its
   * data and stat: one listing (getEphemerals), then every read in one batch. A node deleted in
   * between is left out.
   */
  async #ownedNodes(recordPath: string): Promise<OwnedNode[]> {
    const { root } = this.#ownership;
    const prefix = root === '/' ? '/' : `${root}/`;
    const listed = await this.#ops.call('getEphemerals', (link) => link.getEphemerals!(prefix));
    if (listed.rc !== ErrorCode.ok || listed.value === null) throw unavailable('getEphemerals', listed.rc);
    const paths = listed.value.filter((path) => path !== recordPath);
    const nodes = await Promise.all(
      paths.map(async (path) => {
        const node = await this.#ops.getData(path, false);
        return node && { path, ...node };
      }),
    );
    return nodes
      .filter((node): node is OwnedNode => node !== null)
      .sort((a, b) => (a.creationId < b.creationId ? -1 : a.creationId > b.creationId ? 1 : 0));
  }

  /** As SessionTakeover.handOver. */
  async handOver(): Promise<void> {
    this.#keeper.handOver();
    this.#stopWatching();
    // As close(): one turn of the event loop for the connection to finish closing.
    await new Promise((resolve) => setImmediate(resolve));
  }
}
