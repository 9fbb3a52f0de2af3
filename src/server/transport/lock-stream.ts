import { Metadata, status as grpcStatus, type ServerDuplexStream } from '@grpc/grpc-js';
import type { Bindings, Logger } from 'pino';
import { lazyChild, type BindingsSource } from '../../common/lazy-logger.js';
import { REQUEST_STATE_KEY } from '../../common/request-state.js';
import {
  SESSION_ENDED,
  type AcquireRequest,
  type LockSession,
  type LockSessions,
  type RequestListener,
  type RequestNews,
} from '../engine/index.js';
import { isLockError, LockError } from '../lock-error.js';
import type { Metrics } from '../observability/metrics.js';
import type { Caller, Gate } from '../security/gate.js';
import { toCallStatus, type CallStatus } from './error-status.js';
import type { OpenStream, OpenStreams } from './open-streams.js';
import type { RequestSizeLimit } from './request-size.js';
import { startHeartbeat, type HeartbeatStream, type StreamHeartbeat } from './stream-heartbeat.js';
import { StreamWriter } from './stream-writer.js';
import { batchedByTurn } from './turn-batching.js';

/** What both lock-holding RPCs need from the server. */
export interface LockStreamOptions {
  readonly sessions: LockSessions;
  readonly logger: Logger;
  /** Aborts (reason: a `SHUTTING_DOWN` error) when the server shuts down. */
  readonly shutdown: AbortSignal;
  readonly metrics: Metrics;
  /** Admits the caller, and says which locks and modes it may take. */
  readonly gate: Gate;
  /** Refuses a lock request larger than the server accepts. */
  readonly requestSize: RequestSizeLimit;
  /** The open streams: each is one until it is over and its session ended or detached. */
  readonly streams: OpenStreams;
}

/** Where a stream stands: before its session, open, half-closed and letting go, over. */
type StreamState = 'opening' | 'open' | 'closing' | 'over';

/**
 * One gRPC stream that carries a LockSession, whichever RPC it is (an Acquire stream carries a
 * session of one request). This is the lifecycle both RPCs share: admitting the caller,
 * heartbeats, the one writer, a half-close (a clean end, or kept for the grace), a break
 * (detached for the grace, or ended), shutdown, being replaced by a resuming stream, and the
 * call's status. Each RPC reads its own messages and translates the session's news into them.
 */
