/*
 * One gRPC stream that carries a lock session, whichever RPC it is (LockStream), and the lock
 * RPCs' handler: the lifecycle both lock RPCs share, from admitting the caller to the call's
 * status.
 */
import type { ServerDuplexStream } from '@grpc/grpc-js';
import type { Bindings, Logger } from 'pino';
import { lazyChild, type BindingsSource } from '../../common/lazy-logger.js';
import {
  SESSION_ENDED,
  type AcquireRequest,
  type LockSession,
  type RequestListener,
  type RequestNews,
} from '../engine/index.js';
import { isLockError, LockError } from '../lock-error.js';
import type { Caller } from '../security/gate.js';
import { toCallStatus, type CallStatus } from './error-status.js';
import type { OpenStream } from './open-streams.js';
import { carryOut, type CommandedStream } from './stream-commands.js';
import { startHeartbeat, type HeartbeatStream, type StreamHeartbeat } from './stream-heartbeat.js';
import { HANDED_OVER, StreamNews } from './stream-news.js';
import { ONLY, violation, type LockStreamOptions, type Wire, type WireStream } from './wire.js';

/** Where a stream stands: before its session, open, half-closed and letting go, over. */
type StreamState = WireStream<unknown, unknown>['state'];

/**
 * The handler of a lock RPC (Acquire or Session): each call is a LockStream, reading and
 * writing the RPC's messages through `wire`.
 */
export function lockStreamHandler<Req, Res>(
  wire: Wire<Req, Res>,
  options: LockStreamOptions,
): (call: ServerDuplexStream<Req, Res>) => void {
  let lastCallId = 0;
  return (call) => {
    lastCallId += 1;
    new LockStream(call, wire, options, lastCallId);
  };
}

/**
 * One gRPC stream that carries a LockSession, whichever RPC it is (an Acquire stream carries a
 * session of one request): the one stream class. This is the lifecycle both RPCs share:
 * admitting the caller, heartbeats, opening and resuming the session, a half-close (a clean
 * end, or kept for the grace), a break (detached for the grace, or ended), shutdown, being
 * replaced by a resuming stream, and when the call ends with which status. Its Wire translates
 * at the edge; what a client's message asks is carried out by carryOut, and what the stream
 * tells its client (the session's news in the Session RPC's words, the call's end) is written
 * by its StreamNews.
 */
