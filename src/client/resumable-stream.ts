/*
 * One logical lock stream to the server over a sequence of gRPC calls: each call opened, kept
 * alive and watched, and after a break replaced by a resumed one, round the endpoints, within
 * the grace.
 */
import { status as Status } from '@grpc/grpc-js';
import { REQUEST_STATE_KEY } from '../common/request-state.js';
import type { SessionRequest, SessionResponse } from '../gen/lockstream/v1/lockstream.js';
import type { EndpointRing } from './endpoints.js';
import { clientHeartbeat } from './call-heartbeat.js';
import { ignore, type CallListener, type CallStatus, type EndStatus, type LockCall } from './session-call.js';

/** Statuses that say the stream broke, not what the server decided: worth a resume. */
const BREAKS: ReadonlySet<Status> = new Set([
  Status.UNAVAILABLE,
  Status.INTERNAL,
  Status.UNKNOWN,
  Status.CANCELLED,
]);

const RESUME_BACKOFF_MS = 100;
const RESUME_BACKOFF_MAX_MS = 1_000;

/**
 * With several endpoints, how long a resume attempt may go without a word from the server
 * before the next endpoint is tried: 1 s, or a third of what is left of the grace if that is less, so that a frozen
 * endpoint (a paused server, a black-holed path) cannot eat the grace the others could use.
 */
const RESUME_ATTEMPT_MAX_MS = 1_000;

/**
 * How much sooner than the server the client gives a broken stream up: the grace is counted
 * from the last message heard, and the server counts it from when it noticed the break, which
 * is no earlier than when it sent that message. The margin covers that message's way here and
 * this process's timers firing late. A fifth of the grace, at most 1 s.
 */
export function lossMarginMs(graceMs: number): number {
  return Math.min(1_000, graceMs / 5);
}

/** How a stream's calls are made, and the messages that open, resume and keep alive a stream. */
export interface StreamOpening {
  /** The servers a call can go to; each call goes to the current one. */
  readonly endpoints: EndpointRing;
  /** Starts a new call to endpoint `endpoint`, in the Session RPC's terms whichever RPC carries it. */
  call(endpoint: number, listener: CallListener): LockCall;
  /** The first message of a new stream. */
  readonly open: SessionRequest;
  /** The first message of a stream that takes a broken one over. */
  resume(resumeToken: string): SessionRequest;
  /** Sent every heartbeat interval. */
  readonly heartbeat: SessionRequest;
  /** ms between heartbeats in both directions; 0: none. */
  readonly heartbeatIntervalMs: number;
}

/** What a ResumableStream tells its owner. */
export interface StreamListener {
  /** The server said `kind` about request `requestId` (0: the stream) on the current call. */
  message(requestId: number, kind: SessionResponse['kind']): void;
  /** The call broke and a resume begins (or goes on): held locks are in doubt meanwhile. */
  broke(): void;
  /** The stream is over and will not be resumed, with the status it ended with. */
  ended(status: EndStatus): void;
}

/**
 * One logical stream to the server over a sequence of gRPC calls. It opens a call, sends
 * heartbeats and notices a silent server, and when the call breaks after the server said how to
 * resume it (`resumableFor`), opens new calls with the resume token until one gets through
 * (`resumed`) or the grace is over. Each attempt goes to the next endpoint, round the list: the
 * first round at once, each later round after a backoff with jitter; with several endpoints an
 * attempt unanswered for `RESUME_ATTEMPT_MAX_MS` (or a third of the grace left) counts as failed.
 * The grace is counted from the last message heard from the server, less `lossMarginMs`: the
 * server counts it from when it noticed the break, which is no earlier than when it sent that
 * message, so the stream is given up (its locks lost) before the server can free them. A call
 * that ends UNAVAILABLE moves the client on to the next endpoint too, so that whatever opens the
 * next stream goes there. Only the current call's events count.
 */
