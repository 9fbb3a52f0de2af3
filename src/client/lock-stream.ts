import { status as Status, type ClientDuplexStream, type Metadata, type StatusObject } from '@grpc/grpc-js';
import { REQUEST_STATE_KEY } from '../common/limits.js';
import type { Duration } from '../gen/google/protobuf/duration.js';
import type { AcquireRequest, AcquireResponse } from '../gen/lockstream/v1/lockstream.js';
import type { LockClientError } from './errors.js';
import { toDuration, wireRequest, fromDuration, type LockRequest } from './lock.js';
import {
  BREAKS,
  clientHeartbeat,
  LockHandle,
  ResumeLoop,
  type HolderRequest,
  type RequestOutcome,
} from './lock-handle.js';

type Call = ClientDuplexStream<AcquireRequest, AcquireResponse>;
type CallStatus = Pick<StatusObject, 'code' | 'details'> & { metadata?: Metadata };

type Phase =
  | { readonly kind: 'waiting' }
  | { readonly kind: 'held' }
  | { readonly kind: 'releasing'; readonly done: (error?: LockClientError) => void }
  | { readonly kind: 'ended' };

const HEARTBEAT: AcquireRequest = { kind: { $case: 'heartbeat', value: {} } };

/**
 * One lock request on an Acquire stream of its own, from `start` to its end: the lock while it
 * is held. Follows the server's messages (`queued`, `acquired`, `released`, ...) and turns the
 * final status into the outcome that matters to the caller at that moment (a failed acquire, a
 * release, a loss).
 *
 * A request that asked for a resume grace outlives a broken stream: the server keeps it for the
 * grace, and this class opens new streams with the resume token until one gets through (or the
 * grace is over). A held lock is in doubt meanwhile and confirmed once resumed; a waiting
 * request keeps its place in the queue.
 */
export class LockStream extends LockHandle {
  readonly #openCall: () => Call;
  #call: Call;
  #stopHeartbeats: () => void = () => {};
  #phase: Phase = { kind: 'waiting' };
  /** From `resumable`: how to take the request over after a break. */
  #resumeToken: string | undefined;
  #resumeGraceMs = 0;
  readonly #resuming = new ResumeLoop();
  /** Calls given up as broken: whatever they still say is stale. */
  readonly #brokenCalls = new WeakSet<Call>();

