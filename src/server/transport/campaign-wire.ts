/*
 * The Campaign RPC's Wire: a candidate's messages translated to and from the Session RPC's (a
 * Campaign stream is a session of one request, in the election's candidate mode).
 */
import { status as grpcStatus } from '@grpc/grpc-js';
import type { Bindings } from 'pino';
import type { CampaignRequest, CampaignResponse, CampaignStart } from '../../gen/lockstream/v1/election.js';
import type { AcquireRequest, LockSession } from '../engine/index.js';
import { LockError } from '../lock-error.js';
import { durationToMs, resumeAsked, sessionAsked, validateLabel, validateValue } from './acquire-request.js';
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

type CampaignStream = WireStream<CampaignRequest, CampaignResponse>;

const RESIGN: StreamCommand = { kind: 'release', id: ONLY };

/**
 * The Campaign RPC's messages at the edge of its stream: `start` opens a session and queues its
 * request 1 as a candidate, `resume` resumes it, `resign` releases it; the session's news of
 * request 1 go out as Campaign messages (`acquired` as `elected`, with the fencing token as the
 * term; `released` as `resigned`), and its end is the call's. Leadership is held as a lock is,
 * for as long as the stream (or its resume grace).
 */
export const CAMPAIGN_WIRE: Wire<CampaignRequest, CampaignResponse> = {
  rpc: 'campaign',
  endsWithRequest: true,
  heartbeat: { kind: { $case: 'heartbeat', value: {} } },
  endedBeforeOpening: 'the stream ended before a `start` message',
  endedLine: 'campaign ended',

  read(message: CampaignRequest, stream: CampaignStream): StreamCommand {
    if (stream.state === 'opening') return opening(message, stream.call.getPeer());
    stream.opened('`start` or `resume`');
    switch (message.kind?.$case) {
      case 'resign':
        return RESIGN;
      case 'heartbeat':
        return HEARTBEAT_HEARD;
      case 'start':
      case 'resume':
      case undefined:
        throw violation('`start` or `resume` may be sent only once per stream');
    }
  },

  message(_id: number, news: SessionNews): CampaignResponse | undefined {
    switch (news.$case) {
      case 'opened': {
        const { resumeToken, resumeGrace } = news.value;
        return resumeToken === ''
          ? undefined
          : { kind: { $case: 'resumable', value: { resumeToken, resumeGrace } } };
      }
      case 'queued':
        return { kind: { $case: 'queued', value: { ahead: news.value.ahead } } };
      case 'acquired':
        return { kind: { $case: 'elected', value: { term: news.value.fencingToken } } };
      case 'released':
        return { kind: { $case: 'resigned', value: {} } };
      case 'inDoubt':
        return { kind: { $case: 'inDoubt', value: {} } };
      case 'confirmed':
        return { kind: { $case: 'confirmed', value: {} } };
      case 'heartbeat':
        return { kind: { $case: 'heartbeat', value: {} } };
      case 'revokeRequested':
        return { kind: { $case: 'resignRequested', value: news.value } };
      // A Campaign stream has no `resumed`, ends with its request, and neither publishes a
      // value nor downgrades (Proclaim is its own RPC).
      case 'resumed':
      case 'ended':
      case 'valueSet':
      case 'downgraded':
        return undefined;
    }
  },

  logBindings(stream: CampaignStream): Bindings {
    const call = { callId: stream.callId, peer: stream.call.getPeer() };
    const request = stream.loggedRequest;
    return request ? { ...call, election: request.name, owner: request.owner } : call;
  },

  requestFields(): Record<string, unknown> {
    return {};
  },

  /** As on Acquire (see ACQUIRE_WIRE.keptForGrace): with a grace, only `resign` resigns. */
  keptForGrace(session: LockSession): LockError {
    const name = session.request(ONLY)?.name ?? '';
    return new LockError(
      'KEPT_FOR_GRACE',
      `election "${name}": the stream was half-closed without \`resign\`; the candidate is kept for its resume grace (${session.graceMs} ms) as after a cancel: resume it and send \`resign\` to step down`,
    );
  },

  replacedStatus(session: LockSession | undefined): CallStatus {
    const name = session?.request(ONLY)?.name ?? '';
    return {
      code: grpcStatus.ABORTED,
      details: `election "${name}": the candidate was resumed on another stream`,
    };
  },
};

/** The first message: `start` opens a session and queues its candidate; `resume` resumes it. */
function opening(first: CampaignRequest, peer: string): StreamCommand {
  switch (first.kind?.$case) {
    case 'start': {
      const start = first.kind.value;
      return {
        kind: 'acquire',
        id: ONLY,
        asked: toCandidate(start, peer),
        message: first,
        what: '`start`',
        opens: sessionAsked(start),
      };
    }
    case 'resume':
      return resumeAsked(first.kind.value);
    case 'resign':
    case 'heartbeat':
    case undefined:
      throw violation('the first message must be `start` or `resume`');
  }
}

/** A candidate as the engine's request, its fields checked (the name by the engine). */
function toCandidate(start: CampaignStart, peer: string): AcquireRequest {
  validateLabel('owner', start.owner);
  validateValue('value', start.value);
  return {
    name: start.name,
    mode: 'candidate',
    waitTimeoutMs:
      start.waitTimeout === undefined ? undefined : durationToMs(start.waitTimeout, 'wait_timeout'),
    owner: start.owner,
    peer,
    value: start.value.byteLength === 0 ? undefined : start.value,
  };
}