export class ResumableStream {
  readonly #opening: StreamOpening;
  readonly #listener: StreamListener;
  #call: LockCall | undefined;
  /** The endpoint the current call went to. */
  #endpoint = 0;
  #stopHeartbeats: () => void = ignore;
  /** performance.now() when the current call last heard from the server (or was opened). */
  #heardAt = 0;
  #resumeToken: string | undefined;
  #graceMs = 0;
  #resuming:
    | {
        /** Gives the stream up at `giveUpAt` (performance.now()). */
        readonly timer: NodeJS.Timeout;
        readonly giveUpAt: number;
        attempts: number;
        /** Ends the current attempt if nothing is heard on it (several endpoints only). */
        attemptTimer: NodeJS.Timeout | undefined;
      }
    | undefined;

  constructor(opening: StreamOpening, listener: StreamListener) {
    this.#opening = opening;
    this.#listener = listener;
  }

  /** Whether a call is open or being resumed. */
  get active(): boolean {
    return this.#call !== undefined || this.#resuming !== undefined;
  }

  /** Whether a broken call is being replaced: messages wait until `resumed()`. */
  get resuming(): boolean {
    return this.#resuming !== undefined;
  }

  /** Opens a new call (the stream must not be active). */
  start(): void {
    this.#open(undefined);
  }

  /** The server's `opened`: the token to resume with after a break ('' for none). */
  resumableFor(resumeToken: string, graceMs: number): void {
    this.#resumeToken = resumeToken === '' ? undefined : resumeToken;
    this.#graceMs = graceMs;
  }

  /** The resumed call got through: the resume is over. */
  resumed(): void {
    this.#stopResuming();
  }

