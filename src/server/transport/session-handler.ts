/*
 * The Session RPC's handler and its Wire: many lock requests over one stream on one session, each
 * named by the client's request id.
 */
import { status as grpcStatus, type ServerDuplexStream } from '@grpc/grpc-js';
import type { Bindings } from 'pino';
import type {
  SessionAcquire,
  SessionOpen,
  SessionRequest,
  SessionResponse,
  SessionResume,
} from '../../gen/lockstream/v1/lockstream.js';
import type { AcquireRequest, LockSession } from '../engine/index.js';
import { LockError } from '../lock-error.js';
import { checkResumeToken, durationToMs, heartbeatInterval, toAcquireRequest } from './acquire-request.js';
import type { CallStatus } from './error-status.js';
import { LockStream } from './lock-stream.js';
import { violation, type LockStreamOptions, type SessionNews, type Wire, type WireStream } from './wire.js';

type SessionCall = ServerDuplexStream<SessionRequest, SessionResponse>;
type SessionStream = WireStream<SessionRequest, SessionResponse>;

export interface SessionHandlerOptions extends LockStreamOptions {
  /** Requests one session may have at once; more are refused with RESOURCE_EXHAUSTED. */
  readonly maxRequestsPerSession: number;
}

/**
 * The Session RPC: many lock requests over one stream, each with the client's request id, on
 * one LockSession. The stream (LockStream) speaks this RPC's vocabulary already: its wire reads
 * the client's messages and writes the session's news as they are.
 */
export function createSessionHandler(options: SessionHandlerOptions): (call: SessionCall) => void {
  const wire = sessionWire(options.maxRequestsPerSession);
  let lastCallId = 0;
  return (call) => {
    lastCallId += 1;
    new LockStream(call, wire, options, lastCallId);
  };
}

const OPEN_FIRST = '`open` or `resume`';

/** The Session RPC's messages at the edge of its stream. */
function sessionWire(maxRequests: number): Wire<SessionRequest, SessionResponse> {
  return {
    rpc: 'session',
    endsWithRequest: false,
    heartbeat: HEARTBEAT,
    endedBeforeOpening: 'the stream ended before an `open` message',
    endedLine: 'session call ended',

    read(message: SessionRequest, stream: SessionStream): void {
      const kind = message.kind;
      switch (kind?.$case) {
        case 'open':
          open(opening(stream), kind.value);
          return;
        case 'resume':
          resume(opening(stream), kind.value);
          return;
        case 'acquire':
          acquire(stream, stream.opened(OPEN_FIRST), kind.value, message, maxRequests);
          return;
        case 'release':
          stream.opened(OPEN_FIRST).release(kind.value.requestId);
          return;
        case 'cancel':
          stream.opened(OPEN_FIRST).cancel(kind.value.requestId);
          return;
        case 'setValue':
          stream
            .opened(OPEN_FIRST)
            .setValue(
              kind.value.requestId,
              kind.value.value,
              'set_value was sent before `acquired`: only a holder publishes a value (send it in `acquire` to publish it from the start)',
            );
          return;
        case 'downgrade':
          stream
            .opened(OPEN_FIRST)
            .downgrade(
              kind.value.requestId,
              'downgrade was sent before `acquired`: only a WRITE holder can downgrade',
            );
          return;
        case 'heartbeat':
          stream.opened(OPEN_FIRST);
          return;
        case undefined:
          throw violation(
            'a SessionRequest must set one of open, resume, acquire, release, cancel, heartbeat, set_value, downgrade',
          );
      }
    },

    message(id: number, news: SessionNews): SessionResponse {
      return { requestId: id, kind: news };
    },

    logBindings(stream: SessionStream): Bindings {
      return { sessionCallId: stream.callId, peer: stream.call.getPeer() };
    },

    requestFields(id: number, request: AcquireRequest): Record<string, unknown> {
      return { requestId: id, lock: request.name, mode: request.mode, owner: request.owner };
    },

    /** Why a half-closed session with requests not let go is kept for its grace. */
    keptForGrace(session: LockSession): LockError {
      return new LockError(
        'KEPT_FOR_GRACE',
        `the session was half-closed with ${session.unreleased} request(s) neither released nor cancelled; it is kept for its resume grace (${session.graceMs} ms) as after a cancel: resume it and send \`release\` or \`cancel\` for each, then half-close`,
      );
    },

    replacedStatus(): CallStatus {
      return { code: grpcStatus.ABORTED, details: 'the session was resumed on another stream' };
    },
  };
}

/** `stream`, if it has not opened its session yet; a protocol violation otherwise. */
function opening(stream: SessionStream): SessionStream {
  if (stream.state !== 'opening') throw violation('`open` or `resume` may be sent only once per stream');
  return stream;
}

function open(stream: SessionStream, open: SessionOpen): void {
  const graceMs = open.resumeGrace ? durationToMs(open.resumeGrace, 'resume_grace') : 0;
  stream.open(graceMs, heartbeatInterval(open.heartbeatInterval));
}

function resume(stream: SessionStream, resume: SessionResume): void {
  checkResumeToken(resume.resumeToken, 'opened');
  stream.resume(resume.resumeToken, heartbeatInterval(resume.heartbeatInterval));
}

/** Queues `acquire` (the value of `message`), or ends that request alone if it is refused. */
function acquire(
  stream: SessionStream,
  session: LockSession,
  acquire: SessionAcquire,
  message: SessionRequest,
  maxRequests: number,
): void {
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
      stream.call.getPeer(),
    );
    // After the fields' own checks, which say more precisely what is too large.
    stream.options.requestSize.check(message, '`acquire`');
    const request = stream.admitted(asked);
    if (session.size >= maxRequests) {
      throw new LockError(
        'RESOURCE_EXHAUSTED',
        `lock "${asked.name}": this session has ${session.size} requests; the server allows ${maxRequests}`,
      );
    }
    session.acquire(id, request);
  } catch (error) {
    // A bad request fails alone: the session goes on.
    void stream.tell(id, undefined, { kind: 'ended', error });
  }
}

const HEARTBEAT: SessionResponse = { requestId: 0, kind: { $case: 'heartbeat', value: {} } };
