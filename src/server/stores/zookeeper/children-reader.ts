/* Lists the children of many lock parents at once (BulkListing on ZooKeeper): multiRead where the
 * server has it, else single getChildren, many in flight. */
import type { Logger } from 'pino';
import type { StoreStats } from '../store.js';
import type { LinkOperations } from './link-operations.js';
import { ErrorCode } from './protocol/records.js';
import type { SessionKeeper } from './session-keeper.js';
import { MAX_ATTEMPTS, isConnectionLoss, unavailable } from './zookeeper-failures.js';

/**
 * Paths per multiRead, and bytes of paths per multiRead: a request stays far below
 * ZooKeeper's 1 MB limit (jute.maxbuffer) even with the longest lock names.
 */
const MULTI_READ_PATHS = 1000;
const MULTI_READ_BYTES = 256 * 1024;
/**
 * multiReads in flight at once. ZooKeeper answers a session's requests in order, so the lock
 * requests this instance sends meanwhile wait behind them: a millisecond or two each.
 */
const MULTI_READS_IN_FLIGHT = 2;
/** Single getChildren in flight at once where there is no multiRead (the addon, ZooKeeper 3.5). */
const READS_IN_FLIGHT = 500;

/**
 * Lists the children of many nodes at once (ListLocks reads every lock parent): a thousand
 * getChildren in one multiRead (ZooKeeper 3.6+), about twenty times faster than as many single
 * requests, even pipelined. Without multiRead (the addon client, or a server before 3.6), single
 * getChildren, a few hundred in flight.
 */
export class ChildrenReader {
  readonly #keeper: SessionKeeper;
  readonly #ops: LinkOperations;
  readonly #stats: StoreStats;
  readonly #logger: Logger;
  /** False once the server has said it has no multiRead. */
  #serverMultiReads = true;

  constructor(options: { keeper: SessionKeeper; ops: LinkOperations; stats: StoreStats; logger: Logger }) {
    this.#keeper = options.keeper;
    this.#ops = options.ops;
    this.#stats = options.stats;
    this.#logger = options.logger;
  }

  /**
   * Sends an empty multiRead, at connect: a server without multiRead drops the connection on
   * it (as on any operation it does not know), and had better do so now, before any lock is
   * held, than in the middle of the first ListLocks.
   */
  async probe(): Promise<void> {
    await this.#multiRead([]);
  }

  /** As CoordinationStore.childrenOfEach. */
  async childrenOfEach(dirs: readonly string[]): Promise<string[][]> {
    const listed = await inWindow(inChunks(dirs), MULTI_READS_IN_FLIGHT, async (chunk) => {
      const children = await this.#multiRead(chunk);
      return children ?? inWindow(chunk, READS_IN_FLIGHT, (dir) => this.#ops.children(dir));
    });
    return listed.flat();
  }

  /**
   * The children of each of `dirs` in one multiRead; undefined where there is none. Sent again
   * after a connection loss, unless the server has said meanwhile that it has no multiRead:
   * each one it is sent costs a connection.
   */
  async #multiRead(dirs: readonly string[]): Promise<string[][] | undefined> {
    for (let attempt = 1; ; attempt += 1) {
      if (!this.#serverMultiReads || !this.#keeper.link.multiGetChildren) return undefined;
      await this.#keeper.whenConnected('multiRead');
      if (!this.#serverMultiReads) return undefined;
      const reply = await this.#keeper.send('multiRead', (link) => link.multiGetChildren!(dirs));
      if (isConnectionLoss(reply.rc) && attempt < MAX_ATTEMPTS) continue;
      if (reply.rc === ErrorCode.unimplemented) {
        this.#noMultiRead();
        return undefined;
      }
      if (reply.rc !== ErrorCode.ok || reply.value === null) throw unavailable('multiRead', reply.rc);
      this.#stats.childrenListings += dirs.length;
      return reply.value.map((each) => {
        if (each.rc === ErrorCode.noNode) return [];
        if (each.rc !== ErrorCode.ok || each.value === null) throw unavailable('getChildren', each.rc);
        return each.value;
      });
    }
  }

  #noMultiRead(): void {
    if (!this.#serverMultiReads) return;
    this.#serverMultiReads = false;
    this.#logger.info('ZooKeeper has no multiRead (before 3.6): lock parents are listed one by one');
  }
}

/** `dirs` cut into multiReads of at most MULTI_READ_PATHS paths and MULTI_READ_BYTES. */
function inChunks(dirs: readonly string[]): string[][] {
  const chunks: string[][] = [];
  let chunk: string[] = [];
  let bytes = 0;
  for (const dir of dirs) {
    // Each read is its path and 13 bytes: its header, the path's length and the watch flag.
    const size = Buffer.byteLength(dir) + 13;
    if (chunk.length === MULTI_READ_PATHS || (chunk.length > 0 && bytes + size > MULTI_READ_BYTES)) {
      chunks.push(chunk);
      chunk = [];
      bytes = 0;
    }
    chunk.push(dir);
    bytes += size;
  }
  if (chunk.length > 0) chunks.push(chunk);
  return chunks;
}

/**
 * `task` for each item, at most `width` at once, a new one started as soon as one ends; the
 * results in the items' order. After a failure no new task starts.
 */
async function inWindow<T, R>(
  items: readonly T[],
  width: number,
  task: (item: T) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  let failed = false;
  const worker = async (): Promise<void> => {
    while (next < items.length && !failed) {
      const index = next;
      next += 1;
      try {
        results[index] = await task(items[index]!);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));
  return results;
}