  /**
   * Writes on the current call; dropped while resuming (the owner sends it again after), and
   * once the call is closed.
   */
  write(message: SessionRequest): void {
    if (this.#resuming === undefined) this.#call?.write(message);
  }

  /** Ends the stream for good, cleanly, without waiting for its status: nothing is left on it. */
  finish(): void {
    this.#stopResuming();
    this.#resumeToken = undefined;
    this.#call?.end();
    this.#call = undefined;
  }

  #open(resumeToken: string | undefined): void {
    const opening = this.#opening;
    const endpoint = opening.endpoints.current;
    // Only the current call's events count.
    const call: LockCall = opening.call(endpoint, {
      news: (requestId, kind) => {
        if (call !== this.#call) return;
        this.#heardAt = performance.now();
        this.#listener.message(requestId, kind);
      },
      // Half-closed or cancelled: no more heartbeats, nor a wait for the server's.
      closed: () => {
        if (call === this.#call) this.#stopHeartbeats();
      },
      status: (status) => {
        if (call === this.#call) this.#onStatus(status);
      },
    });
    this.#call = call;
    this.#endpoint = endpoint;
    this.#heardAt = performance.now();
    call.write(resumeToken === undefined ? opening.open : opening.resume(resumeToken));
    const resuming = this.#resuming;
    if (resuming && opening.endpoints.count > 1) {
      const openedAt = this.#heardAt;
      const boundMs = Math.round(Math.min(RESUME_ATTEMPT_MAX_MS, (resuming.giveUpAt - openedAt) / 3));
      clearTimeout(resuming.attemptTimer);
      resuming.attemptTimer = setTimeout(() => {
        // An endpoint that answered (a long report still coming) is left to the heartbeat check.
        if (call !== this.#call || this.#resuming !== resuming || this.#heardAt !== openedAt) return;
        this.#abandon(call, {
          code: Status.UNAVAILABLE,
          details: `no answer from ${opening.endpoints.address(endpoint)} within ${boundMs} ms`,
        });
      }, boundMs);
      // The grace timer keeps the process running while the stream is resumed.
      resuming.attemptTimer.unref();
    }
    if (opening.heartbeatIntervalMs === 0) return;
    this.#stopHeartbeats = clientHeartbeat(
      call,
      opening.heartbeatIntervalMs,
      opening.heartbeat,
      () => this.#heardAt,
      () => this.#silenceMs(opening.heartbeatIntervalMs),
      (status) => {
        if (call === this.#call) this.#abandon(call, status);
      },
    );
  }

  /** Gives the current call up as if it had ended with `status` (the server went silent). */
  #abandon(call: LockCall, status: EndStatus): void {
    this.#onStatus(status);
    call.cancel();
  }

  #onStatus(status: CallStatus): void {
    this.#stopHeartbeats();
    this.#call = undefined;
    const ended = status.metadata?.get(REQUEST_STATE_KEY).includes('ended') ?? false;
    const resumable = BREAKS.has(status.code) && !ended && this.#resumeToken !== undefined;
    // A break, or a server unreachable or going away: the next call goes to the next endpoint.
    if (resumable || status.code === Status.UNAVAILABLE) this.#opening.endpoints.moveOn(this.#endpoint);
    if (resumable) {
      this.#break(status);
      return;
    }
    const wasResuming = this.#resuming !== undefined;
    this.#stopResuming();
    this.#resumeToken = undefined;
    // What the server no longer has after a break cannot be resumed: retryable, like a refused call.
    this.#listener.ended(
      wasResuming && status.code === Status.NOT_FOUND
        ? { code: Status.UNAVAILABLE, details: `the stream could not be resumed: ${status.details}` }
        : status,
    );
  }

  /**
   * How long the server may stay silent before the call is treated as broken: three heartbeat
   * intervals, and no longer than the grace less its margin (so a silent server is noticed before
   * the lock must be given up), though never under two intervals (a heartbeat a little late is
   * no break).
   */
  #silenceMs(intervalMs: number): number {
    const silenceMs = 3 * intervalMs;
    if (this.#resumeToken === undefined) return silenceMs;
    return Math.max(2 * intervalMs, Math.min(silenceMs, this.#graceMs - lossMarginMs(this.#graceMs)));
  }

  /**
   * The call broke: a new one with the resume token, to the next endpoint, at once for each
   * endpoint of the first round, and after a backoff at the start of each later round.
   */
  #break(cause: EndStatus): void {
    this.#listener.broke();
    if (this.#resuming === undefined) {
      // The server may free the locks `graceMs` after it noticed the break, and it cannot have
      // noticed it before it sent the last message this call heard.
      const now = performance.now();
      const leftMs = this.#heardAt + this.#graceMs - lossMarginMs(this.#graceMs) - now;
      if (leftMs <= 0) {
        this.#giveUp(cause);
        return;
      }
      this.#resuming = {
        attempts: 0,
        giveUpAt: now + leftMs,
        timer: setTimeout(() => this.#giveUp(cause), leftMs),
        attemptTimer: undefined,
      };
    }
    const state = this.#resuming;
    clearTimeout(state.attemptTimer);
    const endpoints = this.#opening.endpoints.count;
    const round = Math.floor(state.attempts / endpoints);
    const backoff =
      state.attempts % endpoints !== 0 || round === 0
        ? 0
        : Math.min(RESUME_BACKOFF_MAX_MS, RESUME_BACKOFF_MS * 2 ** round) * Math.random();
    state.attempts += 1;
    setTimeout(() => {
      if (this.#resuming === state) this.#reopen();
    }, backoff).unref();
  }

  #reopen(): void {
    try {
      this.#open(this.#resumeToken);
    } catch (error) {
      // The gRPC client was closed: no call can be opened any more.
      this.#stopResuming();
      this.#resumeToken = undefined;
      const why = error instanceof Error ? error.message : String(error);
      this.#listener.ended({ code: Status.UNAVAILABLE, details: `the stream could not be resumed: ${why}` });
    }
  }

  #giveUp(cause: EndStatus): void {
    const attempt = this.#call;
    this.#call = undefined;
    this.#stopResuming();
    this.#resumeToken = undefined;
    this.#stopHeartbeats();
    const endpoints = this.#opening.endpoints.count;
    const where = endpoints === 1 ? '' : ` on any of its ${endpoints} endpoints`;
    this.#listener.ended({
      code: Status.UNAVAILABLE,
      details: `the stream broke (${cause.details || Status[cause.code]}) and could not be resumed${where} within its ${this.#graceMs} ms grace (counted from the last message from the server)`,
    });
    attempt?.cancel();
  }

  #stopResuming(): void {
    if (this.#resuming) {
      clearTimeout(this.#resuming.timer);
      clearTimeout(this.#resuming.attemptTimer);
    }
    this.#resuming = undefined;
  }
}
