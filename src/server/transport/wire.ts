/*
 * A lock RPC's edge: what a LockStream needs of the RPC it carries (a Wire), in the Session
 * RPC's vocabulary, which the stream speaks: each message read into a StreamCommand, each piece
 * of news written as the RPC's message.
 */
import type { Bindings, Logger } from 'pino';
import type { SessionResponse } from '../../gen/lockstream/v1/lockstream.js';
import type { AcquireRequest, LockSession, SessionKind } from '../engine/index.js';
import { LockError } from '../lock-error.js';
import type { ServerDuplexStream } from '@grpc/grpc-js';
import type { CallStatus } from './error-status.js';
import type { LockSessions } from '../engine/index.js';
import type { Metrics } from '../observability/metrics.js';
import type { Gate } from '../security/gate.js';
import type { OpenStreams } from './open-streams.js';
import type { RequestSizeLimit } from './request-size.js';

/** What a lock stream (either RPC) needs from the server. */
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

/** What a Wire sees of the stream it reads for (a LockStream): enough to check a message. */
export interface WireStream<Req, Res> {
  readonly call: ServerDuplexStream<Req, Res>;
  readonly options: LockStreamOptions;
  /** Numbers the calls of one RPC, for the logs. */
  readonly callId: number;
  /** Before its session, open, half-closed and letting go, over. */
  readonly state: 'opening' | 'open' | 'closing' | 'over';
  /** The request the stream's log lines name, once known. */
  loggedRequest: AcquireRequest | undefined;
  /** The session of an open stream; a protocol violation (naming `what` comes first) before it has one. */
  opened(what: string): LockSession;
}

/** An `acquire`, as the stream carries it out (see StreamCommand). */
export interface AcquireCommand {
  readonly kind: 'acquire';
  /** The request's id in its session (an Acquire stream's is ONLY). */
  readonly id: number;
  /** What the client asked for, its fields checked; the caller's access is checked next. */
  readonly asked: AcquireRequest;
  /** The message that carried it, and what to call it, for the server's limit on its size. */
  readonly message: object;
  readonly what: string;
  /** Set for an Acquire stream's `start`: the session it opens (a refusal then ends the call). */
  readonly opens?: { readonly graceMs: number; readonly heartbeatIntervalMs: number | undefined };
  /** Requests the session may have at once (a Session stream's). */
  readonly maxRequests?: number;
}

/**
 * What a client's message asks of its stream, in the Session RPC's terms, whichever RPC carried
 * it: a Wire reads each message into one, and the stream carries it out (carryOut).
 * `refused`: an `acquire` whose fields are wrong, which ends that request alone.
 */
export type StreamCommand =
  | { readonly kind: 'open'; readonly graceMs: number; readonly heartbeatIntervalMs: number | undefined }
  | {
      readonly kind: 'resume';
      readonly resumeToken: string;
      readonly heartbeatIntervalMs: number | undefined;
    }
  | AcquireCommand
  | { readonly kind: 'refused'; readonly id: number; readonly error: unknown }
  | { readonly kind: 'release' | 'cancel'; readonly id: number }
  | { readonly kind: 'set-value'; readonly id: number; readonly value: Uint8Array; readonly early: string }
  | { readonly kind: 'downgrade'; readonly id: number; readonly early: string }
  | { readonly kind: 'heartbeat' };

/** A heartbeat from the client: it asks nothing more of the stream. */
export const HEARTBEAT_HEARD: StreamCommand = { kind: 'heartbeat' };

/** What the session says to its client, in the Session RPC's words (a SessionResponse's kind). */
export type SessionNews = NonNullable<SessionResponse['kind']>;

/**
 * One lock RPC's messages at the edge of a LockStream. The stream speaks the Session RPC's
 * vocabulary (an Acquire stream is a session of one request): a wire reads its RPC's messages
 * into the stream's session, and writes the session's news as its RPC's messages.
 */
export interface Wire<Req, Res> {
  /** Which RPC: the kind of session it opens, and what the metrics count it as. */
  readonly rpc: SessionKind;
  /**
   * What a message from the client asks of the stream (it is opening or open), in the Session
   * RPC's terms; throwing (a protocol violation) ends the call.
   */
  read(message: Req, stream: WireStream<Req, Res>): StreamCommand;
  /**
   * The message that tells the client `news` about request `id` (0: the session); undefined
   * where this RPC has none (Acquire has no `resumed`, and `opened` only with a resume token).
   */
  message(id: number, news: SessionNews): Res | undefined;
  /**
   * Whether the stream is its one request (Acquire): then the request's end is the call's,
   * with its status, rather than an `ended` message.
   */
  readonly endsWithRequest: boolean;
  /** The heartbeat message of this RPC. */
  readonly heartbeat: Res;
  /** What the stream's log lines say of the call (maybe asked while it constructs). */
  logBindings(stream: WireStream<Req, Res>): Bindings;
  /** What a debug line about one request says of it, beyond the stream's bindings. */
  requestFields(id: number, request: AcquireRequest): Record<string, unknown>;
  /** Why a half-close with requests not let go is kept for the grace. */
  keptForGrace(session: LockSession): LockError;
  /** What a client that half-closes before its first message is told. */
  readonly endedBeforeOpening: string;
  /** The debug line that says how the call ended. */
  readonly endedLine: string;
  /** A resuming stream took the session over: how this one ends. */
  replacedStatus(session: LockSession | undefined): CallStatus;
}

/** The one request of an Acquire stream's session (see LockStream.resume: its log lines name it). */
export const ONLY = 1;

/** A protocol violation by the client: the call ends with INVALID_ARGUMENT. */
export function violation(message: string): LockError {
  return new LockError('INVALID_ARGUMENT', message);
}
