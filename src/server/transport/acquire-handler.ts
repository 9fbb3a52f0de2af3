import { status as grpcStatus, type ServerDuplexStream } from '@grpc/grpc-js';
import type { Bindings } from 'pino';
import type { AcquireRequest as WireRequest, AcquireResponse } from '../../gen/lockstream/v1/lockstream.js';
import type { AcquireRequest, LockSession, RequestNews } from '../engine/index.js';
import { LockError } from '../lock-error.js';
import { acquiredMessage, msToDuration, toStreamOpening } from './acquire-request.js';
import { toCallStatus, type CallStatus } from './error-status.js';
import { LockStream, violation, type LockStreamOptions } from './lock-stream.js';

type AcquireCall = ServerDuplexStream<WireRequest, AcquireResponse>;

/** The one request of an Acquire stream's session. */
const ONLY = 1;

/**
 * The Acquire RPC: one lock request on a stream, as a session of one request. Read `start` (or
 * `resume`), report `queued` and `acquired`, and hold the lock for as long as the stream:
 * `release` or half-close deletes the node and ends the call with OK; shutdown deletes it too.
 * An abnormal end (cancel, broken connection, missed heartbeats) detaches the session, which
 * keeps the request for its resume grace (none by default: then it is released at once).
 */
export function createAcquireHandler(options: LockStreamOptions): (call: AcquireCall) => void {
  let lastCallId = 0;
  return (call) => {
    lastCallId += 1;
    new AcquireStream(call, options, lastCallId);
  };
}

class AcquireStream extends LockStream<WireRequest, AcquireResponse> {
  /**
   * The request the stream's log lines name, once known. Not a #private field: it may be read
   * (as undefined) while the base class constructs, before a subclass's own fields exist.
   */
  protected loggedRequest: AcquireRequest | undefined;

  logBindings(): Bindings {
    const call = { callId: this.callId, peer: this.call.getPeer() };
    const request = this.loggedRequest;
    return request ? { ...call, lock: request.name, mode: request.mode, owner: request.owner } : call;
  }

  protected counted(open: boolean): void {
    if (open) this.options.metrics.streamOpened();
    else this.options.metrics.streamClosed();
  }

  protected onMessage(message: WireRequest): void {
    if (this.state === 'opening') {
      this.#open(message);
      return;
    }
    const session = this.opened('`start` or `resume`');
    const kind = message.kind;
    switch (kind?.$case) {
      case 'release':
        session.release(ONLY);
        return;
      case 'setValue':
        session.setValue(
          ONLY,
          kind.value.value,
          'set_value was sent before `acquired`: only a holder publishes a value (send it in `start` to publish it from the start)',
        );
        return;
      case 'downgrade':
        session.downgrade(ONLY, 'downgrade was sent before `acquired`: only a WRITE holder can downgrade');
        return;
      case 'heartbeat':
        return;
      case 'start':
      case 'resume':
      case undefined:
        throw violation('`start` or `resume` may be sent only once per stream');
    }
  }

  /** Makes (or resumes) the session of the request the first message asks for. */
  #open(first: WireRequest): void {
    const opening = toStreamOpening(first, this.call.getPeer());
    if (opening.kind === 'start') {
      this.options.requestSize.check(first, '`start`');
      const request = this.admitted(opening.request);
      this.#logRequest(request);
      const session = this.openSession('acquire', opening.resumeGraceMs);
      this.#opened(session, opening.heartbeatIntervalMs);
      session.acquire(ONLY, request);
      return;
    }
    this.opening(
      this.options.sessions.resume(opening.resumeToken, 'acquire', this.caller?.name),
      (session) => {
        this.#logRequest(session.request(ONLY) ?? { name: '', mode: 'mutex' });
        this.#opened(session, opening.heartbeatIntervalMs);
      },
    );
  }

  /** The stream's log lines name its request from now on (see logBindings). */
  #logRequest(request: AcquireRequest): void {
    this.loggedRequest = request;
  }

  #opened(session: LockSession, heartbeatIntervalMs: number | undefined): void {
    if (session.resumeToken !== undefined) {
      const resumeGrace = msToDuration(session.graceMs);
      this.writer.write(ONLY, {
        kind: { $case: 'resumable', value: { resumeToken: session.resumeToken, resumeGrace } },
      });
    }
    void this.attach(session, heartbeatIntervalMs);
  }

  protected get endedLine(): string {
    return 'ended';
  }

  tell(_id: number, _request: AcquireRequest, news: RequestNews): void | Promise<void> {
    switch (news.kind) {
      case 'waiting':
        this.writer.writeLatest(ONLY, { kind: { $case: 'queued', value: { ahead: news.ahead } } });
        return;
      case 'granted':
        this.writer.write(ONLY, { kind: { $case: 'acquired', value: acquiredMessage(news.lease) } });
        this.logger.debug({ token: news.lease.fencingToken.toString() }, 'granted');
        return;
      case 'confirmation':
        this.writer.write(ONLY, {
          kind: news.confirmed ? { $case: 'confirmed', value: {} } : { $case: 'inDoubt', value: {} },
        });
        return;
      case 'revoke-requested': {
        const { reason, forceAt } = news.revoke;
        this.writer.write(ONLY, { kind: { $case: 'revokeRequested', value: { reason, forceAt } } });
        this.logger.info({ reason, forceAt }, 'revocation requested');
        return;
      }
      case 'value-published':
        this.writer.write(ONLY, { kind: { $case: 'valueSet', value: {} } });
        return;
      case 'downgraded':
        this.writer.write(ONLY, { kind: { $case: 'downgraded', value: {} } });
        return;
      case 'released':
        this.writer.write(ONLY, { kind: { $case: 'released', value: {} } });
        this.logger.debug({ token: news.lease.fencingToken.toString() }, 'released');
        return;
      case 'ended':
        if (news.error === undefined) this.endCall();
        else this.endWith(toCallStatus(news.error, this.logger));
        return;
      case 'lost': {
        const call = this.call;
        this.endWith(toCallStatus(news.error, this.logger));
        // A lost lock is freed for others once the status has gone to HTTP/2: grpc-js reports
        // 'cancelled' right after it hands the status over.
        return call.cancelled
          ? undefined
          : new Promise<void>((resolve) => call.once('cancelled', () => resolve()));
      }
    }
  }

  protected heartbeatMessage(): AcquireResponse {
    return HEARTBEAT;
  }

  protected endedBeforeOpening(): string {
    return 'the stream ended before a `start` message';
  }

  /**
   * A request with a resume grace is released only by `release`. A bare half-close cannot be
   * told from a cancel by the frames alone: a gRPC client that cancels may end its side of the
   * stream and send the reset later (grpc-js does, after its pending write completes), or never
   * (when it closes its connection at once). So it is an abnormal end, the same whichever it was:
   * the request is kept for its grace, and a client still listening is told why.
   */
  protected keptForGrace(session: LockSession): LockError {
    const name = session.request(ONLY)?.name ?? '';
    return new LockError(
      'KEPT_FOR_GRACE',
      `lock "${name}": the stream was half-closed without \`release\`; the request is kept for its resume grace (${session.graceMs} ms) as after a cancel: resume it and send \`release\` to let go`,
    );
  }

  protected replacedStatus(): CallStatus {
    const name = this.session?.request(ONLY)?.name ?? '';
    return { code: grpcStatus.ABORTED, details: `lock "${name}" was resumed on another stream` };
  }
}

const HEARTBEAT: AcquireResponse = { kind: { $case: 'heartbeat', value: {} } };
