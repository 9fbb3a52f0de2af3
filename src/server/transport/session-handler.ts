import { status as grpcStatus, type ServerDuplexStream } from '@grpc/grpc-js';
import type { Bindings } from 'pino';
import type {
  SessionAcquire,
  SessionOpen,
  SessionRequest,
  SessionResponse,
  SessionResume,
} from '../../gen/lockstream/v1/lockstream.js';
import type { AcquireRequest, LockSession, RequestNews } from '../engine/index.js';
import { LockError } from '../lock-error.js';
import {
  acquiredMessage,
  checkResumeToken,
  durationToMs,
  heartbeatInterval,
  msToDuration,
  toAcquireRequest,
} from './acquire-request.js';
import { toCallStatus, type CallStatus } from './error-status.js';
import { LockStream, violation, type LockStreamOptions } from './lock-stream.js';

type SessionCall = ServerDuplexStream<SessionRequest, SessionResponse>;

export interface SessionHandlerOptions extends LockStreamOptions {
  /** Requests one session may have at once; more are refused with RESOURCE_EXHAUSTED. */
  readonly maxRequestsPerSession: number;
}

/**
 * The Session RPC: many lock requests over one stream, each with the client's request id, on
 * one LockSession. This class is the protocol only: it reads the client's messages and writes
 * the session's news; the lifecycle is LockStream's.
 */
export function createSessionHandler(options: SessionHandlerOptions): (call: SessionCall) => void {
  let lastCallId = 0;
  return (call) => {
    lastCallId += 1;
    new SessionStream(call, options, lastCallId);
  };
}

const OPEN_FIRST = '`open` or `resume`';

class SessionStream extends LockStream<SessionRequest, SessionResponse> {
  readonly #maxRequests: number;

  constructor(call: SessionCall, options: SessionHandlerOptions, callId: number) {
    super(call, options, callId);
    this.#maxRequests = options.maxRequestsPerSession;
  }

  logBindings(): Bindings {
    return { sessionCallId: this.callId, peer: this.call.getPeer() };
  }

  protected counted(open: boolean): void {
    if (open) this.options.metrics.sessionOpened();
    else this.options.metrics.sessionClosed();
  }

  protected onMessage(message: SessionRequest): void {
    const kind = message.kind;
    switch (kind?.$case) {
      case 'open':
        this.#opening().#open(kind.value);
        return;
      case 'resume':
        this.#opening().#resume(kind.value);
        return;
      case 'acquire':
        this.#acquire(this.opened(OPEN_FIRST), kind.value, message);
        return;
      case 'release':
        this.opened(OPEN_FIRST).release(kind.value.requestId);
        return;
      case 'cancel':
        this.opened(OPEN_FIRST).cancel(kind.value.requestId);
        return;
      case 'setValue':
        this.opened(OPEN_FIRST).setValue(
          kind.value.requestId,
          kind.value.value,
          'set_value was sent before `acquired`: only a holder publishes a value (send it in `acquire` to publish it from the start)',
        );
        return;
      case 'downgrade':
        this.opened(OPEN_FIRST).downgrade(
          kind.value.requestId,
          'downgrade was sent before `acquired`: only a WRITE holder can downgrade',
        );
        return;
      case 'heartbeat':
        this.opened(OPEN_FIRST);
        return;
      case undefined:
        throw violation(
          'a SessionRequest must set one of open, resume, acquire, release, cancel, heartbeat, set_value, downgrade',
        );
    }
  }

