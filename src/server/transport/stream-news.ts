/*
 * What a lock stream tells its client: the session's news (RequestNews, its opening and resume)
 * said in the Session RPC's words and written as its RPC's messages, in order, through the
 * stream's one writer; the call's end, OK or with a status; and the log lines that say so.
 */
import { Metadata, status as grpcStatus, type ServerDuplexStream } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { REQUEST_STATE_KEY } from '../../common/request-state.js';
import type { AcquireRequest, LockSession, RequestNews } from '../engine/index.js';
import { acquiredMessage, msToDuration } from './acquire-request.js';
import { toCallStatus, type CallStatus } from './error-status.js';
import { StreamWriter, batchedByTurn } from './stream-writer.js';
import type { SessionNews, Wire } from './wire.js';

/** What the news needs of the stream it is written on (a LockStream). */
export interface NewsStream {
  /** The stream's logger, made when first asked for: asked only when a line is logged. */
  readonly logger: Logger;
}

/**
 * The news of one stream, written as its RPC's messages (its Wire says each) by the stream's one
 * writer: where a request waits (only the newest place matters), grants, confirmations,
 * revocations, values, downgrades, releases and ends, the session's opening and resume, and
 * heartbeats; then the call's end. The stream decides when: an Acquire stream's request that
 * ends ends the call (see LockStream.tell).
 */
export class StreamNews<Req, Res> {
  readonly #call: ServerDuplexStream<Req, Res>;
  readonly #wire: Wire<Req, Res>;
  readonly #writer: StreamWriter<Res>;
  readonly #stream: NewsStream;
  /** Per-request events are logged at debug level only; nothing is built for them otherwise. */
  readonly #debug: boolean;

  constructor(call: ServerDuplexStream<Req, Res>, wire: Wire<Req, Res>, stream: NewsStream, debug: boolean) {
    this.#call = call;
    this.#wire = wire;
    this.#writer = new StreamWriter(batchedByTurn(call));
    this.#stream = stream;
    this.#debug = debug;
  }

  /** A heartbeat: only the newest waits while the stream is backed up. */
  heartbeat(): void {
    this.#writer.writeLatest(0, this.#wire.heartbeat);
  }

  /** The session is the stream's: `opened`, with its resume token if it has a grace. */
  opened(session: LockSession): void {
    const { resumeToken, graceMs } = session;
    this.#send(0, {
      $case: 'opened',
      value: {
        resumeToken: resumeToken ?? '',
        resumeGrace: resumeToken === undefined ? undefined : msToDuration(graceMs),
      },
    });
  }

  /** The resumed session has told where every request stands. */
  resumed(): void {
    this.#send(0, RESUMED);
  }

  /**
   * The session's news of request `id`, in the Session RPC's words: written as the wire's
   * messages. For a lost lock, resolves once the client has been handed the news (it is freed
   * for others only then).
   */
  tell(id: number, request: AcquireRequest | undefined, news: RequestNews): void | Promise<void> {
    switch (news.kind) {
      case 'waiting': {
        const message = this.#wire.message(id, { $case: 'queued', value: { ahead: news.ahead } });
        if (message !== undefined) this.#writer.writeLatest(id, message);
        return;
      }
      case 'granted':
        this.#send(id, { $case: 'acquired', value: acquiredMessage(news.lease) });
        if (request) this.#logRequest(id, request, 'granted', { token: news.lease.fencingToken.toString() });
        return;
      case 'confirmation':
        this.#send(id, news.confirmed ? { $case: 'confirmed', value: {} } : { $case: 'inDoubt', value: {} });
        return;
      case 'revoke-requested': {
        const { reason, forceAt } = news.revoke;
        this.#send(id, { $case: 'revokeRequested', value: { reason, forceAt } });
        // At info level: a revocation is an operator's act, worth a line whatever the level.
        this.#stream.logger.info(
          { ...(request && this.#wire.requestFields(id, request)), reason, forceAt },
          'revocation requested',
        );
        return;
      }
      case 'value-published':
        this.#send(id, { $case: 'valueSet', value: {} });
        return;
      case 'downgraded':
        this.#send(id, { $case: 'downgraded', value: {} });
        return;
      case 'released':
        this.#send(id, { $case: 'released', value: {} });
        if (request) this.#logRequest(id, request, 'released', { token: news.lease.fencingToken.toString() });
        return;
      case 'ended':
      case 'lost':
        return this.#ended(id, request, news);
    }
  }

  /** Request `id` ended (`lost`: it held, and lost the lock): `ended`, with its status. */
  #ended(
    id: number,
    request: AcquireRequest | undefined,
    news: Extract<RequestNews, { kind: 'ended' | 'lost' }>,
  ): void | Promise<void> {
    const { code, details } =
      news.error === undefined
        ? { code: grpcStatus.OK, details: '' }
        : toCallStatus(news.error, this.#stream.logger);
    if (request) this.#logRequest(id, request, 'ended', { status: grpcStatus[code], details });
    const ended: SessionNews = { $case: 'ended', value: { code, message: details } };
    if (news.kind === 'ended') {
      this.#send(id, ended);
      return;
    }
    // A lost lock is freed for others once the client has been handed the news.
    return new Promise<void>((resolve) => this.#send(id, ended, resolve));
  }

  /** The call ends with OK, after what was written before. */
  ok(): void {
    this.#call.end();
    this.#stream.logger.debug({ status: 'OK' }, this.#wire.endedLine);
  }

  /** The call ends with `status`; `requestEnded` tells the client not to try a resume. */
  status(status: CallStatus, requestEnded: boolean): void {
    this.#stream.logger.debug(
      { status: grpcStatus[status.code], details: status.details },
      this.#wire.endedLine,
    );
    const metadata = new Metadata();
    if (requestEnded) metadata.set(REQUEST_STATE_KEY, 'ended');
    this.#call.emit('error', { ...status, metadata });
  }

  /**
   * Resolves once the call's status has gone to HTTP/2 (undefined if it has): grpc-js reports
   * 'cancelled' right after it hands the status over.
   */
  statusSent(): Promise<void> | undefined {
    const call = this.#call;
    return call.cancelled
      ? undefined
      : new Promise<void>((resolve) => call.once('cancelled', () => resolve()));
  }

  /** The message for `news` about request `id`, if this RPC has one, written in order. */
  #send(id: number, news: SessionNews, written?: () => void): void {
    const message = this.#wire.message(id, news);
    if (message !== undefined) this.#writer.write(id, message, written);
    else written?.();
  }

  /** A debug line about one request. */
  #logRequest(id: number, request: AcquireRequest, msg: string, fields: Record<string, unknown>): void {
    if (!this.#debug) return;
    this.#stream.logger.debug({ ...this.#wire.requestFields(id, request), ...fields }, msg);
  }
}

const RESUMED: SessionNews = { $case: 'resumed', value: {} };

/** How a stream ends whose session moved to another instance (see LockStream.handedOver). */
export const HANDED_OVER: CallStatus = {
  code: grpcStatus.UNAVAILABLE,
  details: 'the session moved to another lockstream instance: resume it, on any instance',
};
