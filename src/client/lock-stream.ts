import { status as Status, type ClientDuplexStream, type Metadata, type StatusObject } from '@grpc/grpc-js';
import { REQUEST_STATE_KEY } from '../common/limits.js';
import type { Duration } from '../gen/google/protobuf/duration.js';
import {
  LockMode as WireLockMode,
  type AcquireRequest,
  type AcquireResponse,
} from '../gen/lockstream/v1/lockstream.js';
import { acquireFailure, type LockClientError, LockLostError, lossFailure } from './errors.js';

/** How a lock is shared: `mutex` and `write` are exclusive (and exclude each other), `read` is shared. */
export type LockMode = 'mutex' | 'read' | 'write';

/**
 * A held lock. It is held from the moment `acquire` resolves until `release()` resolves, or
 * until `lost` aborts. Dispose it (`await using`) to release it on scope exit.
 */
export interface Lock extends AsyncDisposable {
  /** The lock's name, as passed to `acquire`. */
  readonly name: string;
  readonly mode: LockMode;
  /**
   * The fencing token: larger for every later holder of this lock. Pass it to the resources the
   * lock protects so they can refuse a holder whose lock was lost. A `bigint`: exact, never a
   * rounded number (`token.toString()` for JSON).
   */
  readonly token: bigint;
  /**
   * Aborts, with a `LockLostError` as its reason, if the lock is lost before `release()`: the
   * server says so, or the stream to the server breaks (a client that cannot see the server
   * must assume it no longer holds the lock). Never aborts after a successful release.
   */
  readonly lost: AbortSignal;
  /**
   * True while the server cannot vouch for the lock (it lost contact with its coordination back
   * end): the lock may still be held, or `lost` may follow. A careful holder pauses writes to
   * what the lock protects until `whenConfirmed()` resolves.
   */
  readonly inDoubt: boolean;
  /**
   * Resolves at once while the lock is not in doubt, else once the server confirms it again.
   * Rejects with `LockLostError` if the lock is lost (or was lost) instead.
   */
  whenConfirmed(): Promise<void>;
  /**
   * Set once someone asked for the lock back (an operator's `lockstream revoke`): finish up and
   * release it. With `forceAt`, the lock is taken away then (`lost` aborts) if still held.
   */
  readonly revokeRequested: RevokeRequest | undefined;
  /**
   * Releases the lock. Resolves once the server confirms; idempotent (later calls return the
   * same promise). Rejects with `LockLostError` if the lock was lost first: the work done under
   * it may not have been exclusive.
   */
  release(): Promise<void>;
  /** Releases the lock; a lock that was already lost is not an error here (see `lost`). */
  [Symbol.asyncDispose](): Promise<void>;
}

/** A lock while it is being acquired: the SDK's view of one request, on a stream or a session. */
export interface PendingLock extends Lock {
  /** Resolves with the token once granted; rejects with the reason the request failed. */
  granted(): Promise<bigint>;
  /** Gives up waiting, rejecting `granted()` with `reason`; the server withdraws the request. */
  cancel(reason: unknown): void;
}

/** A request to give a held lock back. */
export interface RevokeRequest {
  readonly reason: string;
  /** When the lock is taken away if still held; undefined: the request is cooperative only. */
  readonly forceAt: Date | undefined;
}

export const WIRE_MODES: Readonly<Record<LockMode, WireLockMode>> = {
  mutex: WireLockMode.MUTEX,
  read: WireLockMode.READ,
  write: WireLockMode.WRITE,
};

export interface LockRequest {
  readonly name: string;
  readonly mode: LockMode;
  /** ms; absent: wait until cancelled; 0: try once. */
  readonly waitTimeout: number | undefined;
  readonly owner: string;
  /** ms the server keeps the request after the stream breaks, for a resume; 0: none. */
  readonly resumeGraceMs: number;
  /** ms between heartbeats in both directions; 0: none. */
  readonly heartbeatIntervalMs: number;
  readonly onQueued: ((ahead: number) => void) | undefined;
  readonly onInDoubt: (() => void) | undefined;
  readonly onConfirmed: (() => void) | undefined;
  readonly onRevokeRequested: ((request: RevokeRequest) => void) | undefined;
}

type Call = ClientDuplexStream<AcquireRequest, AcquireResponse>;

