import { EventEmitter } from 'node:events';
import { connect as tcpConnect, type Socket } from 'node:net';
import { JuteError, JuteReader, JuteWriter } from './jute.js';
import {
  CreateMode,
  ErrorCode,
  EventType,
  KeeperState,
  OpCode,
  Xid,
  readAcls,
  readConnectResponse,
  readMultiResults,
  readStat,
  readWatcherEvent,
  writeAcls,
  writeConnectRequest,
  writeMulti,
  type Acl,
  type MultiOp,
  type MultiResult,
  type Stat,
  type WatcherEvent,
} from './records.js';

/**
 * A ZooKeeper client session written against the wire protocol, in TypeScript: one TCP
 * connection at a time to one member of the ensemble, requests answered in order. It batches
 * both ways: the requests issued in one turn of the event loop go out in one write, and every
 * complete reply in a read is handled in one pass. Zxids, session ids and Stat times are
 * bigints, so fencing tokens are exact up to 2^63 − 1. Nodes can be created with their ACL,
 * answered with their Stat (create2), and several operations applied atomically (multi).
 *
 * Events: 'connected' (a server accepted the session), 'disconnected' (the connection was lost:
 * requests in flight fail with CONNECTIONLOSS, and the session is in doubt until 'connected'
 * or 'expired'), 'expired' (the session is gone: its ephemeral nodes too; the connection is
 * closed for good), 'authFailed'.
 */

export interface ZooKeeperConnectionOptions {
  /** Ensemble members as host:port, tried in order after a shuffle-free start at the first. */
  readonly servers: readonly string[];
  readonly sessionTimeoutMs: number;
  /** Credentials sent right after every connect (scheme `digest`: "user:password"). */
  readonly auth?: ReadonlyArray<{ readonly scheme: string; readonly credentials: string }>;
  /** Attach to this existing session instead of creating one (fault-injection tests close it). */
  readonly session?: { readonly id: bigint; readonly password: Uint8Array };
  /**
   * A path every path of this connection is relative to, as in a connect string's
   * `host:port/chroot`: sent prefixed, answered (created paths, watch events) without it.
   */
  readonly chroot?: string;
}

/** `host:port[,host:port...][/chroot]` as servers and chroot. */
export function parseConnectString(connectString: string): { servers: string[]; chroot?: string } {
  const slash = connectString.indexOf('/');
  const hosts = slash === -1 ? connectString : connectString.slice(0, slash);
  const chroot = slash === -1 ? '' : connectString.slice(slash).replace(/\/+$/, '');
  const servers = hosts.split(',').filter((server) => server.length > 0);
  return chroot === '' ? { servers } : { servers, chroot };
}

/** A ZooKeeper error code (`ErrorCode`), with the operation and path it answered. */
export class ZooKeeperError extends Error {
  override readonly name = 'ZooKeeperError';

  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

export type Watcher = (event: WatcherEvent) => void;

interface Pending {
  readonly xid: number;
  readonly what: string;
  readonly settle: (error: ZooKeeperError | undefined, reader: JuteReader | undefined, zxid: bigint) => void;
}

const PASSWORD_BYTES = 16;

export class ZooKeeperConnection extends EventEmitter {
  readonly #options: ZooKeeperConnectionOptions;
  #socket: Socket | undefined;
  #state: 'connecting' | 'connected' | 'closed' = 'connecting';
  #sessionId = 0n;
  #password: Uint8Array = Buffer.alloc(PASSWORD_BYTES);
  #negotiatedTimeoutMs = 0;
  #lastZxid = 0n;
  #nextXid = 1;
  #serverIndex = 0;
  /** Requests sent and not answered, in order: the server answers in order. */
  #pending: Pending[] = [];
  #pendingHead = 0;
  /** Packets waiting for this turn's write. */
  readonly #outgoing = new JuteWriter(64 * 1024);
  #flushScheduled = false;
  /** Bytes read and not yet a whole packet. */
  #inbound: Buffer | undefined;
  #pingTimer: NodeJS.Timeout | undefined;
  #lastSendAt = 0;
  #lastReceiveAt = 0;
  readonly #dataWatches = new Map<string, Set<Watcher>>();
  readonly #existWatches = new Map<string, Set<Watcher>>();
  readonly #childWatches = new Map<string, Set<Watcher>>();
  /** Dial attempts in a row that got no session; reset by each connect. */
  #failedAttempts = 0;
  #dialTimer: NodeJS.Timeout | undefined;
  /** Bounds a dial until the server answers the handshake (see #dial). */
  #handshakeTimer: NodeJS.Timeout | undefined;
  #onDialFailed: ((attempts: number) => void) | undefined;
  readonly #chroot: string;

