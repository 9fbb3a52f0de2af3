/*
 * The Session RPC's Wire: its messages read into the stream's commands and its news written as
 * they are (many lock requests over one stream on one session, each named by the client's
 * request id).
 */
import { status as grpcStatus } from '@grpc/grpc-js';
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
import { resumeAsked, sessionAsked, toAcquireRequest } from './acquire-request.js';
import type { CallStatus } from './error-status.js';
import {
  HEARTBEAT_HEARD,
  violation,
  type SessionNews,
  type StreamCommand,
  type Wire,
  type WireStream,
} from './wire.js';

type SessionStream = WireStream<SessionRequest, SessionResponse>;

const OPEN_FIRST = '`open` or `resume`';

/**
 * The Session RPC's messages at the edge of its stream: many lock requests over one stream on
 * one LockSession, each named by the client's request id. The stream speaks this RPC's
 * vocabulary already: its wire reads the client's messages and writes the session's news as
 * they are. `maxRequests`: requests one session may have at once; more are refused with
 * RESOURCE_EXHAUSTED.
 */
export function sessionWire(maxRequests: number): Wire<SessionRequest, SessionResponse> {
  return {
    rpc: 'session',
    endsWithRequest: false,
    heartbeat: HEARTBEAT,
    endedBeforeOpening: 'the stream ended before an `open` message',
    endedLine: 'session call ended',

    read(message: SessionRequest, stream: SessionStream): StreamCommand {
      const kind = message.kind;
      switch (kind?.$case) {
        case 'open':
          notOpenYet(stream);
          return open(kind.value);
        case 'resume':
          notOpenYet(stream);
          return resume(kind.value);
        case 'acquire':
          return acquire(stream, kind.value, message, maxRequests);
        case 'release':
          stream.opened(OPEN_FIRST);
          return { kind: 'release', id: kind.value.requestId };
        case 'cancel':
          stream.opened(OPEN_FIRST);
          return { kind: 'cancel', id: kind.value.requestId };
        case 'setValue':
          stream.opened(OPEN_FIRST);
          return {
            kind: 'set-value',
            id: kind.value.requestId,
            value: kind.value.value,
            early:
              'set_value was sent before `acquired`: only a holder publishes a value (send it in `acquire` to publish it from the start)',
          };
        case 'downgrade':
          stream.opened(OPEN_FIRST);
          return {
            kind: 'downgrade',
            id: kind.value.requestId,
            early: 'downgrade was sent before `acquired`: only a WRITE holder can downgrade',
          };
        case 'heartbeat':
          stream.opened(OPEN_FIRST);
          return HEARTBEAT_HEARD;
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

/** A protocol violation unless `stream` has not opened its session yet. */
function notOpenYet(stream: SessionStream): void {
  if (stream.state !== 'opening') throw violation('`open` or `resume` may be sent only once per stream');
}

function open(open: SessionOpen): StreamCommand {
  return { kind: 'open', ...sessionAsked(open) };
}

function resume(resume: SessionResume): StreamCommand {
  return resumeAsked(resume, 'opened');
}

/**
 * An `acquire` (the value of `message`), its fields read and checked; refused (that request
 * alone ends, the session goes on) when one is wrong.
 */
function acquire(
  stream: SessionStream,
  acquire: SessionAcquire,
  message: SessionRequest,
  maxRequests: number,
): StreamCommand {
  const session = stream.opened(OPEN_FIRST);
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
    return { kind: 'acquire', id, asked, message, what: '`acquire`', maxRequests };
  } catch (error) {
    return { kind: 'refused', id, error };
  }
}

const HEARTBEAT: SessionResponse = { requestId: 0, kind: { $case: 'heartbeat', value: {} } };
