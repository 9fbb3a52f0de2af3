import { status as Status, type ClientDuplexStream, type Metadata, type StatusObject } from '@grpc/grpc-js';
import { REQUEST_STATE_KEY } from '../common/limits.js';
import type {
  SessionRequest,
  SessionRequestEnded,
  SessionResponse,
} from '../gen/lockstream/v1/lockstream.js';
import type { LockClientError } from './errors.js';
import { fromDuration, toDuration, wireRequest, type LockRequest } from './lock.js';
import { BREAKS, clientHeartbeat, LockHandle, ResumeLoop, type HolderRequest } from './lock-handle.js';

type Call = ClientDuplexStream<SessionRequest, SessionResponse>;
type CallStatus = Pick<StatusObject, 'code' | 'details'> & { metadata?: Metadata };

export interface LockSessionOptions {
  /** ms the server keeps the session after its stream breaks, for a resume; 0: none. */
  readonly resumeGraceMs: number;
  /** ms between heartbeats in both directions; 0: none. */
  readonly heartbeatIntervalMs: number;
  /** How long a session stream with no request stays open for the next one. */
  readonly idleMs: number;
}

const MAX_REQUEST_ID = 2 ** 32 - 1;

/**
 * The Session stream of one LockClient: every lock of the client is a request on it, so an
 * acquire costs a message, not a new HTTP/2 stream. Opened on the first acquire, closed after
 * `idleMs` without requests (so an idle client keeps no stream open), and resumed with its
 * token after a blip: held locks are in doubt meanwhile and confirmed once resumed; waiting
 * requests keep their place.
 */
