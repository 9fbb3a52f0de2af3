/*
 * One lock request of the SDK from `acquire` to its end, and the Lock its caller holds
 * meanwhile: its phases, moved on by the server's news about it and by its stream's breaks,
 * resumes and end.
 */
import { status as Status } from '@grpc/grpc-js';
import { VALUE_MAX_BYTES } from '../common/limits.js';
import type { SessionResponse } from '../gen/lockstream/v1/lockstream.js';
import type { LockRequest } from './acquire-options.js';
import { LockClientError, LockLostError } from './errors.js';
import { HoldSignals } from './hold-signals.js';
import { HolderAsks, type HolderAsk } from './holder-asks.js';
import type { Lock, LockMode } from './lock.js';
import {
  acquireEnded,
  asksEnded,
  CLIENT_CLOSED,
  holdEnded,
  LET_GO,
  UNKNOWN_AFTER_RESUME,
  type RequestOutcome,
} from './request-outcome.js';
import type { EndStatus } from './session-call.js';
import type { RequestMessage } from './session-requests.js';

const ACQUIRE: RequestMessage = { kind: 'acquire' };
const RELEASE: RequestMessage = { kind: 'release' };
const CANCEL: RequestMessage = { kind: 'cancel' };
const DOWNGRADE = { kind: 'downgrade' } as const;

/** The stream a request travels on, as the request sees it. */
export interface RequestCarrier {
  /** Sends `message` about `lock`, or, while the stream is resumed, once it is back. */
  send(lock: LockHandle, message: RequestMessage): void;
  /** The request is over: its id is free. */
  forget(lock: LockHandle): void;
}

/** waiting → held → releasing → ended, or waiting → cancelled → ended. */
type Phase = 'waiting' | 'cancelled' | 'held' | 'releasing' | 'ended';

/**
 * One lock request of the SDK, from `acquire` to its end: the lock while it is held. The same
 * whichever RPC carries it: its carrier feeds it the server's news about it (`onMessage`, in
 * the Session RPC's terms) and the stream's breaks, resumes and end; it keeps the grant and its
 * token, the release, and the holder's asks; what the holder is told about its hold (doubt,
 * revocation, loss) is its HoldSignals'.
 */
export class LockHandle extends HoldSignals implements Lock {
  /** The request's number on its stream. */
  readonly id: number;
  readonly name: string;
  /** `read` once a write lock is downgraded. */
  mode: LockMode;
  readonly request: LockRequest;
  /** Whether the server may have heard of this request (its `acquire` went out on a stream). */
  sentToServer = false;
  /** The stream it travels on. */
  readonly carrier: RequestCarrier;
  #phase: Phase = 'waiting';
  #downgraded = false;
  readonly #granted: Promise<bigint>;
  #grant!: { resolve: (token: bigint) => void; reject: (error: unknown) => void };
  #token: bigint | undefined;
  #tokens: ReadonlyArray<{ readonly name: string; readonly token: bigint }> = [];
  #released: Promise<void> | undefined;
  /** Settles `release()` once the request ends (set while releasing). */
  #releaseDone: ((error?: LockClientError) => void) | undefined;
  /** Made for the holder's first ask. */
  #asks: HolderAsks | undefined;

  constructor(carrier: RequestCarrier, id: number, request: LockRequest) {
    super(request);
    this.carrier = carrier;
    this.id = id;
    this.name = request.name;
    this.mode = request.mode;
    this.request = request;
    // No `.catch` guard: the LockClient awaits `granted()` as soon as the handle is made.
    this.#granted = new Promise((resolve, reject) => (this.#grant = { resolve, reject }));
  }