  private constructor(options: ZooKeeperConnectionOptions) {
    super();
    if (options.servers.length === 0) throw new Error('ZooKeeper: no servers given');
    this.#options = options;
    this.#chroot = options.chroot ?? '';
    if (options.session) {
      this.#sessionId = options.session.id;
      this.#password = options.session.password;
    }
  }

  /**
   * Starts connecting and returns at once; keeps trying the members in turn (backing off to a
   * second between rounds) until one grants the session, for good: only a server can say that
   * the session expired, and a caller that wants a bound on the wait (the store does) keeps
   * its own clock. Listen for 'connected' before the next turn of the event loop.
   */
  static open(options: ZooKeeperConnectionOptions): ZooKeeperConnection {
    const connection = new ZooKeeperConnection(options);
    connection.#dialNext();
    return connection;
  }

  /** Connects and creates a session; rejects if no member accepts one in three rounds. */
  static async connect(options: ZooKeeperConnectionOptions): Promise<ZooKeeperConnection> {
    const connection = ZooKeeperConnection.open(options);
    await new Promise<void>((resolve, reject) => {
      const giveUp = (error: Error): void => {
        connection.off('connected', connected);
        connection.#onDialFailed = undefined;
        void connection.close();
        reject(error);
      };
      const connected = (): void => {
        connection.#onDialFailed = undefined;
        resolve();
      };
      connection.once('connected', connected);
      connection.#onDialFailed = (attempts) => {
        if (connection.#state === 'closed')
          giveUp(new ZooKeeperError(ErrorCode.sessionExpired, 'ZooKeeper session expired'));
        else if (attempts >= options.servers.length * 3)
          giveUp(new ZooKeeperError(ErrorCode.connectionLoss, 'ZooKeeper: no member accepted a session'));
      };
    });
    return connection;
  }

  get sessionId(): bigint {
    return this.#sessionId;
  }

  get sessionPassword(): Uint8Array {
    return this.#password;
  }

  get sessionTimeoutMs(): number {
    return this.#negotiatedTimeoutMs;
  }

  /** The latest zxid this session has seen. */
  get lastZxid(): bigint {
    return this.#lastZxid;
  }

  get connected(): boolean {
    return this.#state === 'connected';
  }

