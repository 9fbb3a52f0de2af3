/*
 * How a LockClient's acquire gets its lock (and a campaign its election): one attempt on the
 * request's stream, bounded by the caller's signal and by how long the server may take to
 * answer, and attempts again after UNAVAILABLE, on the next endpoint, within what is left of the
 * wait.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { status as Status } from '@grpc/grpc-js';
import { onAbort } from '../common/abort.js';
import { WAIT_TIMEOUT_MAX_MS } from '../common/limits.js';
import type { LockRequest } from './acquire-options.js';
import type { EndpointRing } from './endpoints.js';
import { LockClientClosedError, LockClientError, LockTimeoutError } from './errors.js';
import type { LockHandle } from './lock-handle.js';
import type { LockStreams } from './lock-streams.js';

/** How long past `waitTimeout` the client waits for the server's own verdict before giving up. */
const ANSWER_MARGIN_MS = 5_000;
const RETRY_BACKOFF_MS = 100;

export class AcquireAttempts {
  readonly #streams: LockStreams;
  readonly #endpoints: EndpointRing;
  readonly #unavailableRetries: number;
  readonly #closed: () => boolean;

  /** `closed` says whether the client was closed (then an attempt rejects with LockClientClosedError). */
  constructor(
    streams: LockStreams,
    endpoints: EndpointRing,
    unavailableRetries: number,
    closed: () => boolean,
  ) {
    this.#streams = streams;
    this.#endpoints = endpoints;
    this.#unavailableRetries = unavailableRetries;
    this.#closed = closed;
  }

  /** Waits for `request`'s lock (see LockClient.acquire). */
  acquire(request: LockRequest, signal: AbortSignal | undefined): Promise<LockHandle> {
    return this.#wait(request, signal, (attempt) => this.#streams.carry(attempt));
  }

  /** Waits for `request`'s candidate to be elected (see LockClient.campaign). */
  campaign(request: LockRequest, signal: AbortSignal | undefined): Promise<LockHandle> {
    return this.#wait(request, signal, (attempt) => this.#streams.campaign(attempt));
  }

  /** Waits for `request`, each attempt on the stream `carry` puts it on. */
  async #wait(
    request: LockRequest,
    signal: AbortSignal | undefined,
    carry: (request: LockRequest) => LockHandle,
  ): Promise<LockHandle> {
    signal?.throwIfAborted();
    if (this.#closed()) throw new LockClientClosedError(request.name);
    // By the monotonic clock: a step of this host's wall clock must not stretch or cut the wait.
    const deadline = request.waitTimeout === undefined ? undefined : performance.now() + request.waitTimeout;
    // Each failed attempt has moved the client on to the next endpoint: a round tries them all.
    const round = this.#endpoints.count;
    for (let attempt = 0; ; attempt += 1) {
      // A retry waits only for what is left of the first attempt's wait.
      const attemptRequest =
        attempt === 0 || deadline === undefined || request.waitTimeout === 0
          ? request
          : { ...request, waitTimeout: Math.max(0, deadline - performance.now()) };
      try {
        return await this.#attempt(attemptRequest, signal, carry);
      } catch (error) {
        const retryable =
          error instanceof LockClientError &&
          error.code === Status.UNAVAILABLE &&
          attempt + 1 < round * (1 + this.#unavailableRetries) &&
          (deadline === undefined || request.waitTimeout === 0 || performance.now() < deadline);
        if (!retryable) throw error;
        // The next endpoint at once; a new round after a backoff.
        if ((attempt + 1) % round === 0) {
          await delay(RETRY_BACKOFF_MS * 2 ** ((attempt + 1) / round - 1), undefined, { signal });
        }
      }
    }
  }

  async #attempt(
    request: LockRequest,
    signal: AbortSignal | undefined,
    carry: (request: LockRequest) => LockHandle,
  ): Promise<LockHandle> {
    // Also checked here: the client may be closed while a retry waits.
    if (this.#closed()) throw new LockClientClosedError(request.name);
    const stream = carry(request);
    // Through one listener per signal: a signal shared by thousands of waits stays O(1) per wait.
    const unlink =
      signal && !signal.aborted ? onAbort(signal, () => stream.cancel(signal.reason)) : undefined;
    // grpc-js has no connection-attempt timeout: bound the wait for the server's answer ourselves
    // (no further than a timer reaches: a longer delay would fire at once).
    const bound =
      request.waitTimeout === undefined
        ? undefined
        : Math.min(request.waitTimeout + ANSWER_MARGIN_MS, WAIT_TIMEOUT_MAX_MS);
    const timer =
      bound === undefined
        ? undefined
        : setTimeout(() => {
            stream.cancel(
              new LockTimeoutError(
                request.name,
                Status.DEADLINE_EXCEEDED,
                `no answer from the server within ${bound} ms`,
              ),
            );
          }, bound);
    try {
      await stream.granted();
    } catch (error) {
      // A server without the Session RPC: one Acquire stream per lock from now on.
      if (this.#streams.withoutSession(stream, error)) return this.#attempt(request, signal, carry);
      throw error;
    } finally {
      unlink?.();
      clearTimeout(timer);
    }
    if (signal?.aborted) {
      // Granted in the same moment as the caller gave up: the caller does not want it.
      await stream[Symbol.asyncDispose]();
      throw signal.reason;
    }
    return stream;
  }
}