  /** This stream, if it has not opened its session yet; a protocol violation otherwise. */
  #opening(): this {
    if (this.state !== 'opening') throw violation('`open` or `resume` may be sent only once per stream');
    return this;
  }

  #open(open: SessionOpen): void {
    const graceMs = open.resumeGrace ? durationToMs(open.resumeGrace, 'resume_grace') : 0;
    const intervalMs = heartbeatInterval(open.heartbeatInterval);
    const session = this.openSession('session', graceMs);
    this.#writeOpened(session);
    void this.attach(session, intervalMs);
    this.logger.debug({ graceMs: session.graceMs }, 'session opened');
  }

  #resume(resume: SessionResume): void {
    checkResumeToken(resume.resumeToken, 'opened');
    const intervalMs = heartbeatInterval(resume.heartbeatInterval);
    this.opening(
      this.options.sessions.resume(resume.resumeToken, 'session', this.caller?.name),
      (session) => {
        this.#writeOpened(session);
        void this.attach(session, intervalMs).then(() => {
          if (this.state === 'over' || !session.isAttached(this)) return;
          // After every request's state: a request not reported before `resumed` is unknown here.
          this.writer.write(0, { requestId: 0, kind: { $case: 'resumed', value: {} } });
          this.logger.debug({ requests: session.size }, 'session resumed');
        });
      },
    );
  }

  #writeOpened(session: LockSession): void {
    const { resumeToken, graceMs } = session;
    this.writer.write(0, {
      requestId: 0,
      kind: {
        $case: 'opened',
        value: {
          resumeToken: resumeToken ?? '',
          resumeGrace: resumeToken === undefined ? undefined : msToDuration(graceMs),
        },
      },
    });
  }

  /** Queues `acquire` (the value of `message`), or ends that request alone if it is refused. */
  #acquire(session: LockSession, acquire: SessionAcquire, message: SessionRequest): void {
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
        this.call.getPeer(),
      );
      // After the fields' own checks, which say more precisely what is too large.
      this.options.requestSize.check(message, '`acquire`');
      const request = this.admitted(asked);
      if (session.size >= this.#maxRequests) {
        throw new LockError(
          'RESOURCE_EXHAUSTED',
          `lock "${asked.name}": this session has ${session.size} requests; the server allows ${this.#maxRequests}`,
        );
      }
      session.acquire(id, request);
    } catch (error) {
      // A bad request fails alone: the session goes on.
      void this.tell(id, undefined, { kind: 'ended', error });
    }
  }

  tell(id: number, request: AcquireRequest | undefined, news: RequestNews): void | Promise<void> {
    const write = (kind: SessionResponse['kind'], written?: () => void): void =>
      this.writer.write(id, { requestId: id, kind }, written);
    switch (news.kind) {
      case 'waiting':
        this.writer.writeLatest(id, {
          requestId: id,
          kind: { $case: 'queued', value: { ahead: news.ahead } },
        });
        return;
      case 'granted':
        write({ $case: 'acquired', value: acquiredMessage(news.lease) });
        if (request) this.logRequest(id, request, 'granted', { token: news.lease.fencingToken.toString() });
        return;
      case 'confirmation':
        write(news.confirmed ? { $case: 'confirmed', value: {} } : { $case: 'inDoubt', value: {} });
        return;
      case 'revoke-requested': {
        const { reason, forceAt } = news.revoke;
        write({ $case: 'revokeRequested', value: { reason, forceAt } });
        return;
      }
      case 'value-published':
        write({ $case: 'valueSet', value: {} });
        return;
      case 'downgraded':
        write({ $case: 'downgraded', value: {} });
        return;
      case 'released':
        write({ $case: 'released', value: {} });
        if (request) this.logRequest(id, request, 'released', { token: news.lease.fencingToken.toString() });
        return;
      case 'ended':
      case 'lost': {
        const { code, details } =
          news.error === undefined
            ? { code: grpcStatus.OK, details: '' }
            : toCallStatus(news.error, this.logger);
        if (request) this.logRequest(id, request, 'ended', { status: grpcStatus[code], details });
        const ended: SessionResponse['kind'] = { $case: 'ended', value: { code, message: details } };
        if (news.kind === 'ended') {
          write(ended);
          return;
        }
        // A lost lock is freed for others once the client has been handed the news.
        return new Promise<void>((resolve) => write(ended, () => resolve()));
      }
    }
  }

  /** A debug line about one request, with its lock, mode and owner. */
  protected logRequest(
    id: number,
    request: AcquireRequest,
    msg: string,
    fields: Record<string, unknown>,
  ): void {
    if (!this.debug) return;
    this.logger.debug(
      { requestId: id, lock: request.name, mode: request.mode, owner: request.owner, ...fields },
      msg,
    );
  }

  protected get endedLine(): string {
    return 'session call ended';
  }

  protected heartbeatMessage(): SessionResponse {
    return HEARTBEAT;
  }

  protected endedBeforeOpening(): string {
    return 'the stream ended before an `open` message';
  }

  /** Why a half-closed session with requests not let go is kept for its grace. */
  protected keptForGrace(session: LockSession): LockError {
    return new LockError(
      'KEPT_FOR_GRACE',
      `the session was half-closed with ${session.unreleased} request(s) neither released nor cancelled; it is kept for its resume grace (${session.graceMs} ms) as after a cancel: resume it and send \`release\` or \`cancel\` for each, then half-close`,
    );
  }

  protected replacedStatus(): CallStatus {
    return { code: grpcStatus.ABORTED, details: 'the session was resumed on another stream' };
  }
}

const HEARTBEAT: SessionResponse = { requestId: 0, kind: { $case: 'heartbeat', value: {} } };