type Phase =
  | { readonly kind: 'waiting' }
  | { readonly kind: 'held' }
  | { readonly kind: 'releasing'; readonly done: (error?: LockClientError) => void }
  | { readonly kind: 'ended' };

/** Statuses that say the stream broke, not what the server decided: worth a resume. */
const BREAKS = new Set([Status.UNAVAILABLE, Status.INTERNAL, Status.UNKNOWN, Status.CANCELLED]);
const RESUME_BACKOFF_MS = 100;
const RESUME_BACKOFF_MAX_MS = 1_000;

/**
 * One lock request, from `start` to its end: the lock while it is held. Follows the server's
 * messages (`queued`, `acquired`, `released`, ...) and turns the final status into the outcome
 * that matters to the caller at that moment (a failed acquire, a release, a loss).
 *
 * A request that asked for a resume grace outlives a broken stream: the server keeps it for the
 * grace, and this class opens new streams with the resume token until one gets through (or the
 * grace is over). A held lock is in doubt meanwhile and confirmed once resumed; a waiting
 * request keeps its place in the queue.
 */
export class LockStream implements PendingLock {
  readonly name: string;
  readonly mode: LockMode;
  readonly #request: LockRequest;
  readonly #openCall: () => Call;
  readonly #lost = new AbortController();
  readonly #granted: Promise<bigint>;
  #grant!: { resolve: (token: bigint) => void; reject: (error: unknown) => void };
  #call: Call;
  #stopHeartbeats: () => void = () => {};
  #token: bigint | undefined;
  #phase: Phase = { kind: 'waiting' };
  #released: Promise<void> | undefined;
  #inDoubt = false;
  #revokeRequested: RevokeRequest | undefined;
  readonly #confirmationWaiters: Array<{ resolve: () => void; reject: (error: unknown) => void }> = [];
  /** From `resumable`: how to take the request over after a break. */
  #resumeToken: string | undefined;
  #resumeGraceMs = 0;
  /** While resuming after a break: when the server gives up on us, and how many tries so far. */
  #resuming: { readonly deadline: number; readonly timer: NodeJS.Timeout; attempts: number } | undefined;
  /** Calls given up as broken: whatever they still say is stale. */
  readonly #brokenCalls = new WeakSet<Call>();

