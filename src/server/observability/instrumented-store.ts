import type { LockError } from '../lock-error.js';
import type {
  CoordinationStore,
  CreatedNode,
  NodeData,
  NodeFollow,
  ReplacedNode,
  SetDataOutcome,
  StoreSession,
  StoreStats,
  SequentialEntry,
} from '../stores/store.js';
import type { Metrics } from './metrics.js';

/** A store whose operations are timed into `lockstream_store_operation_seconds`; otherwise the store itself. */
export class InstrumentedStore implements CoordinationStore {
  readonly #store: CoordinationStore;
  readonly #metrics: Metrics;

  constructor(store: CoordinationStore, metrics: Metrics) {
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

  createSequential(dir: string, prefix: string, data: Uint8Array, follow?: NodeFollow): Promise<CreatedNode> {
    return this.#timed('create', () => this.#store.createSequential(dir, prefix, data, follow));
  }

  createSequentialAll(entries: readonly SequentialEntry[]): Promise<CreatedNode[]> {
    return this.#timed('multi', () => this.#store.createSequentialAll(entries));
  }

  deleteAll(paths: readonly string[]): Promise<void> {
    return this.#timed('multi', () => this.#store.deleteAll(paths));
  }

  children(dir: string): Promise<string[]> {
    return this.#timed('getChildren', () => this.#store.children(dir));
  }

  /** Timed only when the store must ask (its watch answers it mostly, without a request). */
  childrenAsTold(dir: string): Promise<string[]> {
    return this.#store.childrenAsTold(dir, (asked) => this.children(asked));
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

  delete(path: string): Promise<void> {
    return this.#timed('delete', () => this.#store.delete(path));
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