export class LockStream<Req, Res>
  implements CommandedStream<Req, Res>, RequestListener, OpenStream, HeartbeatStream, BindingsSource
{
  readonly call: ServerDuplexStream<Req, Res>;
  readonly options: LockStreamOptions;
  readonly #wire: Wire<Req, Res>;
  /** Made when first asked for (see logger). */
  #logger: Logger | undefined;
  /** What the stream tells its client, through its one writer. */
  readonly #news: StreamNews<Req, Res>;
  /** The admitted caller; undefined only if admission failed (the stream is then over). */
  readonly caller: Caller | undefined;
  #session: LockSession | undefined;
  /**
   * The request the stream's log lines name, once known (see Wire.logBindings). Not a #private
   * field: it may be read (as undefined) while the stream constructs.
   */
  loggedRequest: AcquireRequest | undefined;
  #state: StreamState = 'opening';
  #heartbeat: StreamHeartbeat | undefined;
  /** What came while the session was being found (see `opening`): handled once it is. */
  #held: Array<Req | typeof HALF_CLOSE> | undefined;

  /** Numbers the calls of one RPC, for the logs. */
  readonly callId: number;

  constructor(
    call: ServerDuplexStream<Req, Res>,
    wire: Wire<Req, Res>,
    options: LockStreamOptions,
    callId: number,
  ) {
    this.call = call;
    this.#wire = wire;
    this.options = options;
    this.callId = callId;
    this.#news = new StreamNews(call, wire, this, options.logger.isLevelEnabled('debug'));
    call.on('data', (message: Req) => {
      this.#heartbeat?.heard();
      if (this.#held) this.#held.push(message);
      else this.#onData(message);
    });
    // A cancel ends the readable side too, and may look like a half-close until its reset
    // arrives: nothing here depends on which (see `#onHalfClose`).
    call.on('end', () => {
      if (this.#held) this.#held.push(HALF_CLOSE);
      else this.#onHalfClose();
    });
    // grpc-js reports 'cancelled' when any call's stream closes, after a status too; `on`,
    // not `once` (which wraps the listener in a bound function): onBreak acts only once.
    call.on('cancelled', () => this.#onBreak(undefined));
    this.#counted(true);
    options.streams.add(this);
    if (this.#state === 'over') return;
    try {
      this.caller = options.gate.admit(call);
    } catch (error) {
      this.#fail(error);
    }
  }

  #onData(message: Req): void {
    if (this.#state !== 'opening' && this.#state !== 'open') return;
    try {
      carryOut(this, this.#wire.read(message, this));
    } catch (error) {
      this.#fail(error);
    }
  }

  /** Counts the stream open (`true`, once) and over (`false`, once) in the metrics. */
  #counted(open: boolean): void {
    const { metrics } = this.options;
    if (this.#wire.rpc !== 'session') {
      if (open) metrics.streamOpened();
      else metrics.streamClosed();
    } else if (open) {
      metrics.sessionOpened();
    } else {
      metrics.sessionClosed();
    }
  }

  /**
   * The session the first message asked for takes a while to find (a resume that takes a
   * store session over from another instance): messages and a half-close that come meanwhile
   * wait, in order, until `opened` has made the stream the session's; a failure ends the call,
   * saying that nothing is kept for the session (`lockstream-request: ended`) only when it is
   * NOT_FOUND. Any other failure to find it (a takeover another instance won, ZooKeeper out of
   * reach, this server stopping) leaves the session where it was, for a resume to find.
   */
  #opening(finding: Promise<LockSession>, opened: (session: LockSession) => void): void {
    this.#held = [];
    finding.then(
      (session) => {
        const held = this.#held ?? [];
        this.#held = undefined;
        if (this.#state !== 'opening') return;
        try {
          opened(session);
        } catch (error) {
          this.#fail(error);
          return;
        }
        for (const message of held) {
          if (message === HALF_CLOSE) this.#onHalfClose();
          else this.#onData(message);
        }
      },
      (error: unknown) => {
        this.#held = undefined;
        this.#fail(error, isLockError(error, 'NOT_FOUND'));
      },
    );
  }

  /**
   * The stream's logger: a lazy child whose bindings (`logBindings`) are asked for only when a
   * line is logged at an enabled level; a stream that logs nothing keeps no bindings.
   */
  get logger(): Logger {
    return (this.#logger ??= lazyChild(this.options.logger, this));
  }

  /** BindingsSource: what the stream's log lines say of the call (maybe asked while constructing). */
  logBindings(): Bindings {
    return this.#wire.logBindings(this);
  }

  /** HeartbeatStream: a heartbeat is due. */
  sendHeartbeat(): void {
    this.#news.heartbeat();
  }

  /** HeartbeatStream: the client went silent; the stream is broken. */
  silent(reason: LockError): void {
    this.#onBreak(reason);
  }

  /** OpenStream: the server shuts down. */
  shutDown(reason: unknown): void {
    this.#fail(reason);
  }

  get state(): StreamState {
    return this.#state;
  }

  /** CommandedStream: the stream's session, once it is open. */
  get session(): LockSession | undefined {
    return this.#session;
  }

  /** The session of an open stream; a protocol violation (naming `what` comes first) before it has one. */
  opened(what: string): LockSession {
    if (!this.#session) throw violation(`the first message must be ${what}`);
    return this.#session;
  }

  /**
   * Opens a session for this stream (SHUTTING_DOWN once the server is closing) and tells the
   * client so: `opened`, with its resume token if it has a grace (see carryOut).
   */
  open(graceMs: number, heartbeatIntervalMs: number | undefined): LockSession {
    const session = this.options.sessions.open({
      kind: this.#wire.rpc,
      graceMs,
      heartbeatMs: heartbeatIntervalMs,
      callerName: this.caller?.name,
      accounting: this.options.metrics,
      logger: this.logger,
    });
    this.#news.opened(session);
    void this.#attach(session, heartbeatIntervalMs);
    this.logger.debug({ graceMs: session.graceMs }, 'session opened');
    return session;
  }

  /**
   * Resumes the session of `resumeToken` on this stream (see #opening and carryOut): tells the
   * client `opened`, where every request stands, then `resumed`.
   */
  resume(resumeToken: string, heartbeatIntervalMs: number | undefined): void {
    this.#opening(this.options.sessions.resume(resumeToken, this.#wire.rpc, this.caller?.name), (session) => {
      this.loggedRequest ??= session.request(ONLY);
      this.#news.opened(session);
      void this.#attach(session, heartbeatIntervalMs).then(() => {
        if (this.#state === 'over' || !session.isAttached(this)) return;
        // After every request's state: a request not reported before `resumed` is unknown here.
        this.#news.resumed();
        this.logger.debug({ requests: session.size }, 'session resumed');
      });
    });
  }

  /**
   * Makes this stream the session's (it has written its first answer); resolves once the
   * session has told it where every request stands.
   */
  #attach(session: LockSession, heartbeatIntervalMs: number | undefined): Promise<void> {
    this.#session = session;
    this.#state = 'open';
    this.#heartbeat = startHeartbeat(heartbeatIntervalMs, this);
    return session.attach(this);
  }

  /**
   * RequestListener: the session's news of request `id`, written as the wire's messages (see
   * StreamNews); the end of a stream's only request (Acquire) ends the call, OK if it ended
   * without an error, with its status otherwise. For a lost lock, resolves once the client has
   * been handed the news (it is freed for others only then).
   */
  tell(id: number, request: AcquireRequest | undefined, news: RequestNews): void | Promise<void> {
    if ((news.kind !== 'ended' && news.kind !== 'lost') || !this.#wire.endsWithRequest) {
      return this.#news.tell(id, request, news);
    }
    if (news.kind === 'ended' && news.error === undefined) {
      this.#endCall();
      return;
    }
    this.#endWith(toCallStatus(news.error, this.logger));
    // A lost lock is freed for others once the status has gone to HTTP/2.
    return news.kind === 'lost' ? this.#news.statusSent() : undefined;
  }

  /** The client ended its side: a clean end, unless requests not let go make it a break. */
  #onHalfClose(): void {
    if (this.#state === 'opening') {
      this.#fail(violation(this.#wire.endedBeforeOpening));
      return;
    }
    if (this.#state !== 'open') return;
    const session = this.#session!;
    // With a grace, requests are let go by `release` or `cancel`: a half-close with some left
    // may be a cancel whose reset has not arrived (or never will), so it is an abnormal end.
    if (session.graceMs > 0 && session.unreleased > 0) {
      this.#onBreak(this.#wire.keptForGrace(session));
      return;
    }
    this.#state = 'closing';
    void session.closeCleanly().then(() => {
      if (this.#state === 'closing') this.#endCall();
    });
  }

  /** Ends the call with OK after what was written before, and the session with it. */
  #endCall(): void {
    if (this.#state === 'over') return;
    this.#over();
    this.#news.ok();
    const session = this.#session;
    void Promise.resolve(session?.isAttached(this) ? session.end(SESSION_ENDED) : undefined).then(() =>
      this.#done(),
    );
  }

  /**
   * The stream broke: the client cancelled (`reason` undefined), its connection died, or it went
   * silent. A session with a grace is kept for it; otherwise its requests end now.
   */
  #onBreak(reason: LockError | undefined): void {
    if (this.#state === 'over') return;
    this.#over();
    const session = this.#session;
    const detaching = session !== undefined && session.graceMs > 0 && !this.options.shutdown.aborted;
    if (reason) this.#news.status(toCallStatus(reason, this.logger), !detaching);
    if (session?.isAttached(this)) {
      if (detaching) {
        session.detach();
        this.#done();
        return;
      }
      void session.end(SESSION_ENDED).then(() => this.#done());
      return;
    }
    this.#done();
  }

  /**
   * Ends the call with `error`'s status, and the stream's session with it if attached;
   * `requestEnded` false: the session, not attached, may be kept elsewhere (see `opening`).
   */
  #fail(error: unknown, requestEnded = true): void {
    if (this.#state === 'over') return;
    this.#over();
    const status = toCallStatus(error, this.logger);
    const session = this.#session;
    const done = session?.isAttached(this)
      ? session.end(error instanceof LockError ? error : SESSION_ENDED)
      : undefined;
    void Promise.resolve(done).then(() => {
      this.#news.status(status, requestEnded);
      this.#done();
    });
  }

  /**
   * Ends the call with `status` at once (the session's only request has ended with it); the
   * session, empty now, ends too.
   */
  #endWith(status: CallStatus): void {
    if (this.#state === 'over') return;
    this.#over();
    this.#news.status(status, true);
    const session = this.#session;
    void Promise.resolve(session?.isAttached(this) ? session.end(SESSION_ENDED) : undefined).then(() =>
      this.#done(),
    );
  }

  handedOver(): void {
    if (this.#state === 'over') return;
    this.#over();
    this.#news.status(HANDED_OVER, false);
    this.#done();
  }

  replaced(): void {
    if (this.#state === 'over') return;
    this.#over();
    this.#news.status(this.#wire.replacedStatus(this.#session), false);
    this.#done();
  }

  #over(): void {
    this.#state = 'over';
    this.#counted(false);
    this.#heartbeat?.[Symbol.dispose]();
  }

  /** The stream is over and its session ended or detached. */
  #done(): void {
    this.options.streams.done(this);
  }
}

/** Stands for a half-close among held messages. */
const HALF_CLOSE = Symbol('half-close');