export class LockSessionChannel {
  readonly #openCall: () => Call;
  readonly #options: LockSessionOptions;
  readonly #locks = new Map<number, SessionLock>();
  #call: Call | undefined;
  #lastId = 0;
  #resumeToken: string | undefined;
  #resumeGraceMs = 0;
  readonly #resuming = new ResumeLoop();
  /** Requests the server has reported since the resume began. */
  readonly #reported = new Set<number>();
  #stopHeartbeats: () => void = () => {};
  #idleTimer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(openCall: () => Call, options: LockSessionOptions) {
    this.#openCall = openCall;
    this.#options = options;
  }

  /** Queues `request` on the session, opening it if needed. */
  acquire(request: LockRequest): SessionLock {
    if (this.#closed) throw new Error('INVARIANT: acquire on a closed session');
    clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
    const id = this.#nextId();
    const lock = new SessionLock(this, id, request);
    this.#locks.set(id, lock);
    // A stream that is resuming takes the request once it is back.
    if (this.#call === undefined) this.#open();
    if (!this.#resuming.active) this.#send(lock.acquireMessage());
    return lock;
  }

  /**
   * Half-closes the stream: the server releases every lock of the session at once. Requests
   * still open end here: waiting ones fail, held ones are lost (they are no longer protected).
   */
  close(): void {
    this.#closed = true;
    // Each request is given up by name before the half-close: a half-close alone leaves a
    // session with a grace to be resumed, as a cancel does.
    if (!this.#resuming.active) {
      for (const requestId of this.#locks.keys())
        this.#send({ kind: { $case: 'cancel', value: { requestId } } });
    }
    this.#endStream();
    const closed = { code: Status.CANCELLED, details: 'the LockClient was closed' };
    for (const lock of [...this.#locks.values()]) lock.sessionEnded(closed);
  }

  /** Sends `message` on the current stream, unless it is being resumed (then it is sent after). */
  send(message: SessionRequest): void {
    if (!this.#resuming.active) this.#send(message);
  }

  /** Called by a request once its `ended` has arrived (or the session failed): its id is free. */
  forget(id: number): void {
    this.#locks.delete(id);
    this.#closeWhenIdle();
  }

  /** With no request left, the stream is closed after `idleMs` unless a new one comes. */
  #closeWhenIdle(): void {
    if (this.#locks.size > 0 || this.#call === undefined || this.#resuming.active) return;
    clearTimeout(this.#idleTimer);
    this.#idleTimer = setTimeout(() => this.#endStream(), this.#options.idleMs);
    this.#idleTimer.unref();
  }

  #nextId(): number {
    do {
      this.#lastId = this.#lastId >= MAX_REQUEST_ID ? 1 : this.#lastId + 1;
    } while (this.#locks.has(this.#lastId));
    return this.#lastId;
  }

  #send(message: SessionRequest): void {
    this.#call?.write(message);
  }

  /** Ends the current stream cleanly; nothing is held on it (or the client is closing). */
  #endStream(): void {
    clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
    const call = this.#call;
    if (call === undefined) return;
    this.#resuming.stop();
    this.#stopHeartbeats();
    this.#call = undefined;
    this.#resumeToken = undefined;
    call.end();
  }

  /** Opens a stream that starts with `open` (or `resume`, while resuming). */
  #open(resumeToken?: string): void {
    const call = this.#openCall();
    this.#call = call;
    const current = (): boolean => call === this.#call;
    call.on('data', (message: SessionResponse) => {
      if (current()) this.#onMessage(message);
    });
    call.on('status', (status: StatusObject) => {
      if (!current()) return;
      this.#stopHeartbeats();
      this.#onStatus(status);
    });
    // Every failure also arrives as the status; without a listener grpc-js would throw it.
    call.on('error', () => {});
    const heartbeatInterval =
      this.#options.heartbeatIntervalMs > 0 ? toDuration(this.#options.heartbeatIntervalMs) : undefined;
    call.write({
      kind:
        resumeToken === undefined
          ? {
              $case: 'open',
              value: {
                resumeGrace:
                  this.#options.resumeGraceMs > 0 ? toDuration(this.#options.resumeGraceMs) : undefined,
                heartbeatInterval,
              },
            }
          : { $case: 'resume', value: { resumeToken, heartbeatInterval } },
    });
    this.#stopHeartbeats = clientHeartbeat(call, this.#options.heartbeatIntervalMs, HEARTBEAT, (status) => {
      if (call !== this.#call) return;
      this.#stopHeartbeats();
      this.#onStatus(status);
      call.cancel();
    });
  }

  #onMessage(message: SessionResponse): void {
    const kind = message.kind;
    if (message.requestId !== 0) {
      if (this.#resuming.active) this.#reported.add(message.requestId);
      this.#locks.get(message.requestId)?.onMessage(kind);
      return;
    }
    if (kind?.$case === 'opened') {
      this.#resumeToken = kind.value.resumeToken === '' ? undefined : kind.value.resumeToken;
      this.#resumeGraceMs = fromDuration(kind.value.resumeGrace);
    } else if (kind?.$case === 'resumed') {
      this.#resumed();
    }
    // Otherwise `heartbeat`, or a session message this client does not know (a newer server's).
  }

  /** The server took the resumed stream over and reported every request it still has. */
  #resumed(): void {
    this.#resuming.stop();
    const reported = new Set(this.#reported);
    this.#reported.clear();
    for (const lock of [...this.#locks.values()]) {
      if (reported.has(lock.id)) lock.resumed();
      else if (lock.sentToServer) lock.unknownAfterResume();
      else this.#send(lock.acquireMessage());
    }
    this.#closeWhenIdle();
  }

  #onStatus(status: CallStatus): void {
    const ended = status.metadata?.get(REQUEST_STATE_KEY).includes('ended') ?? false;
    if (BREAKS.has(status.code) && !ended && this.#resumeToken !== undefined && !this.#closed) {
      this.#resume(status);
      return;
    }
    // The session is over: every request with it. The next acquire opens a new one.
    const resumed = this.#resuming.active;
    this.#resuming.stop();
    this.#call = undefined;
    this.#resumeToken = undefined;
    const failure =
      resumed && status.code === Status.NOT_FOUND
        ? { code: Status.UNAVAILABLE, details: `the session could not be resumed: ${status.details}` }
        : status;
    for (const lock of [...this.#locks.values()]) lock.sessionEnded(failure);
  }

  /**
   * The stream broke: open another with the resume token, backing off, until one gets through
   * or the grace is over (from the first break; the server counts from when it noticed, which
   * is no later). Held locks are in doubt meanwhile.
   */
  #resume(cause: CallStatus): void {
    for (const lock of this.#locks.values()) lock.sessionBroke();
    this.#reported.clear();
    this.#resuming.start(
      this.#resumeGraceMs,
      () => {
        try {
          this.#open(this.#resumeToken);
        } catch (error) {
          // The LockClient was closed: no stream can be opened any more.
          this.#resuming.stop();
          this.#resumeToken = undefined;
          const why = error instanceof Error ? error.message : String(error);
          this.#onStatus({ code: Status.UNAVAILABLE, details: `the session could not be resumed: ${why}` });
        }
      },
      () => {
        const call = this.#call;
        this.#resumeToken = undefined;
        this.#onStatus({
          code: Status.UNAVAILABLE,
          details: `the session's stream broke (${cause.details || Status[cause.code]}) and could not be resumed within its ${this.#resumeGraceMs} ms grace`,
        });
        call?.cancel();
      },
    );
  }
}

const HEARTBEAT: SessionRequest = { kind: { $case: 'heartbeat', value: {} } };

type Phase =
  | { readonly kind: 'waiting' }
  | { readonly kind: 'cancelled' }
  | { readonly kind: 'held' }
  | { readonly kind: 'releasing'; readonly done: (error?: LockClientError) => void }
  | { readonly kind: 'ended' };

/**
 * One lock request on a session, from `acquire` to its `ended`: the lock while it is held. Its
 * own state machine (waiting → held → releasing → ended, or waiting → cancelled → ended), fed
 * the server's messages about it by the channel.
 */
export class SessionLock extends LockHandle {
  readonly id: number;
  readonly #channel: LockSessionChannel;
  #phase: Phase = { kind: 'waiting' };
  /** Whether the server may have heard of this request (its `acquire` went out on a stream). */
  sentToServer = false;

  constructor(channel: LockSessionChannel, id: number, request: LockRequest) {
    super(request);
    this.#channel = channel;
    this.id = id;
  }

  acquireMessage(): SessionRequest {
    this.sentToServer = true;
    const request = this.request;
    return {
      kind: {
        $case: 'acquire',
        value: {
          requestId: this.id,
          ...wireRequest(request),
        },
      },
    };
  }

  /** Gives up waiting, rejecting `granted()` with `reason`; the server withdraws the request. */
  cancel(reason: unknown): void {
    if (this.#phase.kind !== 'waiting') return;
    this.#phase = { kind: 'cancelled' };
    this.failGrant(reason);
    this.#channel.send(this.#cancelMessage());
  }

  protected isHeld(): boolean {
    return this.#phase.kind === 'held';
  }

  protected sendHolderRequest(request: HolderRequest): void {
    this.#channel.send(this.#holderMessage(request));
  }

  #holderMessage(request: HolderRequest): SessionRequest {
    const requestId = this.id;
    return request.kind === 'value'
      ? { kind: { $case: 'setValue', value: { requestId, value: request.value } } }
      : { kind: { $case: 'downgrade', value: { requestId } } };
  }

  protected startRelease(done: (error?: LockClientError) => void): void {
    this.#phase = { kind: 'releasing', done };
    this.#channel.send(this.#releaseMessage());
  }

  #cancelMessage(): SessionRequest {
    return { kind: { $case: 'cancel', value: { requestId: this.id } } };
  }

  #releaseMessage(): SessionRequest {
    return { kind: { $case: 'release', value: { requestId: this.id } } };
  }

  onMessage(kind: SessionResponse['kind']): void {
    switch (kind?.$case) {
      case 'queued':
        if (this.#phase.kind === 'waiting') this.request.onQueued?.(kind.value.ahead);
        return;
      case 'acquired':
        if (this.#phase.kind === 'waiting') {
          this.#phase = { kind: 'held' };
          this.grant(kind.value.fencingToken, kind.value.tokens);
        }
        // Otherwise: the report of a resumed session (the same token), or a grant that crossed
        // our cancel (the server releases it on the cancel).
        return;
      case 'inDoubt':
        if (this.#phase.kind === 'held' || this.#phase.kind === 'releasing') this.doubt();
        return;
      case 'confirmed':
        this.confirm();
        return;
      case 'revokeRequested':
        if (this.#phase.kind === 'held')
          this.revoke({ reason: kind.value.reason, forceAt: kind.value.forceAt });
        return;
      case 'ended':
        this.#ended(kind.value);
        return;
      case 'valueSet':
        this.acknowledged('value');
        return;
      case 'downgraded':
        this.acknowledged('downgrade');
        return;
      case 'released':
      case 'opened':
      case 'resumed':
      case 'heartbeat':
      case undefined:
        // `released` is followed by `ended`, which settles the release; the others are about the
        // session; a message kind this client does not know (a newer server's) is ignored.
        return;
    }
  }

  /** The session's stream broke and is being resumed: a held lock is in doubt meanwhile. */
  sessionBroke(): void {
    if (this.#phase.kind === 'held' || this.#phase.kind === 'releasing') this.doubt();
  }

  /** The resumed session reported this request: still ours. Re-send what the break may have lost. */
  resumed(): void {
    const phase = this.#phase.kind;
    if (phase === 'held' || phase === 'releasing') this.confirm();
    for (const request of this.unacknowledged()) this.#channel.send(this.#holderMessage(request));
    if (phase === 'releasing') this.#channel.send(this.#releaseMessage());
    if (phase === 'cancelled') this.#channel.send(this.#cancelMessage());
  }

  /** The resumed session does not have this request: it ended, and its `ended` was lost. */
  unknownAfterResume(): void {
    this.#end({
      code: Status.NOT_FOUND,
      details: 'the server no longer has this request after its session was resumed',
      unknown: true,
    });
  }

  /** The whole session ended with `status`: so did this request. */
  sessionEnded(status: CallStatus): void {
    this.#end(status);
  }

  #ended({ code, message }: SessionRequestEnded): void {
    const status: Status = code;
    this.#end({ code: status, details: message });
  }

  #end(outcome: { code: Status; details: string; unknown?: boolean }): void {
    const phase = this.#phase;
    if (phase.kind === 'ended') return;
    this.#phase = { kind: 'ended' };
    this.#channel.forget(this.id);
    this.settle(phase.kind === 'releasing' ? phase.done : phase.kind, outcome);
  }
}
