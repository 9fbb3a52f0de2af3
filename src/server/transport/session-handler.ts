import { Metadata, status as grpcStatus, type ServerDuplexStream } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { onAbort } from '../../common/abort.js';
import { lazyChild } from '../../common/lazy-logger.js';
import { REQUEST_STATE_KEY } from '../../common/limits.js';
import type {
  SessionAcquire,
  SessionOpen,
  SessionRequest,
  SessionResponse,
  SessionResume,
} from '../../gen/lockstream/v1/lockstream.js';
import { UNKNOWN_RESUME_TOKEN } from '../engine/claims.js';
import type { AcquireRequest, Lease, RevokeRequest } from '../engine/lock-request.js';
import { LockError } from '../lock-error.js';
import { SESSION_ENDED, type LockSession, type SessionObserver } from '../engine/lock-session.js';
import type { Caller } from '../security/gate.js';
import type { AcquireHandlerOptions } from './acquire-handler.js';
import {
  checkResumeToken,
  durationToMs,
  heartbeatInterval,
  msToDuration,
  toAcquireRequest,
  acquiredMessage,
} from './acquire-request.js';
import { toCallStatus, type CallStatus } from './error-status.js';
import { startHeartbeat, type StreamHeartbeat } from './stream-heartbeat.js';

type SessionCall = ServerDuplexStream<SessionRequest, SessionResponse>;

export interface SessionHandlerOptions extends AcquireHandlerOptions {
  /** Requests one session may have at once; more are refused with RESOURCE_EXHAUSTED. */
  readonly maxRequestsPerSession: number;
}

/**
 * The Session RPC: many lock requests over one stream, each with the client's request id, on
 * one LockSession (the engine side: requests, their locks, the resume grace). This class is
 * the protocol only: it reads the client's messages, writes the session's news, and ends the
 * call.
 */
export function createSessionHandler(options: SessionHandlerOptions): (call: SessionCall) => void {
  let lastCallId = 0;
  return (call) => {
    lastCallId += 1;
    const logger = lazyChild(options.logger, { sessionCallId: lastCallId, peer: call.getPeer() });
    options.track(new SessionStream(call, options, logger).served);
  };
}

/** Where a session stream stands: before `open`/`resume`, open, half-closed and releasing, over. */
type StreamState = 'opening' | 'open' | 'closing' | 'over';

/** One Session stream, from its first message to its status. */
class SessionStream implements SessionObserver {
  /** Resolves once the stream is over and its session ended or detached. */
  readonly served: Promise<void>;
  readonly #call: SessionCall;
  readonly #options: SessionHandlerOptions;
  readonly #logger: Logger;
  readonly #writer: SessionWriter;
  #state: StreamState = 'opening';
  #caller: Caller | undefined;
  #session: LockSession | undefined;
  /** Per-request events are logged at debug level only; nothing is built for them otherwise. */
  readonly #debug: boolean;
  #heartbeat: StreamHeartbeat | undefined;
  #unlinkShutdown: () => void = () => {};
  readonly #streamClosed: () => void;
  #settleServed!: () => void;

