/*
 * The Acquire RPC's Wire: its messages translated to and from the Session RPC's (an Acquire
 * stream is a session of one request).
 */
import { status as grpcStatus } from '@grpc/grpc-js';
import type { Bindings } from 'pino';
import type { AcquireRequest as WireRequest, AcquireResponse } from '../../gen/lockstream/v1/lockstream.js';
import type { LockSession } from '../engine/index.js';
import { LockError } from '../lock-error.js';
import { resumeAsked, sessionAsked, toAcquireRequest } from './acquire-request.js';
import type { CallStatus } from './error-status.js';
import {
  HEARTBEAT_HEARD,
  ONLY,
  violation,
  type SessionNews,
  type StreamCommand,
  type Wire,
  type WireStream,
} from './wire.js';

type AcquireStream = WireStream<WireRequest, AcquireResponse>;

const RELEASE: StreamCommand = { kind: 'release', id: ONLY };

/**
 * The Acquire RPC's messages at the edge of its stream, translated to and from the Session's:
 * `start` opens a session and acquires its request 1, `resume` resumes it, `release`,
 * `set_value` and `downgrade` are request 1's; the Session's news of request 1 go out as
 * Acquire messages of the same names, and its end is the call's, with its status. So the lock
 * is held for as long as the stream: `release` or half-close deletes the node and ends the call
 * with OK; shutdown deletes it too. An abnormal end (cancel, broken connection, missed
 * heartbeats) detaches the session, which keeps the request for its resume grace (none by
 * default: then it is released at once).
 */
export const ACQUIRE_WIRE: Wire<WireRequest, AcquireResponse> = {
  rpc: 'acquire',
  endsWithRequest: true,
  heartbeat: { kind: { $case: 'heartbeat', value: {} } },
  endedBeforeOpening: 'the stream ended before a `start` message',
  endedLine: 'ended',

  read(message: WireRequest, stream: AcquireStream): StreamCommand {
    if (stream.state === 'opening') return opening(message, stream.call.getPeer());
    stream.opened('`start` or `resume`');
    const kind = message.kind;
    switch (kind?.$case) {
      case 'release':
        return RELEASE;
      case 'setValue':
        return {
          kind: 'set-value',
          id: ONLY,
          value: kind.value.value,
          early:
            'set_value was sent before `acquired`: only a holder publishes a value (send it in `start` to publish it from the start)',
        };
      case 'downgrade':
        return {
          kind: 'downgrade',
          id: ONLY,
          early: 'downgrade was sent before `acquired`: only a WRITE holder can downgrade',
        };
      case 'heartbeat':
        return HEARTBEAT_HEARD;
      case 'start':
      case 'resume':
      case undefined:
        throw violation('`start` or `resume` may be sent only once per stream');
    }
  },

  message(_id: number, news: SessionNews): AcquireResponse | undefined {
    if (news.$case === 'opened') {
      const { resumeToken, resumeGrace } = news.value;
      return resumeToken === ''
        ? undefined
        : { kind: { $case: 'resumable', value: { resumeToken, resumeGrace } } };
    }
    // An Acquire stream has no `resumed`, and ends with its request (see Wire.endsWithRequest).
    if (news.$case === 'resumed' || news.$case === 'ended') return undefined;
    // The other news have the same message on both RPCs.
    return { kind: news };
  },

  logBindings(stream: AcquireStream): Bindings {
    const call = { callId: stream.callId, peer: stream.call.getPeer() };
    const request = stream.loggedRequest;
    return request ? { ...call, lock: request.name, mode: request.mode, owner: request.owner } : call;
  },

  /** The stream's log lines name its one request already. */
  requestFields(): Record<string, unknown> {
    return {};
  },

  /**
   * A request with a resume grace is released only by `release`. A bare half-close cannot be
   * told from a cancel by the frames alone: a gRPC client that cancels may end its side of the
   * stream and send the reset later (grpc-js does, after its pending write completes), or never
   * (when it closes its connection at once). So it is an abnormal end, the same whichever it was:
   * the request is kept for its grace, and a client still listening is told why.
   */
  keptForGrace(session: LockSession): LockError {
    const name = session.request(ONLY)?.name ?? '';
    return new LockError(
      'KEPT_FOR_GRACE',
      `lock "${name}": the stream was half-closed without \`release\`; the request is kept for its resume grace (${session.graceMs} ms) as after a cancel: resume it and send \`release\` to let go`,
    );
  },

  replacedStatus(session: LockSession | undefined): CallStatus {
    const name = session?.request(ONLY)?.name ?? '';
    return { code: grpcStatus.ABORTED, details: `lock "${name}" was resumed on another stream` };
  },
};

/** The first message: `start` opens a session and acquires its one request; `resume` resumes it. */
function opening(first: WireRequest | null, peer: string): StreamCommand {
  switch (first?.kind?.$case) {
    case 'start': {
      const start = first.kind.value;
      return {
        kind: 'acquire',
        id: ONLY,
        asked: toAcquireRequest(start, peer),
        message: first,
        what: '`start`',
        opens: sessionAsked(start),
      };
    }
    case 'resume':
      return resumeAsked(first.kind.value);
    case 'release':
    case 'heartbeat':
    case 'setValue':
    case 'downgrade':
    case undefined:
      throw violation(
        first ? 'the first message must be `start` or `resume`' : 'the stream ended before a `start` message',
      );
  }
}
