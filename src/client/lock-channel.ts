/*
 * Many lock requests on one resumable stream, each by its id: their messages out, the server's
 * news about each in, and what a break, a resume and the stream's end do to them.
 */
import type { SessionResponse } from '../gen/lockstream/v1/lockstream.js';
import type { LockRequest } from './acquire-options.js';
import { LockHandle, type RequestCarrier } from './lock-handle.js';
import { ResumableStream, type StreamOpening } from './resumable-stream.js';
import type { EndStatus } from './session-call.js';
import { sessionRequest, type RequestMessage } from './session-requests.js';
import { fromDuration } from './wire-values.js';

export interface LockChannelOptions {
  /** How long a stream with no request stays open for the next one. */
  readonly idleMs: number;
  /** Called whenever the last request on the channel has ended. */
  readonly onEmpty?: () => void;
}

const MAX_REQUEST_ID = 2 ** 32 - 1;

/**
 * Lock requests on one resumable stream, in the Session RPC's terms whichever RPC carries it:
 * the Session stream a LockClient carries all its locks on (opened on the first acquire, closed
 * after `idleMs` without requests), or an Acquire stream of one request. After a blip the
 * stream is resumed with its token: held locks are in doubt meanwhile and confirmed once
 * resumed; waiting requests keep their place.
 */
export class LockChannel implements RequestCarrier {
  readonly #options: LockChannelOptions;
  readonly #stream: ResumableStream;
  readonly #locks = new Map<number, LockHandle>();
  #lastId = 0;
  /** Requests the server has reported since the resume began. */
  readonly #reported = new Set<number>();
  #idleTimer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(opening: StreamOpening, options: LockChannelOptions) {
    this.#options = options;
    this.#stream = new ResumableStream(opening, {
      message: (requestId, kind) => this.#onMessage(requestId, kind),
      broke: () => this.#onBreak(),
      ended: (status) => this.#endAll(status),
    });
  }

  /** Queues `request` on the stream, opening it if needed. */
  acquire(request: LockRequest): LockHandle {
    if (this.#closed) throw new Error('INVARIANT: acquire on a closed channel');
    const id = this.#nextId();
    const lock = new LockHandle(this, id, request);
    this.#locks.set(id, lock);
    // A stream that is resuming takes the request once it is back.
    if (!this.#stream.active) this.#stream.start();
    if (!this.#stream.resuming) this.#stream.write(sessionRequest(id, request, lock.acquireMessage()));
    return lock;
  }

  /**
   * Ends the stream as its client is closed: every request on it is given up by name first (a
   * bare half-close would leave them to a resume grace, as a cancel does). Requests still open
   * end here: waiting ones fail with the closed error, held ones are lost (they are no longer
   * protected).
   */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#idleTimer);
    if (!this.#stream.resuming) for (const lock of this.#locks.values()) this.send(lock, CANCEL);
    this.#stream.finish();
    for (const lock of [...this.#locks.values()]) lock.clientClosed();
  }

  send(lock: LockHandle, message: RequestMessage): void {
    // While resuming, `#resumed` sends what each request still needs.
    if (!this.#stream.resuming) this.#stream.write(sessionRequest(lock.id, lock.request, message));
  }

  forget(lock: LockHandle): void {
    this.#locks.delete(lock.id);
    if (this.#locks.size > 0) return;
    this.#options.onEmpty?.();
    this.#closeWhenIdle();
  }

  /**
   * With no request left, the stream is closed after `idleMs` unless a new one comes. One timer,
   * restarted each time the channel empties (an acquire leaves it running: the timer checks),
   * rather than a timer made and cleared per lock.
   */
  #closeWhenIdle(): void {
    if (this.#locks.size > 0 || !this.#stream.active || this.#stream.resuming) return;
    if (this.#idleTimer) {
      this.#idleTimer.refresh();
      return;
    }
    this.#idleTimer = setTimeout(() => {
      if (this.#locks.size === 0 && !this.#stream.resuming) this.#stream.finish();
    }, this.#options.idleMs).unref();
  }

  #nextId(): number {
    do {
      this.#lastId = this.#lastId >= MAX_REQUEST_ID ? 1 : this.#lastId + 1;
    } while (this.#locks.has(this.#lastId));
    return this.#lastId;
  }

  /** What the server said, and about which request: the one handler of its news. */
  #onMessage(requestId: number, kind: SessionResponse['kind']): void {
    const resuming = this.#stream.resuming;
    if (requestId !== 0) {
      if (resuming) this.#reported.add(requestId);
      this.#locks.get(requestId)?.onMessage(kind);
    } else if (kind?.$case === 'opened') {
      this.#stream.resumableFor(kind.value.resumeToken, fromDuration(kind.value.resumeGrace));
    } else if (kind?.$case === 'resumed') {
      if (resuming) this.#resumed();
    }
    // Otherwise `heartbeat`, or a stream message this client does not know (a newer server's).
  }

  #onBreak(): void {
    for (const lock of this.#locks.values()) lock.streamBroke();
    this.#reported.clear();
  }

  /** The server took the resumed stream over and reported every request it still has. */
  #resumed(): void {
    this.#stream.resumed();
    const reported = new Set(this.#reported);
    this.#reported.clear();
    for (const lock of [...this.#locks.values()]) {
      if (reported.has(lock.id)) lock.resumed();
      // Never granted and unknown to the server: its acquire was lost with the break (or with an
      // instance that stopped before it reached the store), so it is asked for again.
      else if (!lock.sentToServer || lock.waiting) this.send(lock, lock.acquireMessage());
      else lock.unknownAfterResume();
    }
    this.#closeWhenIdle();
  }

  /** The stream is over: every request with it. The next acquire opens a new one. */
  #endAll(status: EndStatus): void {
    for (const lock of [...this.#locks.values()]) lock.streamEnded(status);
  }
}

const CANCEL: RequestMessage = { kind: 'cancel' };