  constructor(call: SessionCall, options: SessionHandlerOptions, logger: Logger) {
    this.#call = call;
    this.#options = options;
    this.#logger = logger;
    this.#debug = options.logger.isLevelEnabled('debug');
    this.#writer = new SessionWriter(call);
    this.#streamClosed = options.metrics.sessionOpened();
    this.served = new Promise((resolve) => (this.#settleServed = resolve));
    call.on('data', (message: SessionRequest) => this.#onMessage(message));
    // A cancel ends the readable side too, and may look like a half-close until its reset
    // arrives: nothing here depends on which (see `#onHalfClose`).
    call.on('end', () => this.#onHalfClose());
    // grpc-js reports 'cancelled' when any call's stream closes, after a status too.
    call.once('cancelled', () => this.#onBreak(undefined));
    const { shutdown } = options;
    if (shutdown.aborted) {
      this.#fail(shutdown.reason, { ended: true });
      return;
    }
    this.#unlinkShutdown = onAbort(shutdown, () => this.#fail(shutdown.reason, { ended: true }));
    try {
      this.#caller = options.gate.admit(call);
    } catch (error) {
      this.#fail(error, { ended: true });
    }
  }

  // --- the client's messages ---

  #onMessage(message: SessionRequest): void {
    this.#heartbeat?.heard();
    if (this.#state !== 'opening' && this.#state !== 'open') return;
    const kind = message.kind;
    try {
      switch (kind?.$case) {
        case 'open':
          this.#opening().#open(kind.value);
          return;
        case 'resume':
          this.#opening().#resume(kind.value);
          return;
        case 'acquire':
          this.#acquire(this.#opened(), kind.value);
          return;
        case 'release':
          this.#opened().release(kind.value.requestId);
          return;
        case 'cancel':
          this.#opened().cancel(kind.value.requestId);
          return;
        case 'setValue':
          this.#opened().setValue(kind.value.requestId, kind.value.value);
          return;
        case 'downgrade':
          this.#opened().downgrade(kind.value.requestId);
          return;
        case 'heartbeat':
          this.#opened();
          return;
        case undefined:
          throw violation(
            'a SessionRequest must set one of open, resume, acquire, release, cancel, heartbeat, set_value, downgrade',
          );
      }
    } catch (error) {
      this.#fail(error, { ended: true });
    }
  }

  /** This stream, if it has not opened its session yet; a protocol violation otherwise. */
  #opening(): this {
    if (this.#state !== 'opening') throw violation('`open` or `resume` may be sent only once per stream');
    return this;
  }

  /** The stream's session; a protocol violation before `open` or `resume`. */
  #opened(): LockSession {
    if (!this.#session) throw violation('the first message must be `open` or `resume`');
    return this.#session;
  }

  #open(open: SessionOpen): void {
    const graceMs = open.resumeGrace ? durationToMs(open.resumeGrace, 'resume_grace') : 0;
    const intervalMs = heartbeatInterval(open.heartbeatInterval);
    const session = this.#options.claims.openSession({
      graceMs,
      callerName: this.#caller?.name,
      accounting: this.#options.metrics,
      logger: this.#logger,
    });
    void this.#attach(session, intervalMs);
    this.#logger.debug({ graceMs: session.graceMs }, 'session opened');
  }

  #resume(resume: SessionResume): void {
    checkResumeToken(resume.resumeToken, 'opened');
    const intervalMs = heartbeatInterval(resume.heartbeatInterval);
    const session = this.#options.claims.resumeSession(resume.resumeToken);
    // Someone else's token gets the answer an unknown one does: it reveals no session.
    if (session.callerName !== this.#caller?.name) throw new LockError('NOT_FOUND', UNKNOWN_RESUME_TOKEN);
    void this.#attach(session, intervalMs).then(() => {
      if (this.#state === 'over' || !session.isAttached(this)) return;
      this.#write(0, { $case: 'resumed', value: {} });
      this.#logger.debug({ requests: session.size }, 'session resumed');
    });
  }

  /**
   * Makes this stream the session's: `opened` first, then (on a resume) every request's state;
   * resolves once all of it is told.
   */
  #attach(session: LockSession, heartbeatIntervalMs: number | undefined): Promise<void> {
    this.#session = session;
    this.#state = 'open';
    const { resumeToken, graceMs } = session;
    this.#write(0, {
      $case: 'opened',
      value: {
        resumeToken: resumeToken ?? '',
        resumeGrace: resumeToken === undefined ? undefined : msToDuration(graceMs),
      },
    });
    this.#heartbeat = startHeartbeat(
      heartbeatIntervalMs,
      () => this.#writer.heartbeat(),
      (reason) => this.#onBreak(reason),
    );
    return session.attach(this);
  }

  #acquire(session: LockSession, acquire: SessionAcquire): void {
    const id = acquire.requestId;
    if (id === 0) throw violation('`acquire` needs a request_id of 1 or more');
    if (session.has(id)) throw violation(`request_id ${id} is in use by a request that has not ended`);
    try {
      const asked = toAcquireRequest(
        {
          name: acquire.name,
          mode: acquire.mode,
          waitTimeout: acquire.waitTimeout,
          owner: acquire.owner,
          resumeGrace: undefined,
          heartbeatInterval: undefined,
          value: acquire.value,
          limit: acquire.limit,
          weight: acquire.weight,
          locks: acquire.locks,
        },
        this.#call.getPeer(),
      );
      const caller = this.#caller;
      for (const target of asked.locks ?? [asked]) caller?.checkAcquire(target.name, target.mode);
      if (session.size >= this.#options.maxRequestsPerSession) {
        throw new LockError(
          'RESOURCE_EXHAUSTED',
          `lock "${asked.name}": this session has ${session.size} requests; the server allows ${this.#options.maxRequestsPerSession}`,
        );
      }
      // An authenticated caller that names no owner is recorded as itself.
      const request = asked.owner === '' && caller?.name ? { ...asked, owner: caller.name } : asked;
      session.acquire(id, request);
    } catch (error) {
      // A bad request fails alone: the session goes on.
      void this.ended(id, error);
    }
  }

  #onHalfClose(): void {
    if (this.#state === 'opening') {
      this.#fail(violation('the stream ended before an `open` message'), { ended: true });
      return;
    }
    if (this.#state !== 'open') return;
    const session = this.#session;
    // With a grace, requests are let go by `release` or `cancel`: a half-close with some left
    // may be a cancel whose reset has not arrived (or never will), so it is an abnormal end.
    if (session && session.graceMs > 0 && session.unreleased > 0) {
      this.#onBreak(keptForGrace(session));
      return;
    }
    this.#state = 'closing';
    if (!session) return;
    void session.closeCleanly().then(async () => {
      await session.end(SESSION_ENDED);
      if (this.#state !== 'closing') return;
      this.#over();
      this.#call.end();
      this.#logger.debug('session closed');
      this.#settleServed();
    });
  }

  /**
   * The stream broke: the client cancelled (`reason` undefined), its connection died, or it went
   * silent. A session with a grace is kept for it; otherwise its requests end now.
   */
  #onBreak(reason: LockError | undefined): void {
    if (this.#state === 'over') return;
    this.#over();
    const session = this.#session;
    const detaching = session !== undefined && session.graceMs > 0 && !this.#options.shutdown.aborted;
    if (reason) this.#emitStatus(toCallStatus(reason, this.#logger), !detaching);
    if (session && session.isAttached(this)) {
      if (detaching) {
        session.detach();
        this.#settleServed();
        return;
      }
      void session.end(SESSION_ENDED).then(() => this.#settleServed());
      return;
    }
    this.#settleServed();
  }

  /** Ends the call with `error`'s status after ending the session (when `ended`: for good). */
  #fail(error: unknown, { ended }: { ended: boolean }): void {
    if (this.#state === 'over') return;
    this.#over();
    const status = toCallStatus(error, this.#logger);
    const session = this.#session;
    const done = session?.isAttached(this)
      ? session.end(error instanceof LockError ? error : SESSION_ENDED)
      : undefined;
    void Promise.resolve(done).then(() => {
      this.#emitStatus(status, ended);
      this.#settleServed();
    });
  }

  #over(): void {
    this.#state = 'over';
    this.#streamClosed();
    this.#heartbeat?.[Symbol.dispose]();
    this.#unlinkShutdown();
  }

  #emitStatus(status: CallStatus, requestEnded: boolean): void {
    this.#logger.debug({ status: grpcStatus[status.code], details: status.details }, 'session call ended');
    const metadata = new Metadata();
    if (requestEnded) metadata.set(REQUEST_STATE_KEY, 'ended');
    this.#call.emit('error', { ...status, metadata });
  }

  #write(requestId: number, kind: SessionResponse['kind']): void {
    this.#writer.write({ requestId, kind });
  }

  // --- SessionObserver: the session's news, while this stream is attached ---

  queued(id: number, ahead: number): void {
    this.#writer.queued(id, ahead);
  }

  acquired(id: number, lease: Lease, request: AcquireRequest): void {
    this.#write(id, { $case: 'acquired', value: acquiredMessage(lease) });
    if (this.#debug) this.#logRequest(id, request, 'granted', { token: lease.fencingToken.toString() });
  }

  confirmedChange(id: number, confirmed: boolean): void {
    this.#write(id, confirmed ? { $case: 'confirmed', value: {} } : { $case: 'inDoubt', value: {} });
  }

  valueSet(id: number): void {
    this.#write(id, { $case: 'valueSet', value: {} });
  }

  downgraded(id: number): void {
    this.#write(id, { $case: 'downgraded', value: {} });
  }

  revokeRequested(id: number, { reason, forceAt }: RevokeRequest): void {
    this.#write(id, { $case: 'revokeRequested', value: { reason, forceAt } });
  }

  released(id: number, lease: Lease, request: AcquireRequest): void {
    this.#write(id, { $case: 'released', value: {} });
    if (this.#debug) this.#logRequest(id, request, 'released', { token: lease.fencingToken.toString() });
  }

  ended(id: number, error: unknown, request?: AcquireRequest, confirm = false): Promise<void> | undefined {
    const { code, details } =
      error === undefined ? { code: grpcStatus.OK, details: '' } : toCallStatus(error, this.#logger);
    const message: SessionResponse = {
      requestId: id,
      kind: { $case: 'ended', value: { code, message: details } },
    };
    if (this.#debug && request) this.#logRequest(id, request, 'ended', { status: grpcStatus[code], details });
    if (!confirm) {
      this.#writer.write(message);
      return undefined;
    }
    return new Promise<void>((resolve) => this.#writer.write(message, () => resolve()));
  }

  /** A debug line about one request, with the fields an Acquire call's lines have. */
  #logRequest(id: number, request: AcquireRequest, msg: string, fields: Record<string, unknown>): void {
    this.#logger.debug(
      { requestId: id, lock: request.name, mode: request.mode, owner: request.owner, ...fields },
      msg,
    );
  }

  replaced(): void {
    if (this.#state === 'over') return;
    this.#over();
    this.#emitStatus(
      { code: grpcStatus.ABORTED, details: 'the session was resumed on another stream' },
      false,
    );
    this.#settleServed();
  }
}

/** Why a half-closed session with requests not let go is kept for its grace (see `#onHalfClose`). */
function keptForGrace(session: LockSession): LockError {
  return new LockError(
    'KEPT_FOR_GRACE',
    `the session was half-closed with ${session.unreleased} request(s) neither released nor cancelled; it is kept for its resume grace (${session.graceMs} ms) as after a cancel: resume it and send \`release\` or \`cancel\` for each, then half-close`,
  );
}

function violation(message: string): LockError {
  return new LockError('INVALID_ARGUMENT', message);
}

/**
 * Writes a session's messages in order, honouring backpressure the way a slow reader needs:
 * while the stream is backed up, a request's newer `queued` replaces its older one (only the
 * latest position matters), and any other message about the request drops it. Everything else
 * is a handful of messages per request, so memory stays bounded by the requests themselves.
 */
class SessionWriter {
  readonly #call: SessionCall;
  #backedUp = false;
  readonly #pendingQueued = new Map<number, SessionResponse>();
  #pendingHeartbeat = false;

  constructor(call: SessionCall) {
    this.#call = call;
  }

  /** Writes `message`; `written` is called once the stream has handed it to HTTP/2 (or failed to). */
  write(message: SessionResponse, written?: () => void): void {
    if (this.#backedUp) this.#pendingQueued.delete(message.requestId);
    if (!this.#call.write(message, written)) this.#awaitDrain();
  }

  queued(requestId: number, ahead: number): void {
    const message: SessionResponse = { requestId, kind: { $case: 'queued', value: { ahead } } };
    if (this.#backedUp) this.#pendingQueued.set(requestId, message);
    else this.write(message);
  }

  heartbeat(): void {
    if (this.#backedUp) this.#pendingHeartbeat = true;
    else this.write(HEARTBEAT);
  }

  #awaitDrain(): void {
    if (this.#backedUp) return;
    this.#backedUp = true;
    this.#call.once('drain', () => {
      this.#backedUp = false;
      const pending = [...this.#pendingQueued.values()];
      this.#pendingQueued.clear();
      if (this.#pendingHeartbeat) pending.push(HEARTBEAT);
      this.#pendingHeartbeat = false;
      for (const message of pending) this.write(message);
    });
  }
}

const HEARTBEAT: SessionResponse = { requestId: 0, kind: { $case: 'heartbeat', value: {} } };
