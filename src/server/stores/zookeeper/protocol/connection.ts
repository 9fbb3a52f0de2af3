/* A protocol client session's connection to the ensemble: dialing, the handshake, reconnection,
 * and restoring watches on each new connection. */
import { connect as tcpConnect, type Socket } from 'node:net';
import { Chroot } from './chroot.js';
import { ConnectionLiveness } from './connection-liveness.js';
import type { ZooKeeperConnectionOptions } from './connection-options.js';
import { DialSchedule } from './dial-schedule.js';
import { JuteWriter, type JuteReader } from './jute.js';
import { PacketFramer } from './packet-framer.js';
import {
  ErrorCode,
  OpCode,
  Xid,
  readConnectResponse,
  readWatcherEvent,
  writeConnectRequest,
  type WatcherEvent,
} from './records.js';
import { RequestPipeline, type RequestSpec } from './request-pipeline.js';
import { closeSessionRequest } from './requests.js';
import { ZooKeeperOperations } from './operations.js';
import { WatchRegistry } from './watch-registry.js';
import { ZooKeeperError } from './zookeeper-error.js';

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
 *
 * Watches: one-shot ones (exists, getData, getChildren) and, on ZooKeeper 3.6+, persistent ones
 * (addWatch), all set again on each new connection of the session.
 *
 * This file holds the connection itself (dialing, handshake, reconnection, restoring watches);
 * dial-schedule.ts says which member it dials next and when, connection-liveness.ts notices a
 * member gone silent (the dial's bound, pings), operations.ts has the operations it offers,
 * requests.ts writes the requests, request-pipeline.ts numbers and batches them and matches the
 * replies, watch-registry.ts and persistent-watches.ts keep the watches.
 */

const PASSWORD_BYTES = 16;

export class ZooKeeperConnection extends ZooKeeperOperations {
  readonly #options: ZooKeeperConnectionOptions;
  #socket: Socket | undefined;
  #state: 'connecting' | 'connected' | 'closed' = 'connecting';
  #sessionId = 0n;
  #password: Uint8Array = Buffer.alloc(PASSWORD_BYTES);
  #negotiatedTimeoutMs = 0;
  #lastZxid = 0n;
  readonly #schedule: DialSchedule;
  readonly #watches = new WatchRegistry();
  readonly #requests = new RequestPipeline(() => this.#socket, this.#watches);
  /** Packets of the current socket. */
  #framer = new PacketFramer();
  /** Notices a member gone silent: bounds each dial, then pings. */
  readonly #liveness: ConnectionLiveness;
  /** When the current connection's handshake was sent (performance.now()). */
  #handshakeSentAt = 0;
  #dialTimer: NodeJS.Timeout | undefined;
  #onDialFailed: ((attempts: number) => void) | undefined;
  readonly #chroot: Chroot;

  protected get chroot(): Chroot {
    return this.#chroot;
  }

  protected get watches(): WatchRegistry {
    return this.#watches;
  }

  private constructor(options: ZooKeeperConnectionOptions) {
    super();
    if (options.servers.length === 0) throw new Error('ZooKeeper: no servers given');
    this.#options = options;
    this.#chroot = new Chroot(options.chroot ?? '');
    this.#schedule = new DialSchedule(options.servers);
    this.#liveness = new ConnectionLiveness(this.#requests, options.servers.length);
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

  /**
   * Connects and creates a session; rejects if no member accepts one in three rounds and a
   * session timeout (a dial is bounded to a twelfth of it, and an ensemble that lost its leader
   * accepts no session until it has elected another).
   */
  static async connect(options: ZooKeeperConnectionOptions): Promise<ZooKeeperConnection> {
    const startedAt = performance.now();
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
        else if (
          attempts >= options.servers.length * 3 &&
          performance.now() - startedAt >= options.sessionTimeoutMs
        )
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
   * When the handshake of the current connection was sent (performance.now()). A member that
   * took back an existing session had the leader revalidate it first, so its answer shows the
   * leader was reachable after this time.
   */
  get handshakeSentAt(): number {
    return this.#handshakeSentAt;
  }

  /**
   * Ends the session (its ephemeral nodes go with it) and the connection. From the call on,
   * nothing keeps the session alive: no more pings, and a closeSession that gets no answer
   * within a third of the session timeout is not waited for (the session then expires).
   */
  async close(): Promise<void> {
    if (this.#state === 'closed') return;
    if (this.#state === 'connected') {
      this.#liveness.stopPinging();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        this.send(closeSessionRequest).catch(() => {}),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, this.#negotiatedTimeoutMs / 3);
          timer.unref();
        }),
      ]);
      clearTimeout(timer);
    }
    this.#shutdown(new ZooKeeperError(ErrorCode.connectionLoss, 'ZooKeeper connection closed'));
  }

  /**
   * Lets the session go without ending it: the connection closes at once, with no closeSession,
   * and nothing pings or reconnects any more. The session lives on for its timeout, for another
   * client that has its id and password to attach to (its ephemeral nodes with it).
   */
  drop(): void {
    if (this.#state === 'closed') return;
    this.#shutdown(new ZooKeeperError(ErrorCode.connectionLoss, 'ZooKeeper connection dropped'));
  }

  /**
   * Leaves the member the session is on, or being dialed, for the next one, keeping the session:
   * for a member that still answers pings but no longer reaches its leader, or a dial that is
   * going nowhere. Requests in flight fail with CONNECTIONLOSS, as on any lost connection.
   */
  moveOn(): void {
    if (this.#state === 'closed') return;
    this.#socket?.destroy();
  }

  protected send<T>(spec: RequestSpec<T>): Promise<T> {
    if (this.#state !== 'connected') {
      const closed = this.#state === 'closed';
      return Promise.reject(
        new ZooKeeperError(
          closed ? ErrorCode.sessionExpired : ErrorCode.connectionLoss,
          `${spec.what}: ZooKeeper is ${closed ? 'closed' : 'not connected'}`,
        ),
      );
    }
    return this.#requests.send(spec);
  }

  // --- the connection ---

  /** Dials the next member; on failure, the one after, backing off (see open). */
  #dialNext(): void {
    this.#dialTimer = undefined;
    if (this.#state === 'closed') return;
    this.#dial(this.#schedule.next());
  }

  /** A dial got no session (refused, dropped before the handshake): try the next member. */
  #dialFailed(): void {
    this.#onDialFailed?.(this.#schedule.failed());
    if (this.#state === 'closed') return;
    this.#dialTimer = setTimeout(() => this.#dialNext(), this.#schedule.failedPause());
    this.#dialTimer.unref();
  }

  #dial(server: string): void {
    const colon = server.lastIndexOf(':');
    const host = server.slice(0, colon);
    const port = Number(server.slice(colon + 1));
    const socket = tcpConnect({ host, port, noDelay: true });
    this.#socket = socket;
    this.#framer = new PacketFramer();
    // A dial that goes nowhere is given up after its share of the session timeout.
    const timeoutMs =
      this.#negotiatedTimeoutMs > 0 ? this.#negotiatedTimeoutMs : this.#options.sessionTimeoutMs;
    this.#liveness.dialing(socket, timeoutMs, () => socket === this.#socket && this.#state === 'connecting');
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
      this.#handshakeSentAt = performance.now();
      socket.write(Buffer.from(writer.bytes()));
    });
    socket.on('data', (chunk: Buffer) => this.#onData(socket, chunk));
    socket.on('error', () => {});
    socket.on('close', () => this.#onSocketClosed(socket));
  }

  #onData(socket: Socket, chunk: Buffer): void {
    if (socket !== this.#socket) return;
    this.#liveness.heard();
    try {
      this.#framer.read(chunk, (reader) => {
        if (this.#state === 'connecting') this.#onConnectResponse(reader);
        else this.#onReply(reader);
      });
    } catch (error) {
      // A reply we cannot read leaves the stream out of step: drop the connection.
      socket.destroy(error instanceof Error ? error : undefined);
    }
  }

  #onConnectResponse(reader: JuteReader): void {
    this.#liveness.answered();
    const response = readConnectResponse(reader);
    if (response.timeoutMs <= 0) {
      this.#expire();
      this.#onDialFailed?.(this.#schedule.failedAttempts + 1);
      return;
    }
    this.#schedule.connected();
    const resumed = this.#sessionId !== 0n;
    this.#sessionId = response.sessionId;
    this.#password = response.password;
    this.#negotiatedTimeoutMs = response.timeoutMs;
    this.#state = 'connected';
    for (const { scheme, credentials } of this.#options.auth ?? []) {
      this.#requests.sendPacket(Xid.auth, OpCode.auth, (writer) =>
        writer.int(0).string(scheme).buffer(Buffer.from(credentials, 'utf8')),
      );
    }
    if (resumed) this.#restoreWatches();
    this.#liveness.startPinging(this.#socket, this.#negotiatedTimeoutMs);
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
        return;
      case Xid.setWatches:
        this.#watches.restoreAnswered(err);
        return;
      case Xid.auth:
        if (err !== ErrorCode.ok)
          this.emit('authFailed', new ZooKeeperError(err, 'ZooKeeper refused the credentials'));
        return;
    }
    this.#requests.answer(xid, err, zxid, reader);
  }

  #onWatcherEvent(received: WatcherEvent): void {
    const path = this.#chroot.clientPath(received.path);
    this.#watches.fire(path === received.path ? received : { ...received, path });
  }

  /** After a reconnect: the server forgot our watches; tell it which, and from which zxid. */
  #restoreWatches(): void {
    const restore = this.#watches.restore(this.#lastZxid, this.#chroot);
    if (restore) this.#requests.sendPacket(Xid.setWatches, restore.op, restore.write);
  }

  #onSocketClosed(socket: Socket): void {
    if (socket !== this.#socket) return;
    this.#socket = undefined;
    this.#liveness.stopPinging();
    if (this.#state === 'closed') return;
    const wasConnected = this.#state === 'connected';
    this.#state = 'connecting';
    this.#requests.failAll(new ZooKeeperError(ErrorCode.connectionLoss, 'ZooKeeper connection lost'));
    if (!wasConnected) {
      this.#dialFailed();
      return;
    }
    this.emit('disconnected');
    this.#redial();
  }

  /**
   * After a lost connection: the members in turn with the same session until one takes it or
   * says it expired, at once or after a pause (see DialSchedule.redialPause).
   */
  #redial(): void {
    const delayMs = this.#schedule.redialPause();
    if (delayMs === undefined) {
      this.#dialNext();
      return;
    }
    this.#dialTimer = setTimeout(() => this.#dialNext(), delayMs);
    this.#dialTimer.unref();
  }

  #expire(): void {
    if (this.#state === 'closed') return;
    this.#shutdown(new ZooKeeperError(ErrorCode.sessionExpired, 'ZooKeeper session expired'));
    this.emit('expired');
  }

  #shutdown(reason: ZooKeeperError): void {
    this.#state = 'closed';
    this.#liveness.stop();
    clearTimeout(this.#dialTimer);
    this.#requests.failAll(reason);
    this.#watches.clear(reason.code === ErrorCode.sessionExpired ? reason : undefined);
    this.#socket?.destroy();
    this.#socket = undefined;
  }
}
