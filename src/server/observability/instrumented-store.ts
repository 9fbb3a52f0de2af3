/*
 * A coordination store whose operations are timed into the metrics, and otherwise passed through
 * unchanged.
 */
import type { LockError } from '../lock-error.js';
import type {
  CreatedNode,
  ListingOptions,
  NodeData,
  NodeFollow,
  RecordOp,
  ReplacedNode,
  TransactOutcome,
  SetDataOutcome,
  SessionTakeover,
  StoreBackend,
  StoreSession,
  StoreStats,
  SequentialEntry,
} from '../stores/store.js';
import type { Metrics } from './metrics.js';

/** A store whose operations are timed into `lockstream_store_operation_seconds`; otherwise the store itself. */
export class InstrumentedStore implements StoreBackend {
  readonly #store: StoreBackend;
  readonly #metrics: Metrics;
  /** A waiter's listing, asked through this store where the store must ask, so that it is timed. */
  readonly #askedTimed: ListingOptions = { asTold: true, ask: (asked) => this.children(asked) };

  constructor(store: StoreBackend, metrics: Metrics) {
    this.#store = store;
    this.#metrics = metrics;
  }

  get kind(): string {
    return this.#store.kind;
  }

  get session(): StoreSession {
    return this.#store.session;
  }

  get stats(): Readonly<StoreStats> {
    return this.#store.stats;
  }

  get takeover(): SessionTakeover | undefined {
    return this.#store.takeover;
  }

  /** One entry is a create; several, one multi. */
  create(entries: readonly SequentialEntry[]): Promise<CreatedNode[]> {
    return this.#timed(entries.length === 1 ? 'create' : 'multi', () => this.#store.create(entries));
  }

  /** With `asTold`, timed only when the store must ask (its watch answers it mostly, without a request). */
  children(dir: string, options?: ListingOptions): Promise<string[]> {
    if (options?.asTold) return this.#store.children(dir, this.#askedTimed);
    return this.#timed('getChildren', () => this.#store.children(dir));
  }

  childrenOfEach(dirs: readonly string[]): Promise<string[][]> {
    return this.#timed('multiRead', () => this.#store.childrenOfEach(dirs));
  }

  creationId(path: string): Promise<bigint | null> {
    return this.#timed('exists', () => this.#store.creationId(path));
  }

  nodeData(path: string): Promise<NodeData | null> {
    return this.#timed('getData', () => this.#store.nodeData(path));
  }

  setData(path: string, data: Uint8Array, version?: number): Promise<SetDataOutcome> {
    return this.#timed('setData', () => this.#store.setData(path, data, version));
  }

  get transactions(): boolean {
    return this.#store.transactions;
  }

  transact(ops: readonly RecordOp[]): Promise<TransactOutcome> {
    return this.#timed('multi', () => this.#store.transact(ops));
  }

  makeDirs(dir: string): Promise<void> {
    return this.#store.makeDirs(dir);
  }

  /** One path is a delete; several, one multi. */
  delete(paths: string | readonly string[]): Promise<void> {
    return this.#timed(typeof paths === 'string' ? 'delete' : 'multi', () => this.#store.delete(paths));
  }

  replaceNode(
    path: string,
    name: string,
    data: Uint8Array,
    version: number,
    session: StoreSession,
    follow: NodeFollow,
  ): Promise<ReplacedNode | 'missing' | 'conflict'> {
    return this.#timed('multi', () => this.#store.replaceNode(path, name, data, version, session, follow));
  }

  onceDeleted(path: string, onDeleted: (error?: LockError) => void): () => void {
    return this.#store.onceDeleted(path, onDeleted);
  }

  watchNode(path: string, follow: NodeFollow): Promise<NodeData | null> {
    return this.#timed('getData', () => this.#store.watchNode(path, follow));
  }

  watchChildren(dir: string, onChange: () => void): () => void {
    return this.#store.watchChildren(dir, onChange);
  }

  close(): Promise<void> {
    return this.#store.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.#store.close();
  }

  async #timed<T>(operation: string, work: () => Promise<T>): Promise<T> {
    const start = performance.now();
    let ok = false;
    try {
      const result = await work();
      ok = true;
      return result;
    } finally {
      this.#metrics.storeOperation(operation, (performance.now() - start) / 1000, ok);
    }
  }
}