  constructor(openCall: () => Call, request: LockRequest) {
    super(request);
    this.#openCall = openCall;
    this.#call = this.#open({
      $case: 'start',
      value: {
        ...wireRequest(request),
        resumeGrace: request.resumeGraceMs > 0 ? toDuration(request.resumeGraceMs) : undefined,
        heartbeatInterval: this.#heartbeatInterval(),
      },
    });
  }

  /**
   * Gives up waiting, rejecting `granted()` with `reason`. The server withdraws the request at
   * once: a resumable request is withdrawn with `release` (a cancel would look like a break and
   * keep it queued for its grace).
   */
  cancel(reason: unknown): void {
    if (this.#phase.kind !== 'waiting') return;
    this.#phase = { kind: 'ended' };
    this.failGrant(reason);
    this.#resuming.stop();
    this.#stopHeartbeats();
    if (this.#resumeToken !== undefined && !this.#brokenCalls.has(this.#call)) {
      this.#call.write({ kind: { $case: 'release', value: {} } });
      this.#call.end();
    } else {
      this.#call.cancel();
    }
  }

  protected isHeld(): boolean {
    return this.#phase.kind === 'held';
  }

  protected sendHolderRequest(request: HolderRequest): void {
    // While resuming, it goes out on the resumed stream with the others not acknowledged.
    if (!this.#resuming.active) this.#call.write(holderMessage(request));
  }

  protected startRelease(done: (error?: LockClientError) => void): void {
    this.#phase = { kind: 'releasing', done };
    // While resuming, the release goes out on the resumed stream.
    if (!this.#resuming.active) this.#endCall();
  }

  /** Opens a call that starts with `first`; only the current call's events count. */
  #open(first: NonNullable<AcquireRequest['kind']>): Call {
    const call = this.#openCall();
    const current = (): boolean => call === this.#call && !this.#brokenCalls.has(call);
    call.on('data', (message: AcquireResponse) => {
      if (current()) this.#onMessage(message);
    });
    call.on('status', (status: StatusObject) => {
      if (!current()) return;
      this.#stopHeartbeats();
      this.#onStatus(status);
    });
    // Every failure also arrives as the status; without a listener grpc-js would throw it.
    call.on('error', () => {});
    call.write({ kind: first });
    this.#stopHeartbeats = clientHeartbeat(call, this.request.heartbeatIntervalMs, HEARTBEAT, (status) => {
      if (!current()) return;
      this.#stopHeartbeats();
      this.#onStatus(status);
      call.cancel();
    });
    return call;
  }

  #heartbeatInterval(): Duration | undefined {
    const ms = this.request.heartbeatIntervalMs;
    return ms > 0 ? toDuration(ms) : undefined;
  }

  /** Sends `release` and half-closes: the server releases the lock and answers OK. */
  #endCall(): void {
    this.#stopHeartbeats();
    this.#call.write({ kind: { $case: 'release', value: {} } });
    this.#call.end();
  }

  #onMessage(message: AcquireResponse): void {
    const kind = message.kind;
    switch (kind?.$case) {
      case 'resumable':
        this.#resumeToken = kind.value.resumeToken;
        this.#resumeGraceMs = fromDuration(kind.value.resumeGrace);
        return;
      case 'queued':
        if (this.#phase.kind !== 'waiting') return;
        this.#resuming.stop();
        this.request.onQueued?.(kind.value.ahead);
        return;
      case 'acquired':
        if (this.#phase.kind === 'waiting') {
          this.#resuming.stop();
          this.#phase = { kind: 'held' };
          this.grant(kind.value.fencingToken, kind.value.tokens);
        } else if (this.#resuming.active && kind.value.fencingToken === this.token) {
          // Resumed with the lock still ours: what the break may have lost goes out again.
          this.#resuming.stop();
          this.confirm();
          for (const request of this.unacknowledged()) this.#call.write(holderMessage(request));
          if (this.#phase.kind === 'releasing') this.#endCall();
        }
        return;
      case 'inDoubt':
        if (this.#phase.kind !== 'waiting') this.doubt();
        return;
      case 'confirmed':
        if (!this.#resuming.active) this.confirm();
        return;
      case 'revokeRequested':
        if (this.#phase.kind !== 'waiting')
          this.revoke({ reason: kind.value.reason, forceAt: kind.value.forceAt });
        return;
      case 'valueSet':
        this.acknowledged('value');
        return;
      case 'downgraded':
        this.acknowledged('downgrade');
        return;
      case 'released':
      case 'heartbeat':
      case undefined:
        // `released` is followed by the OK status, which settles the release; a message kind
        // this client does not know (from a newer server) is ignored.
        return;
    }
  }

  #onStatus(status: CallStatus): void {
    const phase = this.#phase;
    if (phase.kind === 'ended') return;
    const ended = status.metadata?.get(REQUEST_STATE_KEY).includes('ended') ?? false;
    if (BREAKS.has(status.code) && !ended && this.#resumeToken !== undefined) {
      this.#resume(status);
      return;
    }
    const resumed = this.#resuming.active;
    this.#resuming.stop();
    this.#phase = { kind: 'ended' };
    // A request the server no longer has after a resume lost its place, or its lock.
    const outcome: RequestOutcome =
      resumed && status.code === Status.NOT_FOUND ? { ...status, unknown: true } : status;
    this.settle(phase.kind === 'releasing' ? phase.done : phase.kind, outcome);
  }

  /**
   * The stream broke: open another with the resume token, backing off, until one gets through
   * or the grace is over (from the first break; the server counts from when it noticed, which
   * is no later). A held lock is in doubt meanwhile.
   */
  #resume(cause: CallStatus): void {
    this.#brokenCalls.add(this.#call);
    if (this.#phase.kind !== 'waiting') this.doubt();
    this.#resuming.start(
      this.#resumeGraceMs,
      () => {
        if (this.#phase.kind === 'ended') return;
        try {
          this.#call = this.#open({
            $case: 'resume',
            value: { resumeToken: this.#resumeToken ?? '', heartbeatInterval: this.#heartbeatInterval() },
          });
        } catch (error) {
          // The LockClient was closed: no stream can be opened any more.
          this.#resuming.stop();
          this.#resumeToken = undefined;
          const why = error instanceof Error ? error.message : String(error);
          this.#onStatus({
            code: Status.UNAVAILABLE,
            details: `the stream broke and could not be resumed: ${why}`,
          });
        }
      },
      () => {
        const call = this.#call;
        this.#resumeToken = undefined;
        this.#onStatus({
          code: Status.UNAVAILABLE,
          details: `the stream broke (${cause.details || Status[cause.code]}) and could not be resumed within its ${this.#resumeGraceMs} ms grace`,
        });
        call.cancel();
      },
    );
  }
}

function holderMessage(request: HolderRequest): AcquireRequest {
  return request.kind === 'value'
    ? { kind: { $case: 'setValue', value: { value: request.value } } }
    : { kind: { $case: 'downgrade', value: {} } };
}