export abstract class LockStream<Req, Res>
  implements RequestListener, OpenStream, HeartbeatStream, BindingsSource
{
  protected readonly call: ServerDuplexStream<Req, Res>;
  protected readonly options: LockStreamOptions;
  /** Made when first asked for (see logger). */
  #logger: Logger | undefined;
  protected readonly writer: StreamWriter<Res>;
  /** The admitted caller; undefined only if admission failed (the stream is then over). */
  protected caller: Caller | undefined;
  protected session: LockSession | undefined;
  /** Per-request events are logged at debug level only; nothing is built for them otherwise. */
  protected readonly debug: boolean;
  #state: StreamState = 'opening';
  #heartbeat: StreamHeartbeat | undefined;
  /** What came while the session was being found (see `opening`): handled once it is. */
  #held: Array<Req | typeof HALF_CLOSE> | undefined;

  /** Numbers the calls of one RPC, for the logs. */
  protected readonly callId: number;

  constructor(call: ServerDuplexStream<Req, Res>, options: LockStreamOptions, callId: number) {
    this.call = call;
    this.options = options;
    this.callId = callId;
    this.debug = options.logger.isLevelEnabled('debug');
    this.writer = new StreamWriter(batchedByTurn(call));
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
    call.on('cancelled', () => this.onBreak(undefined));
    this.counted(true);
    options.streams.add(this);
    if (this.#state === 'over') return;
    try {
      this.caller = options.gate.admit(call);
    } catch (error) {
      this.fail(error);
    }
  }

  #onData(message: Req): void {
    if (this.#state !== 'opening' && this.#state !== 'open') return;
    try {
      this.onMessage(message);
    } catch (error) {
      this.fail(error);
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
  protected opening(finding: Promise<LockSession>, opened: (session: LockSession) => void): void {
    this.#held = [];
    finding.then(
      (session) => {
        const held = this.#held ?? [];
        this.#held = undefined;
        if (this.#state !== 'opening') return;
        try {
          opened(session);
        } catch (error) {
          this.fail(error);
          return;
        }
        for (const message of held) {
          if (message === HALF_CLOSE) this.#onHalfClose();
          else this.#onData(message);
        }
      },
      (error: unknown) => {
        this.#held = undefined;
        this.fail(error, isLockError(error, 'NOT_FOUND'));
      },
    );
  }

  /**
   * The stream's logger: a lazy child whose bindings (`logBindings`) are asked for only when a
   * line is logged at an enabled level; a stream that logs nothing keeps no bindings.
   */
  protected get logger(): Logger {
    return (this.#logger ??= lazyChild(this.options.logger, this));
  }

  /** BindingsSource: what the stream's log lines say of the call (maybe asked while constructing). */
  abstract logBindings(): Bindings;
  /** Counts the stream open (`true`, once) and over (`false`, once) in the metrics. */
  protected abstract counted(open: boolean): void;

  /** HeartbeatStream: a heartbeat is due. */
  sendHeartbeat(): void {
    this.writer.writeLatest(0, this.heartbeatMessage());
  }

  /** HeartbeatStream: the client went silent; the stream is broken. */
  silent(reason: LockError): void {
    this.onBreak(reason);
  }

  /** OpenStream: the server shuts down. */
  shutDown(reason: unknown): void {
    this.fail(reason);
  }

  /** A message from the client (the stream is opening or open); throwing ends the call. */
  protected abstract onMessage(message: Req): void;
  /** The RPC's messages for a request's news (see RequestListener). */
  abstract tell(id: number, request: AcquireRequest, news: RequestNews): void | Promise<void>;
  /** The heartbeat message of this RPC. */
  protected abstract heartbeatMessage(): Res;
  /** Why a half-close with requests not let go is kept for the grace. */
  protected abstract keptForGrace(session: LockSession): LockError;
  /** The debug line that says how the call ended. */
  protected abstract get endedLine(): string;
  /** A resuming stream took the session over: how this one ends. */
  protected abstract replacedStatus(): CallStatus;

  protected get state(): StreamState {
    return this.#state;
  }

  /**
   * Makes this stream the session's (the RPC has written its first answer); resolves once the
   * session has told it where every request stands.
   */
  protected attach(session: LockSession, heartbeatIntervalMs: number | undefined): Promise<void> {
    this.session = session;
    this.#state = 'open';
    this.#heartbeat = startHeartbeat(heartbeatIntervalMs, this);
    return session.attach(this);
  }

  /** The session of an open stream; a protocol violation before it has one. */
  protected opened(what: string): LockSession {
    if (!this.session) throw violation(`the first message must be ${what}`);
    return this.session;
  }

  /** Opens a session for this stream (SHUTTING_DOWN once the server is closing). */
  protected openSession(kind: 'acquire' | 'session', graceMs: number): LockSession {
    return this.options.sessions.open({
      kind,
      graceMs,
      callerName: this.caller?.name,
      accounting: this.options.metrics,
      logger: this.logger,
    });
  }

  /** The client ended its side: a clean end, unless requests not let go make it a break. */
  #onHalfClose(): void {
    if (this.#state === 'opening') {
      this.fail(violation(this.endedBeforeOpening()));
      return;
    }
    if (this.#state !== 'open') return;
    const session = this.session!;
    // With a grace, requests are let go by `release` or `cancel`: a half-close with some left
    // may be a cancel whose reset has not arrived (or never will), so it is an abnormal end.
    if (session.graceMs > 0 && session.unreleased > 0) {
      this.onBreak(this.keptForGrace(session));
      return;
    }
    this.#state = 'closing';
    void session.closeCleanly().then(() => {
      if (this.#state === 'closing') this.endCall();
    });
  }

  /** What a client that half-closes before its first message is told. */
  protected abstract endedBeforeOpening(): string;

  /** Ends the call with OK after what was written before, and the session with it. */
  protected endCall(): void {
    if (this.#state === 'over') return;
    this.#over();
    this.call.end();
    this.logger.debug({ status: 'OK' }, this.endedLine);
    const session = this.session;
    void Promise.resolve(session?.isAttached(this) ? session.end(SESSION_ENDED) : undefined).then(() =>
      this.#done(),
    );
  }

  /**
   * The stream broke: the client cancelled (`reason` undefined), its connection died, or it went
   * silent. A session with a grace is kept for it; otherwise its requests end now.
   */
  protected onBreak(reason: LockError | undefined): void {
    if (this.#state === 'over') return;
    this.#over();
    const session = this.session;
    const detaching = session !== undefined && session.graceMs > 0 && !this.options.shutdown.aborted;
    if (reason) this.emitStatus(toCallStatus(reason, this.logger), !detaching);
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

  /** Ends the call with `error`'s status after ending the session, for good. */
  /**
   * Ends the call with `error`'s status, and the stream's session with it if attached;
   * `requestEnded` false: the session, not attached, may be kept elsewhere (see `opening`).
   */
  protected fail(error: unknown, requestEnded = true): void {
    if (this.#state === 'over') return;
    this.#over();
    const status = toCallStatus(error, this.logger);
    const session = this.session;
    const done = session?.isAttached(this)
      ? session.end(error instanceof LockError ? error : SESSION_ENDED)
      : undefined;
    void Promise.resolve(done).then(() => {
      this.emitStatus(status, requestEnded);
      this.#done();
    });
  }

  /**
   * Ends the call with `status` at once (the session's only request has ended with it); the
   * session, empty now, ends too.
   */
  protected endWith(status: CallStatus): void {
    if (this.#state === 'over') return;
    this.#over();
    this.emitStatus(status, true);
    const session = this.session;
    void Promise.resolve(session?.isAttached(this) ? session.end(SESSION_ENDED) : undefined).then(() =>
      this.#done(),
    );
  }

  handedOver(): void {
    if (this.#state === 'over') return;
    this.#over();
    this.emitStatus(
      {
        code: grpcStatus.UNAVAILABLE,
        details: 'the session moved to another lockstream instance: resume it, on any instance',
      },
      false,
    );
    this.#done();
  }

  replaced(): void {
    if (this.#state === 'over') return;
    this.#over();
    this.emitStatus(this.replacedStatus(), false);
    this.#done();
  }

  #over(): void {
    this.#state = 'over';
    this.counted(false);
    this.#heartbeat?.[Symbol.dispose]();
  }

  /** The stream is over and its session ended or detached. */
  #done(): void {
    this.options.streams.done(this);
  }

  /** Ends the call with `status`; `requestEnded` tells the client not to try a resume. */
  protected emitStatus(status: CallStatus, requestEnded: boolean): void {
    this.logger.debug({ status: grpcStatus[status.code], details: status.details }, this.endedLine);
    const metadata = new Metadata();
    if (requestEnded) metadata.set(REQUEST_STATE_KEY, 'ended');
    this.call.emit('error', { ...status, metadata });
  }

  /** The caller's request, checked against the access policy; a caller naming no owner is recorded as itself. */
  protected admitted(asked: AcquireRequest): AcquireRequest {
    const caller = this.caller;
    for (const target of asked.locks ?? [asked]) caller?.checkAcquire(target.name, target.mode);
    return asked.owner === '' && caller?.name ? { ...asked, owner: caller.name } : asked;
  }
}

/** Stands for a half-close among held messages. */
const HALF_CLOSE = Symbol('half-close');

export function violation(message: string): LockError {
  return new LockError('INVALID_ARGUMENT', message);
}
