/* Numbers a connection's requests, batches them into one write per turn, and matches the replies. */
import type { Socket } from 'node:net';
import { JuteError, JuteWriter, type JuteReader } from './jute.js';
import { ErrorCode } from './records.js';
import type { WatchRegistry, WatchRequest } from './watch-registry.js';
import { ZooKeeperError, errorName } from './zookeeper-error.js';

/** One request: how to write its body and read its reply (see requests.ts). */
export interface RequestSpec<T> {
  readonly op: number;
  /** The operation and path, for error messages. */
  readonly what: string;
  write(writer: JuteWriter): void;
  read(reader: JuteReader, zxid: bigint): T;
  /** A failed reply still carries a body to read (multi answers with each op's error). */
  readonly readOnError?: boolean;
  readonly watch?: WatchRequest | undefined;
}

interface Pending {
  readonly xid: number;
  readonly what: string;
  readonly settle: (error: ZooKeeperError | undefined, reader: JuteReader | undefined, zxid: bigint) => void;
}

/**
 * The requests of one connection: numbered (xid), batched into one write per turn of the event
 * loop, and answered in the order they were sent (the server answers a session in order).
 */
export class RequestPipeline {
  readonly #socket: () => Socket | undefined;
  readonly #watches: WatchRegistry;
  #nextXid = 1;
  /** Requests sent and not answered, in order. */
  #pending: Pending[] = [];
  #pendingHead = 0;
  /** Packets waiting for this turn's write. */
  readonly #outgoing = new JuteWriter(64 * 1024);
  #flushScheduled = false;
  #lastSendAt = 0;

  /** `socket`: where this turn's batch goes (none: dropped, the requests fail with the connection). */
  constructor(socket: () => Socket | undefined, watches: WatchRegistry) {
    this.#socket = socket;
    this.#watches = watches;
  }

  /** performance.now() of the last write. */
  get lastSendAt(): number {
    return this.#lastSendAt;
  }

  /** Sends `spec` in this turn's batch; settles with its reply, or its failure. */
  send<T>(spec: RequestSpec<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (spec.watch && this.#watches.persistent.modeOf(spec.watch.path) !== undefined) {
        // ZooKeeper 3.6 to 3.8 keep one watch mode per path and session (WatcherModeManager):
        // a one-shot watch would turn the persistent one into a one-shot one (ZOOKEEPER-4466).
        reject(
          new Error(
            `${spec.what}: this session watches ${spec.watch.path} persistently; ` +
              'a one-shot watch on the same path would end that watch on ZooKeeper 3.6 to 3.8',
          ),
        );
        return;
      }
      const xid = this.#nextXid;
      this.#nextXid = this.#nextXid >= 0x7fffffff ? 1 : this.#nextXid + 1;
      const { watch, readOnError = false } = spec;
      this.#pending.push({
        xid,
        what: spec.what,
        settle: (error, reader, zxid) => {
          // Registered as the reply is read, not after the promise settles: a notification
          // read in the same pass (right behind the reply) must find its watcher.
          if (watch && (error === undefined || error.code === ErrorCode.noNode))
            this.#watches.register(watch, error === undefined);
          if (
            error &&
            !(
              readOnError &&
              reader &&
              error.code !== ErrorCode.connectionLoss &&
              error.code !== ErrorCode.sessionExpired
            )
          ) {
            reject(error);
            return;
          }
          try {
            resolve(spec.read(reader!, zxid));
          } catch (readError) {
            reject(readError instanceof Error ? readError : new Error(String(readError)));
          }
        },
      });
      this.sendPacket(xid, spec.op, (writer) => spec.write(writer));
    });
  }

  /** Adds a packet to this turn's batch; the batch goes out in one write. */
  sendPacket(xid: number, op: number, write: (writer: JuteWriter) => void): void {
    const writer = this.#outgoing;
    const at = writer.startPacket();
    writer.int(xid).int(op);
    write(writer);
    writer.endPacket(at);
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    setImmediate(() => this.#flush());
  }

  /**
   * Settles the oldest request with its reply. A reply for another xid means the stream is out
   * of step: throws, and the connection must be dropped. But for one case: a server older than
   * an operation answers it UNIMPLEMENTED at once, possibly ahead of the replies to requests
   * sent before it (3.5's ZooKeeperServer.submitRequest hands an unknown op straight to
   * UnimplementedRequestProcessor, beside the pipeline of the others), and then closes the
   * connection; that request is settled with its answer, and the others fail with the connection.
   */
  answer(xid: number, err: number, zxid: bigint, reader: JuteReader): void {
    const head = this.#pending[this.#pendingHead];
    if (head?.xid !== xid && err === ErrorCode.unimplemented) {
      const index = this.#pending.findIndex((request, at) => at > this.#pendingHead && request.xid === xid);
      if (index !== -1) {
        const [request] = this.#pending.splice(index, 1);
        request!.settle(new ZooKeeperError(err, `${request!.what}: ${errorName(err)}`), reader, zxid);
        return;
      }
    }
    if (head?.xid !== xid) throw new JuteError(`reply for xid ${xid}, expected ${head?.xid ?? 'none'}`);
    this.#pending[this.#pendingHead] = undefined as unknown as Pending;
    this.#pendingHead += 1;
    if (this.#pendingHead > 1024 && this.#pendingHead * 2 > this.#pending.length) {
      this.#pending = this.#pending.slice(this.#pendingHead);
      this.#pendingHead = 0;
    }
    if (err !== ErrorCode.ok)
      head.settle(new ZooKeeperError(err, `${head.what}: ${errorName(err)}`), reader, zxid);
    else head.settle(undefined, reader, zxid);
  }

  /** Fails every request not answered yet with `reason`'s code, and drops the unsent batch. */
  failAll(reason: ZooKeeperError): void {
    const pending = this.#pending.slice(this.#pendingHead);
    this.#pending = [];
    this.#pendingHead = 0;
    this.#outgoing.reset();
    for (const request of pending)
      request.settle(new ZooKeeperError(reason.code, `${request.what}: ${reason.message}`), undefined, 0n);
  }

  #flush(): void {
    this.#flushScheduled = false;
    const socket = this.#socket();
    if (!socket || this.#outgoing.length === 0) return;
    socket.write(Buffer.from(this.#outgoing.bytes()));
    this.#outgoing.reset();
    this.#lastSendAt = performance.now();
  }
}
