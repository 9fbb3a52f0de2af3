/* How long a protocol connection's member may stay silent: each dial bounded until its handshake
 * is answered, then pings while the connection is idle, and a drop once the member says nothing. */
import type { Socket } from 'node:net';
import { OpCode, Xid } from './records.js';
import type { RequestPipeline } from './request-pipeline.js';

/**
 * The timers of one ZooKeeperConnection that notice a silent member: the dial's bound, then the
 * pings. It destroys the socket of a member gone silent; the connection sees the socket close
 * and moves on to the next member, as on any lost connection.
 */
export class ConnectionLiveness {
  readonly #requests: RequestPipeline;
  /** How many members the connection dials in turn. */
  readonly #members: number;
  /** Bounds a dial until the server answers the handshake (see dialing). */
  #handshakeTimer: NodeJS.Timeout | undefined;
  #pingTimer: NodeJS.Timeout | undefined;
  #lastReceiveAt = 0;

  /** `requests`: the connection's, for its pings and the time of its last write. */
  constructor(requests: RequestPipeline, members: number) {
    this.#requests = requests;
    this.#members = members;
  }

  /**
   * A dial of `socket` began, with `timeoutMs` the session timeout: `socket` is destroyed if it
   * is still dialing (`stillDialing`) when its share of that timeout is up.
   */
  dialing(socket: Socket, timeoutMs: number, stillDialing: () => boolean): void {
    // A frozen member's kernel still accepts the connection, and a cut-off one never answers
    // the SYN: without a bound the dial would wait for it forever. Each member gets its share of
    // the session timeout, as with ZooKeeper's own clients, but at most a twelfth of it: the
    // store gives a session up half a timeout after the leader last heard it, and moves on from
    // a member at a quarter (SessionHealth), so that three members can be tried in between.
    clearTimeout(this.#handshakeTimer);
    this.#handshakeTimer = setTimeout(
      () => {
        if (stillDialing()) socket.destroy();
      },
      Math.min(timeoutMs / this.#members, timeoutMs / 12),
    );
    this.#handshakeTimer.unref();
  }

  /** The member answered the handshake: the dial's bound is off. */
  answered(): void {
    clearTimeout(this.#handshakeTimer);
  }

  /** Bytes came from the member. */
  heard(): void {
    this.#lastReceiveAt = performance.now();
  }

  /**
   * Pings when nothing was sent for a third of the session timeout, and drops a connection that
   * has said nothing for two thirds of it (a frozen or cut-off member; the store moves on sooner,
   * at a quarter without word from the leader: SessionHealth), so that another member
   * is tried while the session can still be saved: as ZooKeeper's own clients do.
   */
  startPinging(socket: Socket | undefined, negotiatedTimeoutMs: number): void {
    clearInterval(this.#pingTimer);
    const intervalMs = Math.max(1, Math.floor(negotiatedTimeoutMs / 3));
    // Counted from this connect, whatever the previous connection last sent.
    const pingsFrom = performance.now();
    this.#lastReceiveAt = pingsFrom;
    this.#pingTimer = setInterval(() => {
      const now = performance.now();
      if (now - this.#lastReceiveAt >= intervalMs * 2) {
        socket?.destroy();
        return;
      }
      if (now - Math.max(this.#requests.lastSendAt, pingsFrom) >= intervalMs * 0.9)
        this.#requests.sendPacket(Xid.ping, OpCode.ping, () => {});
    }, intervalMs / 4);
    this.#pingTimer.unref();
  }

  stopPinging(): void {
    clearInterval(this.#pingTimer);
  }

  /** The connection is over: no more pings, and no dial's bound. */
  stop(): void {
    clearInterval(this.#pingTimer);
    clearTimeout(this.#handshakeTimer);
  }
}