  get token(): bigint {
    if (this.#token === undefined) throw new Error('INVARIANT: token read before the lock was granted');
    return this.#token;
  }

  get tokens(): ReadonlyArray<{ readonly name: string; readonly token: bigint }> {
    return this.#tokens.length > 0 ? this.#tokens : [{ name: this.name, token: this.token }];
  }

  /** Resolves with the token once granted; rejects with the reason the request failed. */
  granted(): Promise<bigint> {
    return this.#granted;
  }

  /** Gives up waiting, rejecting `granted()` with `reason`; the server withdraws the request. */
  cancel(reason: unknown): void {
    if (this.#phase !== 'waiting') return;
    this.#phase = 'cancelled';
    this.#grant.reject(reason);
    this.carrier.send(this, CANCEL);
  }

  release(): Promise<void> {
    this.#released ??= new Promise<void>((resolve, reject) => {
      const lossFailure = this.lossFailure;
      if (lossFailure) {
        reject(lossFailure);
        return;
      }
      if (this.#phase !== 'held') {
        reject(new Error('INVARIANT: release() before the lock was granted'));
        return;
      }
      this.#phase = 'releasing';
      this.#releaseDone = (error) => (error ? reject(error) : resolve());
      this.carrier.send(this, RELEASE);
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

  setValue(value: Uint8Array | string): Promise<void> {
    const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : Buffer.from(value);
    if (bytes.byteLength > VALUE_MAX_BYTES) {
      return this.#refuse(
        Status.INVALID_ARGUMENT,
        `value is ${bytes.byteLength} bytes; the limit is ${VALUE_MAX_BYTES}`,
      );
    }
    return this.#ask({ kind: 'value', value: bytes });
  }

  downgrade(): Promise<void> {
    if (this.mode !== 'write' && !this.#downgraded) {
      return this.#refuse(
        Status.FAILED_PRECONDITION,
        `only a write lock can be downgraded, not a ${this.mode} lock; nothing is upgraded (release it and acquire a write lock)`,
      );
    }
    return this.#ask(DOWNGRADE);
  }

  /** The message that queues the request (marks it as possibly known to the server). */
  acquireMessage(): RequestMessage {
    this.sentToServer = true;
    return ACQUIRE;
  }

  /** News from the server about this request, in the Session RPC's terms. */
  onMessage(kind: SessionResponse['kind']): void {
    const phase = this.#phase;
    switch (kind?.$case) {
      case 'queued':
        if (phase === 'waiting') this.request.onQueued?.(kind.value.ahead);
        return;
      case 'acquired':
        if (phase === 'waiting') {
          this.#phase = 'held';
          this.#token = kind.value.fencingToken;
          if (kind.value.tokens.length > 0) {
            this.#tokens = kind.value.tokens.map(({ name, fencingToken }) => ({ name, token: fencingToken }));
          }
          this.#grant.resolve(kind.value.fencingToken);
        }
        // Otherwise: the report of a resumed stream (the same token), or a grant that crossed
        // our cancel (the server releases it on the cancel).
        return;
      case 'inDoubt':
        if (phase === 'held' || phase === 'releasing') this.doubt();
        return;
      case 'confirmed':
        this.confirm();
        return;
      case 'revokeRequested':
        if (phase === 'held') this.revoke({ reason: kind.value.reason, forceAt: kind.value.forceAt });
        return;
      case 'ended': {
        const code: Status = kind.value.code;
        this.#end({ code, details: kind.value.message });
        return;
      }
      case 'valueSet':
        this.#asks?.acknowledged('value');
        return;
      case 'downgraded':
        this.mode = 'read';
        this.#downgraded = true;
        this.#asks?.acknowledged('downgrade');
        return;
      case 'released':
      case 'opened':
      case 'resumed':
      case 'heartbeat':
      case undefined:
        // `released` is followed by the request's end, which settles the release; the others
        // are about the stream; a kind this client does not know (a newer server's) is ignored.
        return;
    }
  }

  /** The stream broke and is being resumed: a held lock is in doubt meanwhile. */
  streamBroke(): void {
    if (this.#phase === 'held' || this.#phase === 'releasing') this.doubt();
  }

  /** The resumed stream reported this request: still ours. Re-sends what the break may have lost. */
  resumed(): void {
    const phase = this.#phase;
    if (phase === 'held' || phase === 'releasing') this.confirm();
    this.#asks?.forEach((ask) => this.carrier.send(this, ask));
    if (phase === 'releasing') this.carrier.send(this, RELEASE);
    if (phase === 'cancelled') this.carrier.send(this, CANCEL);
  }

  /** Still waiting for its grant (not let go): asking again for a request the server lost is harmless. */
  get waiting(): boolean {
    return this.#phase === 'waiting';
  }

  /** The resumed stream does not have this request: it ended, and its end was lost. */
  unknownAfterResume(): void {
    // Let go before the break: gone because the server did what was asked (its `ended` was lost).
    const phase = this.#phase;
    this.#end(phase === 'releasing' || phase === 'cancelled' ? LET_GO : UNKNOWN_AFTER_RESUME);
  }

  /** The stream ended with `status`: so did this request. */
  streamEnded(status: EndStatus): void {
    this.#end(status);
  }

  /** The LockClient was closed (the request was given up on the stream). */
  clientClosed(): void {
    this.#end(CLIENT_CLOSED);
  }

  /** Sends a holder's ask; resolves once the server has done it (see HolderAsks.acknowledged). */
  #ask(ask: HolderAsk): Promise<void> {
    const lossFailure = this.lossFailure;
    if (lossFailure) return Promise.reject(lossFailure);
    if (this.#phase !== 'held') {
      return this.#refuse(
        Status.FAILED_PRECONDITION,
        this.#released ? 'the lock was released' : 'the lock is not held yet',
      );
    }
    const done = (this.#asks ??= new HolderAsks()).add(ask);
    this.carrier.send(this, ask);
    return done;
  }

  /** A holder's ask refused on this side, before anything is sent. */
  #refuse(code: Status, details: string): Promise<never> {
    return Promise.reject(new LockClientError(this.name, code, details));
  }

  /**
   * The request is over with `outcome`, as it stood: still waiting (a failed acquire), held (a
   * loss), releasing (OK settles the release; anything else is a loss), or cancelled (nobody
   * waits).
   */
  #end(outcome: RequestOutcome): void {
    const phase = this.#phase;
    if (phase === 'ended') return;
    this.#phase = 'ended';
    this.carrier.forget(this);
    if (phase === 'cancelled') return;
    if (this.#asks?.waiting) this.#asks.failAll(asksEnded(this.name, outcome));
    if (phase === 'waiting') {
      this.#grant.reject(acquireEnded(this.name, outcome));
      return;
    }
    if (phase === 'held') {
      // The request ended while we held the lock and had not asked to release it.
      this.#lose(holdEnded(this.name, outcome));
      return;
    }
    const done = this.#releaseDone!;
    if (outcome.code === Status.OK) {
      done();
      return;
    }
    const failure = holdEnded(this.name, outcome);
    this.#lose(failure);
    done(failure);
  }

  /** The held lock is lost: the holder is told, and its asks fail with the loss. */
  #lose(failure: LockLostError): void {
    this.lose(failure);
    this.#asks?.failAll(failure);
  }
}
