/*
 * Which stream each lock request of a LockClient goes on: the client's one Session stream, or
 * an Acquire stream of its own (with `streamPerLock`, or once the server turned out to have no
 * Session RPC); and each candidate, on a Campaign stream of its own.
 */
import { status as Status } from '@grpc/grpc-js';
import { acquireCall } from './acquire-translator.js';
import { campaignCall } from './campaign-translator.js';
import type { LockRequest } from './acquire-options.js';
import type { Endpoints } from './endpoints.js';
import { LockClientError } from './errors.js';
import { LockChannel } from './lock-channel.js';
import type { LockHandle } from './lock-handle.js';
import { sessionCall } from './session-call.js';
import { LockStreamOpening, type StreamSettings } from './stream-opening.js';

export class LockStreams {
  /** Streams of one lock each: the Acquire RPC, translated into the Session's terms. */
  readonly #perLock: LockStreamOpening;
  /** Streams of one candidate each: the Campaign RPC, translated into the Session's terms. */
  readonly #perCampaign: LockStreamOpening;
  /** The Session stream; undefined with `streamPerLock`. */
  readonly #shared: LockChannel | undefined;
  /** The Session stream every lock goes on; undefined with `streamPerLock` (or an older server). */
  #session: LockChannel | undefined;
  /** The Acquire and Campaign streams of one request each, while their request lasts. */
  readonly #streams = new Set<LockChannel>();

  /**
   * `sessionIdleMs`: how long the Session stream stays open without a request; undefined, with
   * `streamPerLock`: no Session stream.
   */
  constructor(endpoints: Endpoints, settings: StreamSettings, sessionIdleMs: number | undefined) {
    this.#perLock = new LockStreamOpening(endpoints, settings, acquireCall);
    this.#perCampaign = new LockStreamOpening(endpoints, settings, campaignCall);
    if (sessionIdleMs !== undefined) {
      this.#shared = new LockChannel(new LockStreamOpening(endpoints, settings, sessionCall), {
        idleMs: sessionIdleMs,
      });
      this.#session = this.#shared;
    }
  }

  /** Queues `request` on its stream: the Session stream, else an Acquire stream of its own. */
  carry(request: LockRequest): LockHandle {
    return this.#session ? this.#session.acquire(request) : this.#streamOfItsOwn(this.#perLock, request);
  }

  /**
   * Queues `request` as a candidate, on a Campaign stream of its own: resumed after a break,
   * kept alive and failed over as an Acquire stream is (the Session RPC carries no candidates).
   */
  campaign(request: LockRequest): LockHandle {
    return this.#streamOfItsOwn(this.#perCampaign, request);
  }

  /**
   * Whether `lock` failed with `error` because the server has no Session RPC: then every lock
   * goes on an Acquire stream of its own from now on, and `lock` is worth asking for again.
   */
  withoutSession(lock: LockHandle, error: unknown): boolean {
    const session = this.#shared;
    if (session === undefined || lock.carrier !== session) return false;
    if (!(error instanceof LockClientError && error.code === Status.UNIMPLEMENTED)) return false;
    if (this.#session === session) this.#session = undefined;
    session.close();
    return true;
  }

  /** Closes every stream: what they carry ends (see LockChannel.close). */
  close(): void {
    this.#session?.close();
    for (const stream of [...this.#streams]) stream.close();
  }

  /** `request` on a stream of its own, of `opening`'s RPC. */
  #streamOfItsOwn(opening: LockStreamOpening, request: LockRequest): LockHandle {
    const stream: LockChannel = new LockChannel(opening, {
      idleMs: 0,
      onEmpty: () => this.#streams.delete(stream),
    });
    this.#streams.add(stream);
    return stream.acquire(request);
  }
}