  constructor(openCall: () => Call, request: LockRequest) {
    this.name = request.name;
    this.mode = request.mode;
    this.#request = request;
    this.#openCall = openCall;
    this.#granted = new Promise((resolve, reject) => (this.#grant = { resolve, reject }));
    // The caller awaits `granted()`; an unobserved rejection here is not a second failure.
    this.#granted.catch(() => {});
    this.#call = this.#open({
      $case: 'start',
      value: {
        name: request.name,
        mode: WIRE_MODES[request.mode],
        waitTimeout: request.waitTimeout === undefined ? undefined : toDuration(request.waitTimeout),
        owner: request.owner,
        resumeGrace: request.resumeGraceMs > 0 ? toDuration(request.resumeGraceMs) : undefined,
        heartbeatInterval: this.#heartbeatInterval(),
      },
    });
  }

  get token(): bigint {
    if (this.#token === undefined) throw new Error('INVARIANT: token read before the lock was granted');
    return this.#token;
  }

  get lost(): AbortSignal {
    return this.#lost.signal;
  }

  get revokeRequested(): RevokeRequest | undefined {
    return this.#revokeRequested;
  }

  get inDoubt(): boolean {
    return this.#inDoubt;
  }

  whenConfirmed(): Promise<void> {
    if (this.#lost.signal.aborted) return Promise.reject(this.#lost.signal.reason as Error);
    if (!this.#inDoubt) return Promise.resolve();
    return new Promise((resolve, reject) => this.#confirmationWaiters.push({ resolve, reject }));
  }

  /** Resolves with the token once granted; rejects with the call's failure. */
  granted(): Promise<bigint> {
    return this.#granted;
  }

  /**
   * Gives up waiting, rejecting `granted()` with `reason`. The server withdraws the request at
   * once: a resumable request is withdrawn with `release` (a cancel would look like a break and
   * keep it queued for its grace).
   */
  cancel(reason: unknown): void {
    if (this.#phase.kind !== 'waiting') return;
    this.#phase = { kind: 'ended' };
    this.#grant.reject(reason);
    this.#stopResuming();
    this.#stopHeartbeats();
    if (this.#resumeToken !== undefined && !this.#brokenCalls.has(this.#call)) {
      this.#call.write({ kind: { $case: 'release', value: {} } });
      this.#call.end();
    } else {
      this.#call.cancel();
    }
  }

  release(): Promise<void> {
    this.#released ??= new Promise<void>((resolve, reject) => {
      if (this.#lost.signal.aborted) {
        reject(this.#lost.signal.reason);
        return;
      }
      if (this.#phase.kind !== 'held') {
        reject(new Error('INVARIANT: release() before the lock was granted'));
        return;
      }
      this.#phase = {
        kind: 'releasing',
        done: (error) => (error ? reject(error) : resolve()),
      };
      // While resuming, the release goes out on the resumed stream.
      if (this.#resuming === undefined) this.#endCall();
    });
    return this.#released;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.release();
    } catch (error) {
      if (!(error instanceof LockLostError)) throw error;
    }
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
    this.#stopHeartbeats = this.#heartbeat(call);
    return call;
  }

  /**
   * Sends heartbeats on `call` at the requested interval, and treats it as broken when the
   * server has said nothing for three intervals (a proxy may answer HTTP/2 pings for a server
   * that is gone). Returns a function that stops both.
   */
  #heartbeat(call: Call): () => void {
    const intervalMs = this.#request.heartbeatIntervalMs;
    if (intervalMs === 0) return () => {};
    const ticker = setInterval(() => call.write({ kind: { $case: 'heartbeat', value: {} } }), intervalMs);
    const silence = setTimeout(() => {
      if (call !== this.#call || this.#brokenCalls.has(call)) return;
      this.#stopHeartbeats();
      this.#onStatus({
        code: Status.UNAVAILABLE,
        details: `no message from the server for ${3 * intervalMs} ms (3 heartbeat intervals)`,
      });
      call.cancel();
    }, 3 * intervalMs);
    ticker.unref();
    silence.unref();
    const heard = (): void => {
      silence.refresh();
    };
    call.on('data', heard);
    return () => {
      clearInterval(ticker);
      clearTimeout(silence);
      call.off('data', heard);
    };
  }

  #heartbeatInterval(): Duration | undefined {
    const ms = this.#request.heartbeatIntervalMs;
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
    const request = this.#request;
    switch (kind?.$case) {
      case 'resumable':
        this.#resumeToken = kind.value.resumeToken;
        this.#resumeGraceMs = fromDuration(kind.value.resumeGrace);
        return;
      case 'queued':
        if (this.#phase.kind !== 'waiting') return;
        this.#stopResuming();
        request.onQueued?.(kind.value.ahead);
        return;
      case 'acquired':
        if (this.#phase.kind === 'waiting') {
          this.#stopResuming();
          this.#token = kind.value.fencingToken;
          this.#phase = { kind: 'held' };
          this.#grant.resolve(kind.value.fencingToken);
        } else if (this.#resuming && kind.value.fencingToken === this.#token) {
          // Resumed with the lock still ours.
          this.#stopResuming();
          this.#confirm();
          if (this.#phase.kind === 'releasing') this.#endCall();
        }
        return;
      case 'inDoubt':
        if (this.#phase.kind === 'waiting' || this.#inDoubt) return;
        this.#inDoubt = true;
        request.onInDoubt?.();
        return;
      case 'confirmed':
        if (!this.#resuming) this.#confirm();
        return;
      case 'revokeRequested':
        if (this.#phase.kind === 'waiting' || this.#revokeRequested) return;
        this.#revokeRequested = { reason: kind.value.reason, forceAt: kind.value.forceAt };
        request.onRevokeRequested?.(this.#revokeRequested);
        return;
      case 'released':
      case 'heartbeat':
      case undefined:
        // `released` is followed by the OK status, which settles the release; a message kind
        // this client does not know (from a newer server) is ignored.
        return;
    }
  }

  #confirm(): void {
    if (!this.#inDoubt) return;
    this.#inDoubt = false;
    for (const waiter of this.#confirmationWaiters.splice(0)) waiter.resolve();
    this.#request.onConfirmed?.();
  }

  #loseLock(failure: LockLostError): void {
    this.#lost.abort(failure);
    for (const waiter of this.#confirmationWaiters.splice(0)) waiter.reject(failure);
  }

  #onStatus(status: Pick<StatusObject, 'code' | 'details'> & { metadata?: Metadata }): void {
    const phase = this.#phase;
    if (phase.kind === 'ended') return;
    const ended = status.metadata?.get(REQUEST_STATE_KEY).includes('ended') ?? false;
    if (BREAKS.has(status.code) && !ended && this.#resumeToken !== undefined) {
      this.#resume(status);
      return;
    }
    const resumed = this.#resuming !== undefined;
    this.#stopResuming();
    this.#phase = { kind: 'ended' };
    switch (phase.kind) {
      case 'waiting':
        // A request the server no longer has lost its place: retryable, like a refused call.
        this.#grant.reject(
          acquireFailure(
            this.name,
            resumed && status.code === Status.NOT_FOUND
              ? { code: Status.UNAVAILABLE, details: `lost its place in the queue: ${status.details}` }
              : status,
          ),
        );
        return;
      case 'held': {
        // The stream ended while we held the lock and had not asked to release it.
        this.#loseLock(lossFailure(this.name, status.code === Status.OK ? unexpectedEnd : status));
        return;
      }
      case 'releasing': {
        if (status.code === Status.OK) {
          phase.done();
          return;
        }
        const failure = lossFailure(this.name, status);
        this.#loseLock(failure);
        phase.done(failure);
        return;
      }
    }
  }

  /**
   * The stream broke: open another with the resume token, backing off, until one gets through
   * or the grace is over (from the first break; the server counts from when it noticed, which
   * is no later). A held lock is in doubt meanwhile.
   */
  #resume(cause: Pick<StatusObject, 'code' | 'details'>): void {
    this.#brokenCalls.add(this.#call);
    if (this.#phase.kind !== 'waiting' && !this.#inDoubt) {
      this.#inDoubt = true;
      this.#request.onInDoubt?.();
    }
    const now = performance.now();
    this.#resuming ??= {
      deadline: now + this.#resumeGraceMs,
      attempts: 0,
      timer: setTimeout(() => {
        const call = this.#call;
        this.#resuming = undefined;
        this.#resumeToken = undefined;
        this.#onStatus({
          code: Status.UNAVAILABLE,
          details: `the stream broke (${cause.details || Status[cause.code]}) and could not be resumed within its ${this.#resumeGraceMs} ms grace`,
        });
        call.cancel();
      }, this.#resumeGraceMs),
    };
    const resuming = this.#resuming;
    const backoff =
      Math.min(RESUME_BACKOFF_MAX_MS, RESUME_BACKOFF_MS * 2 ** resuming.attempts) * Math.random();
    resuming.attempts += 1;
    setTimeout(
      () => {
        if (this.#resuming !== resuming || this.#phase.kind === 'ended') return;
        try {
          this.#call = this.#open({
            $case: 'resume',
            value: { resumeToken: this.#resumeToken ?? '', heartbeatInterval: this.#heartbeatInterval() },
          });
        } catch (error) {
          // The LockClient was closed: no stream can be opened any more.
          this.#stopResuming();
          this.#resumeToken = undefined;
          const why = error instanceof Error ? error.message : String(error);
          this.#onStatus({
            code: Status.UNAVAILABLE,
            details: `the stream broke and could not be resumed: ${why}`,
          });
        }
      },
      resuming.attempts === 1 ? 0 : backoff,
    ).unref();
  }

  #stopResuming(): void {
    if (this.#resuming) clearTimeout(this.#resuming.timer);
    this.#resuming = undefined;
  }
}

const unexpectedEnd = { code: Status.UNKNOWN, details: 'the server ended the stream without a release' };

/** Milliseconds as a protobuf Duration. */
export function toDuration(ms: number): Duration {
  const seconds = Math.floor(ms / 1000);
  return { seconds: BigInt(seconds), nanos: Math.round((ms - seconds * 1000) * 1e6) };
}

/** A protobuf Duration in milliseconds; 0 when absent. */
export function fromDuration(duration: Duration | undefined): number {
  return duration === undefined ? 0 : Number(duration.seconds) * 1000 + Math.floor(duration.nanos / 1e6);
}