  /**
   * Creates a node with `acl` and answers with its path (with the sequence suffix) and Stat.
   * `mode`: CreateMode; containers and TTL nodes use their own operation, as the server asks.
   */
  create(
    path: string,
    data: Uint8Array,
    acl: readonly Acl[],
    mode: number,
    ttlMs?: bigint,
  ): Promise<{ path: string; stat: Stat }> {
    const withTtl = mode === CreateMode.persistentWithTtl || mode === CreateMode.persistentSequentialWithTtl;
    const op =
      mode === CreateMode.container ? OpCode.createContainer : withTtl ? OpCode.createTTL : OpCode.create2;
    return this.#request(
      op,
      `create ${path}`,
      (writer) => {
        writer.string(this.#serverPath(path)).buffer(data);
        writeAcls(writer, acl);
        writer.int(mode);
        if (withTtl) writer.long(ttlMs ?? 0n);
      },
      (reader) => ({ path: this.#clientPath(reader.string() ?? ''), stat: readStat(reader) }),
    );
  }

  delete(path: string, version = -1): Promise<void> {
    return this.#request(
      OpCode.delete,
      `delete ${path}`,
      (writer) => writer.string(this.#serverPath(path)).int(version),
      () => undefined,
    );
  }

  /** The node's Stat, or null if there is none; `watcher` fires on its creation, change or deletion. */
  async exists(path: string, watcher?: Watcher): Promise<Stat | null> {
    try {
      return await this.#request(
        OpCode.exists,
        `exists ${path}`,
        (writer) => writer.string(this.#serverPath(path)).bool(watcher !== undefined),
        readStat,
        false,
        // A watch set on a missing node waits for its creation.
        watcher && { path, watcher, found: this.#dataWatches, missing: this.#existWatches },
      );
    } catch (error) {
      if (!(error instanceof ZooKeeperError) || error.code !== ErrorCode.noNode) throw error;
      return null;
    }
  }

  /** The node's data and Stat; `watcher` fires on its change or deletion. NONODE if it is missing. */
  getData(path: string, watcher?: Watcher): Promise<{ data: Buffer; stat: Stat }> {
    return this.#request(
      OpCode.getData,
      `getData ${path}`,
      (writer) => writer.string(this.#serverPath(path)).bool(watcher !== undefined),
      (reader) => ({ data: reader.buffer() ?? Buffer.alloc(0), stat: readStat(reader) }),
      false,
      watcher && { path, watcher, found: this.#dataWatches },
    );
  }

  setData(path: string, data: Uint8Array, version = -1): Promise<Stat> {
    return this.#request(
      OpCode.setData,
      `setData ${path}`,
      (writer) => writer.string(this.#serverPath(path)).buffer(data).int(version),
      readStat,
    );
  }

  /** The node's children's names; `watcher` fires when they change or the node is deleted. */
  getChildren(path: string, watcher?: Watcher): Promise<string[]> {
    return this.#request(
      OpCode.getChildren,
      `getChildren ${path}`,
      (writer) => writer.string(this.#serverPath(path)).bool(watcher !== undefined),
      (reader) => reader.vector(() => reader.string() ?? '') ?? [],
      false,
      watcher && { path, watcher, found: this.#childWatches },
    );
  }

  setACL(path: string, acl: readonly Acl[], version = -1): Promise<Stat> {
    return this.#request(
      OpCode.setACL,
      `setACL ${path}`,
      (writer) => {
        writer.string(this.#serverPath(path));
        writeAcls(writer, acl);
        writer.int(version);
      },
      readStat,
    );
  }

  getACL(path: string): Promise<{ acl: Acl[]; stat: Stat }> {
    return this.#request(
      OpCode.getACL,
      `getACL ${path}`,
      (writer) => writer.string(this.#serverPath(path)),
      (reader) => ({ acl: readAcls(reader), stat: readStat(reader) }),
    );
  }

  /**
   * Applies `ops` atomically. Resolves with one result per op; if any op fails, none is
   * applied and it rejects with the first failure's code.
   */
  async multi(ops: readonly MultiOp[]): Promise<MultiResult[]> {
    const results = await this.#request(
      OpCode.multi,
      `multi of ${ops.length}`,
      (writer) =>
        writeMulti(
          writer,
          this.#chroot === '' ? ops : ops.map((op) => ({ ...op, path: this.#serverPath(op.path) })),
        ),
      (reader, zxid) =>
        readMultiResults(reader, zxid).map((result) =>
          result.op === 'create' ? { ...result, path: this.#clientPath(result.path) } : result,
        ),
      // A failed multi answers with the results, each op's error among them.
      true,
    );
    const failed = results.find(
      (result) =>
        result.op === 'error' && result.err !== ErrorCode.ok && result.err !== ErrorCode.runtimeInconsistency,
    );
    if (failed?.op === 'error') {
      const index = results.indexOf(failed);
      throw new ZooKeeperError(
        failed.err,
        `multi: op ${index} (${ops[index]?.op} ${ops[index]?.path}) failed: ${errorName(failed.err)}`,
      );
    }
    return results;
  }

  /** Ends the session (its ephemeral nodes go with it) and the connection. */
  async close(): Promise<void> {
    if (this.#state === 'closed') return;
    if (this.#state === 'connected') {
      await this.#request(
        OpCode.closeSession,
        'closeSession',
        () => {},
        () => undefined,
      ).catch(() => {});
    }
    this.#shutdown(new ZooKeeperError(ErrorCode.connectionLoss, 'ZooKeeper connection closed'));
  }

  // --- the connection ---

  /** Dials the next member; on failure, the one after, backing off (see open). */
  #dialNext(): void {
    this.#dialTimer = undefined;
    if (this.#state === 'closed') return;
    const server = this.#options.servers[this.#serverIndex % this.#options.servers.length]!;
    this.#serverIndex += 1;
    this.#dial(server);
  }

  /** A dial got no session (refused, dropped before the handshake): try the next member. */
  #dialFailed(): void {
    this.#failedAttempts += 1;
    this.#onDialFailed?.(this.#failedAttempts);
    if (this.#state === 'closed') return;
    const servers = this.#options.servers.length;
    // Every member once in quick succession, then a pause that grows to a second per round.
    const delayMs = this.#failedAttempts % servers === 0 ? Math.min(1000, 50 * this.#failedAttempts) : 0;
    this.#dialTimer = setTimeout(() => this.#dialNext(), delayMs);
    this.#dialTimer.unref();
  }

  #dial(server: string): void {
    const colon = server.lastIndexOf(':');
    const host = server.slice(0, colon);
    const port = Number(server.slice(colon + 1));
    const socket = tcpConnect({ host, port, noDelay: true });
    this.#socket = socket;
    this.#inbound = undefined;
    // A frozen member's kernel still accepts the connection, and a cut-off one never answers
    // the SYN: without a bound the dial would wait for it forever. As ZooKeeper's own clients
    // do, each member gets its share of the session timeout, so the whole ensemble is tried
    // while the session can still be saved.
    const timeoutMs =
      this.#negotiatedTimeoutMs > 0 ? this.#negotiatedTimeoutMs : this.#options.sessionTimeoutMs;
    clearTimeout(this.#handshakeTimer);
    this.#handshakeTimer = setTimeout(() => {
      if (socket === this.#socket && this.#state === 'connecting') socket.destroy();
    }, timeoutMs / this.#options.servers.length);
    this.#handshakeTimer.unref();
    socket.on('connect', () => {
      const writer = new JuteWriter(64);
      const at = writer.startPacket();
      writeConnectRequest(writer, {
        lastZxidSeen: this.#lastZxid,
        timeoutMs: this.#options.sessionTimeoutMs,
        sessionId: this.#sessionId,
        password: this.#password,
      });
      writer.endPacket(at);
      socket.write(Buffer.from(writer.bytes()));
    });
    socket.on('data', (chunk: Buffer) => this.#onData(socket, chunk));
    socket.on('error', () => {});
    socket.on('close', () => this.#onSocketClosed(socket));
  }

  #onData(socket: Socket, chunk: Buffer): void {
    if (socket !== this.#socket) return;
    this.#lastReceiveAt = performance.now();
    let buffer = this.#inbound ? Buffer.concat([this.#inbound, chunk]) : chunk;
    let offset = 0;
    try {
      // Every whole packet in this read, in one pass.
      while (buffer.length - offset >= 4) {
        const size = buffer.readInt32BE(offset);
        if (size < 0) throw new JuteError(`negative packet length ${size}`);
        if (buffer.length - offset - 4 < size) break;
        const reader = new JuteReader(buffer, offset + 4, offset + 4 + size);
        offset += 4 + size;
        if (this.#state === 'connecting') this.#onConnectResponse(reader);
        else this.#onReply(reader);
      }
    } catch (error) {
      // A reply we cannot read leaves the stream out of step: drop the connection.
      socket.destroy(error instanceof Error ? error : undefined);
      return;
    }
    if (offset === buffer.length) this.#inbound = undefined;
    else {
      buffer = buffer.subarray(offset);
      // Keep only the partial packet, not the whole read it came in.
      this.#inbound = Buffer.from(buffer);
    }
  }

  #onConnectResponse(reader: JuteReader): void {
    clearTimeout(this.#handshakeTimer);
    const response = readConnectResponse(reader);
    if (response.timeoutMs <= 0) {
      this.#expire();
      this.#onDialFailed?.(this.#failedAttempts + 1);
      return;
    }
    this.#failedAttempts = 0;
    const resumed = this.#sessionId !== 0n;
    this.#sessionId = response.sessionId;
    this.#password = response.password;
    this.#negotiatedTimeoutMs = response.timeoutMs;
    this.#state = 'connected';
    for (const { scheme, credentials } of this.#options.auth ?? []) {
      this.#sendPacket(Xid.auth, OpCode.auth, (writer) =>
        writer.int(0).string(scheme).buffer(Buffer.from(credentials, 'utf8')),
      );
    }
    if (resumed) this.#restoreWatches();
    this.#startPinging();
    this.emit('connected');
  }

  #onReply(reader: JuteReader): void {
    const xid = reader.int();
    const zxid = reader.long();
    const err = reader.int();
    if (zxid > this.#lastZxid) this.#lastZxid = zxid;
    switch (xid) {
      case Xid.notification:
        this.#onWatcherEvent(readWatcherEvent(reader));
        return;
      case Xid.ping:
      case Xid.setWatches:
        return;
      case Xid.auth:
        if (err !== ErrorCode.ok)
          this.emit('authFailed', new ZooKeeperError(err, 'ZooKeeper refused the credentials'));
        return;
    }
    const pending = this.#pending[this.#pendingHead];
    if (!pending || pending.xid !== xid) {
      throw new JuteError(`reply for xid ${xid}, expected ${pending?.xid ?? 'none'}`);
    }
    this.#pending[this.#pendingHead] = undefined as unknown as Pending;
    this.#pendingHead += 1;
    if (this.#pendingHead > 1024 && this.#pendingHead * 2 > this.#pending.length) {
      this.#pending = this.#pending.slice(this.#pendingHead);
      this.#pendingHead = 0;
    }
    if (err !== ErrorCode.ok)
      pending.settle(new ZooKeeperError(err, `${pending.what}: ${errorName(err)}`), reader, zxid);
    else pending.settle(undefined, reader, zxid);
  }

  /** Fires the watches an event uses up; a watcher set on several of them hears it once. */
  #onWatcherEvent(received: WatcherEvent): void {
    const path = this.#clientPath(received.path);
    const event = path === received.path ? received : { ...received, path };
    let first: Set<Watcher> | undefined;
    let told: Set<Watcher> | undefined;
    const take = (watches: Map<string, Set<Watcher>>): void => {
      const watchers = watches.get(path);
      if (!watchers) return;
      watches.delete(path);
      if (!first) first = watchers;
      else {
        told ??= new Set(first);
        for (const watcher of watchers) told.add(watcher);
      }
    };
    switch (event.type) {
      case EventType.nodeCreated:
        take(this.#existWatches);
        take(this.#dataWatches);
        break;
      case EventType.nodeDeleted:
        take(this.#dataWatches);
        take(this.#existWatches);
        take(this.#childWatches);
        break;
      case EventType.nodeDataChanged:
        take(this.#dataWatches);
        take(this.#existWatches);
        break;
      case EventType.nodeChildrenChanged:
        take(this.#childWatches);
        break;
    }
    for (const watcher of told ?? first ?? []) watcher(event);
  }

  /** A path as the server knows it: under the chroot. */
  #serverPath(path: string): string {
    if (this.#chroot === '') return path;
    return path === '/' ? this.#chroot : this.#chroot + path;
  }

  /** A path the server sent, as the caller knows it: without the chroot. */
  #clientPath(path: string): string {
    if (this.#chroot === '' || !path.startsWith(this.#chroot)) return path;
    return path.length === this.#chroot.length ? '/' : path.slice(this.#chroot.length);
  }

  /** After a reconnect: the server forgot our watches; tell it which, and from which zxid. */
  #restoreWatches(): void {
    const paths = (watches: Map<string, Set<Watcher>>): string[] => [...watches.keys()];
    const data = paths(this.#dataWatches);
    const exist = paths(this.#existWatches);
    const child = paths(this.#childWatches);
    if (data.length + exist.length + child.length === 0) return;
    this.#sendPacket(Xid.setWatches, OpCode.setWatches, (writer) => {
      writer.long(this.#lastZxid);
      writer.vector(data, (path) => writer.string(this.#serverPath(path)));
      writer.vector(exist, (path) => writer.string(this.#serverPath(path)));
      writer.vector(child, (path) => writer.string(this.#serverPath(path)));
    });
  }

  #onSocketClosed(socket: Socket): void {
    if (socket !== this.#socket) return;
    this.#socket = undefined;
    clearInterval(this.#pingTimer);
    if (this.#state === 'closed') return;
    const wasConnected = this.#state === 'connected';
    this.#state = 'connecting';
    this.#failPending(new ZooKeeperError(ErrorCode.connectionLoss, 'ZooKeeper connection lost'));
    if (!wasConnected) {
      this.#dialFailed();
      return;
    }
    this.emit('disconnected');
    // Try the members in turn with the same session until one takes it or says it expired.
    this.#dialNext();
  }

  #expire(): void {
    if (this.#state === 'closed') return;
    this.#shutdown(new ZooKeeperError(ErrorCode.sessionExpired, 'ZooKeeper session expired'));
    this.emit('expired');
  }

  #shutdown(reason: ZooKeeperError): void {
    this.#state = 'closed';
    clearInterval(this.#pingTimer);
    clearTimeout(this.#dialTimer);
    clearTimeout(this.#handshakeTimer);
    this.#failPending(reason);
    const event: WatcherEvent = { type: EventType.none, state: KeeperState.expired, path: '' };
    for (const watches of [this.#dataWatches, this.#existWatches, this.#childWatches]) {
      const all = [...watches.values()];
      watches.clear();
      if (reason.code === ErrorCode.sessionExpired)
        for (const set of all) for (const watcher of set) watcher(event);
    }
    this.#socket?.destroy();
    this.#socket = undefined;
  }

  #failPending(reason: ZooKeeperError): void {
    const pending = this.#pending.slice(this.#pendingHead);
    this.#pending = [];
    this.#pendingHead = 0;
    this.#outgoing.reset();
    for (const request of pending)
      request.settle(new ZooKeeperError(reason.code, `${request.what}: ${reason.message}`), undefined, 0n);
  }

  /**
   * Pings when nothing was sent for a third of the session timeout, and drops a connection that
   * has said nothing for two thirds of it (a frozen or cut-off member), so that another member
   * is tried while the session can still be saved: as ZooKeeper's own clients do.
   */
  #startPinging(): void {
    clearInterval(this.#pingTimer);
    const intervalMs = Math.max(1, Math.floor(this.#negotiatedTimeoutMs / 3));
    const socket = this.#socket;
    this.#lastSendAt = performance.now();
    this.#lastReceiveAt = performance.now();
    this.#pingTimer = setInterval(() => {
      const now = performance.now();
      if (now - this.#lastReceiveAt >= intervalMs * 2) {
        socket?.destroy();
        return;
      }
      if (now - this.#lastSendAt >= intervalMs * 0.9) this.#sendPacket(Xid.ping, OpCode.ping, () => {});
    }, intervalMs / 4);
    this.#pingTimer.unref();
  }

  // --- requests ---

  #request<T>(
    op: number,
    what: string,
    write: (writer: JuteWriter) => void,
    read: (reader: JuteReader, zxid: bigint) => T,
    readOnError = false,
    watch?: WatchRegistration,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.#state !== 'connected') {
        const code = this.#state === 'closed' ? ErrorCode.sessionExpired : ErrorCode.connectionLoss;
        reject(
          new ZooKeeperError(
            code,
            `${what}: ZooKeeper is ${this.#state === 'closed' ? 'closed' : 'not connected'}`,
          ),
        );
        return;
      }
      const xid = this.#nextXid;
      this.#nextXid = this.#nextXid >= 0x7fffffff ? 1 : this.#nextXid + 1;
      this.#pending.push({
        xid,
        what,
        settle: (error, reader, zxid) => {
          // Registered as the reply is read, not after the promise settles: a notification
          // read in the same pass (right behind the reply) must find its watcher.
          if (watch) {
            const watches =
              error === undefined ? watch.found : error.code === ErrorCode.noNode ? watch.missing : undefined;
            if (watches) addWatch(watches, watch.path, watch.watcher);
          }
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
            resolve(read(reader!, zxid));
          } catch (readError) {
            reject(readError instanceof Error ? readError : new Error(String(readError)));
          }
        },
      });
      this.#sendPacket(xid, op, write);
    });
  }

  /** Adds a packet to this turn's batch; the batch goes out in one write. */
  #sendPacket(xid: number, op: number, write: (writer: JuteWriter) => void): void {
    const writer = this.#outgoing;
    const at = writer.startPacket();
    writer.int(xid).int(op);
    write(writer);
    writer.endPacket(at);
    if (this.#flushScheduled) return;
    this.#flushScheduled = true;
    setImmediate(() => this.#flush());
  }

  #flush(): void {
    this.#flushScheduled = false;
    const socket = this.#socket;
    if (!socket || this.#outgoing.length === 0) return;
    socket.write(Buffer.from(this.#outgoing.bytes()));
    this.#outgoing.reset();
    this.#lastSendAt = performance.now();
  }
}

/** Where a request's watcher goes once its reply arrives: the node found, or missing. */
interface WatchRegistration {
  readonly path: string;
  readonly watcher: Watcher;
  readonly found: Map<string, Set<Watcher>>;
  readonly missing?: Map<string, Set<Watcher>>;
}

function addWatch(watches: Map<string, Set<Watcher>>, path: string, watcher: Watcher): void {
  let set = watches.get(path);
  if (!set) {
    set = new Set();
    watches.set(path, set);
  }
  set.add(watcher);
}

const ERROR_NAMES = new Map<number, string>(Object.entries(ErrorCode).map(([name, code]) => [code, name]));

export function errorName(code: number): string {
  return `${ERROR_NAMES.get(code) ?? 'error'} (${code})`;
}
