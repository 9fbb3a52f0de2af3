import { setTimeout as delay } from 'node:timers/promises';
import {
  InterceptingCall,
  credentials as grpcCredentials,
  type Interceptor,
  status as Status,
  type ChannelCredentials,
  type ChannelOptions,
} from '@grpc/grpc-js';
import { LockServiceClient } from '../gen/lockstream/v1/lockstream.js';
import { onAbort } from '../common/abort.js';
import { acquireCall } from './acquire-translator.js';
import { lockRequest, multiLockRequest, type AcquireOptions, type LockRequest } from './acquire-options.js';
import { endpointList, Endpoints } from './endpoints.js';
import { LockClientClosedError, LockClientError, LockTimeoutError } from './errors.js';
import type { Lock, LockSpec } from './lock.js';
import { LockChannel } from './lock-channel.js';
import type { LockHandle } from './lock-handle.js';
import { LockInspector, type LockDescription, type LockPage } from './lock-inspector.js';
import { sessionCall } from './session-call.js';
import { LockStreamOpening } from './stream-opening.js';

export type { AcquireOptions } from './acquire-options.js';
export type { LockDescription, LockPage, LockRequestInfo } from './lock-inspector.js';

/** How to reach a lockstream server. Every field is optional. */
export interface LockClientOptions {
  /**
   * Transport security: `credentials.createSsl(ca, key, cert)` for TLS (with `key` and `cert`,
   * the client certificate for a server that requires one); plaintext by default.
   */
  readonly credentials?: ChannelCredentials;
  /**
   * A bearer token the server's access policy knows, sent as `authorization: Bearer <token>` on
   * every call. Beyond loopback use it with TLS: over plaintext anyone on the path can read it.
   */
  readonly token?: string;
  /**
   * HTTP/2 keepalive: a ping after this much idle time. Together with `keepaliveTimeoutMs` it
   * bounds how long a dead connection goes unnoticed when heartbeats are off. Default 3000.
   */
  readonly keepaliveTimeMs?: number;
  /** How long a ping may go unanswered before the connection is declared dead. Default 3000. */
  readonly keepaliveTimeoutMs?: number;
  /**
   * How many times `acquire` tries again when the server answers UNAVAILABLE before granting the
   * lock (the server then holds and queues nothing for the caller, so a retry is safe; it queues
   * at the back). Never after a grant: a lost lock is reported, not silently re-acquired.
   * With several endpoints, UNAVAILABLE moves the acquire on to the next endpoint at once, and
   * each retry is one more round of them all. Default 2.
   */
  readonly unavailableRetries?: number;
  /**
   * How long the server keeps a request (its place in the queue, or the held lock) after its
   * stream breaks, for this client to resume it on a new stream: a proxy restart or a short
   * network cut is then a blip (the lock is in doubt, then confirmed), not a loss. Also the
   * lock-delay after this process dies: nobody else gets the lock before the grace is over.
   * Capped by the server's `--max-resume-grace`. 0 turns resuming off. Default 5000.
   *
   * The client counts the grace from the last message it heard from the server, less a margin
   * (a fifth of the grace, at most 1 s), while the server counts it from when it noticed the
   * break, which is later: so `lock.lost` fires before the server can free the lock.
   */
  readonly resumeGraceMs?: number;
  /**
   * Heartbeats in both directions on every lock stream at this interval, so idle-timeout
   * proxies do not cut a quiet stream, and a server gone silent for three intervals (at most the
   * grace less its margin) is noticed: then the stream is resumed, or the lock lost. They also
   * keep the last message heard recent, which the grace is counted from: with heartbeats slower
   * than a third of the grace less its margin, or none, a break after a quiet spell longer than
   * that loses the lock at once. 0 turns them off. Default: a fifth of `resumeGraceMs`, from 100
   * to 1000 (1000 with the default grace, or without a grace).
   */
  readonly heartbeatIntervalMs?: number;
  /**
   * `false` (default): every lock of this client is a request on one Session stream, opened on
   * the first acquire and resumed after a blip, so an acquire costs a message rather than a new
   * HTTP/2 stream. `true`: one Acquire stream per lock, as servers without the Session RPC need
   * (the client also falls back to this by itself when the server answers UNIMPLEMENTED).
   */
  readonly streamPerLock?: boolean;
  /**
   * How long the Session stream stays open without any lock on it before it is closed (a new
   * acquire opens another). An open stream keeps the process running, so a script whose only
   * work was a lock exits this long after its release, or at once after `close()`. Default 250.
   */
  readonly sessionIdleMs?: number;
  /** Further grpc-js channel options; they override the settings above. */
  readonly channelOptions?: ChannelOptions;
}

/** How long past `waitTimeout` the client waits for the server's own verdict before giving up. */
const ANSWER_MARGIN_MS = 5_000;
const RETRY_BACKOFF_MS = 100;

/**
 * A client for a lockstream server. One client holds one channel (one HTTP/2 connection) per
 * endpoint, over which any number of locks can be held at once; it talks to one endpoint at a
 * time. Close it when done (`using` works too).
 *
 * ```ts
 * const locks = new LockClient('127.0.0.1:50051');
 * await using lock = await locks.acquire('billing/invoice-42', { mode: 'write', waitTimeout: 5_000 });
 * await chargeCustomer({ fencingToken: lock.token, signal: lock.lost });
 * ```
 */
export class LockClient implements Disposable {
  readonly #endpoints: Endpoints;
  readonly #inspector: LockInspector;
  readonly #unavailableRetries: number;
  /** Streams of one lock each: the Acquire RPC, translated into the Session's terms. */
  readonly #perLock: LockStreamOpening;
  /** The Session stream every lock goes on; undefined with `streamPerLock` (or an older server). */
  #session: LockChannel | undefined;
  /** The Acquire streams of one lock each, while their request lasts. */
  readonly #streams = new Set<LockChannel>();
  #closed = false;

  /**
   * `address` is `host:port`, or any gRPC target (`dns:///locks.internal:50051`: a name with
   * several addresses is spread over by gRPC's own resolver, on one channel). A list of
   * `host:port` names several lockstream instances on one back end: the client talks to the
   * first, and when a stream breaks or an endpoint is unreachable it moves on to the next, round
   * the list, resuming its session there within the grace (see `resumeGraceMs`). The list must
   * be non-empty, well formed and without duplicates: else LockClientError (INVALID_ARGUMENT).
   */
  constructor(address: string | readonly string[], options: LockClientOptions = {}) {
    const credentials = options.credentials ?? grpcCredentials.createInsecure();
    const channelOptions: ChannelOptions = {
      'grpc.keepalive_time_ms': options.keepaliveTimeMs ?? 3_000,
      'grpc.keepalive_timeout_ms': options.keepaliveTimeoutMs ?? 3_000,
      // Locks are held on streams that carry no data for long stretches: ping through them.
      'grpc.keepalive_permit_without_calls': 1,
      // Channelz is never served from a client; its per-call bookkeeping only costs.
      'grpc.enable_channelz': 0,
      ...options.channelOptions,
      ...(options.token === undefined ? {} : { interceptors: [bearerToken(options.token)] }),
    };
    this.#endpoints = new Endpoints(
      endpointList(address),
      (endpoint) => new LockServiceClient(endpoint, credentials, channelOptions),
    );
    this.#inspector = new LockInspector(this.#endpoints, () => this.#closed);
    this.#unavailableRetries = options.unavailableRetries ?? 2;
    const resumeGraceMs = nonNegative('resumeGraceMs', options.resumeGraceMs ?? 5_000);
    const settings = {
      resumeGraceMs,
      heartbeatIntervalMs: nonNegative(
        'heartbeatIntervalMs',
        options.heartbeatIntervalMs ?? defaultHeartbeatIntervalMs(resumeGraceMs),
      ),
    };
    this.#perLock = new LockStreamOpening(this.#endpoints, settings, acquireCall);
    if (options.streamPerLock !== true) {
      this.#session = new LockChannel(new LockStreamOpening(this.#endpoints, settings, sessionCall), {
        idleMs: nonNegative('sessionIdleMs', options.sessionIdleMs ?? 250),
      });
    }
  }

  /**
   * Waits for the lock and resolves once it is held.
   *
   * Rejects with `LockTimeoutError` when `waitTimeout` passes first; with the signal's reason when
   * `signal` aborts first; with `LockClientError` (its `code` a gRPC status) for anything else,
   * e.g. INVALID_ARGUMENT for a malformed name (checked before sending: such a request never
   * reaches the server). After a rejection nothing is left queued.
   */
  acquire(name: string, options: AcquireOptions = {}): Promise<Lock> {
    let request: LockRequest;
    try {
      request = lockRequest(name, options);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#acquire(request, options.signal);
  }

  /**
   * Takes several locks at once, all or none (2 to 16 distinct names, each a name or a
   * `{ name, mode, limit, weight }`): resolves with one Lock for the whole set, with a token per
   * lock in `tokens`. Multi-locks never deadlock each other, whatever their order or overlap,
   * and no part of a set is ever held alone. One `waitTimeout`, one release, one `lost`.
   * Rejects as `acquire` does; `UNIMPLEMENTED` from a server on the ZooKeeper addon client.
   */
  async acquireAll(
    locks: ReadonlyArray<string | LockSpec>,
    options: Omit<AcquireOptions, 'mode' | 'limit' | 'weight'> = {},
  ): Promise<Lock> {
    const specs = locks.map((lock) => (typeof lock === 'string' ? { name: lock } : lock));
    return this.#acquire(multiLockRequest(specs, options), options.signal);
  }

  async #acquire(request: LockRequest, signal: AbortSignal | undefined): Promise<Lock> {
    signal?.throwIfAborted();
    if (this.#closed) throw new LockClientClosedError(request.name);
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
        return await this.#attempt(attemptRequest, signal);
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

  /**
   * Takes the lock if it is free now, without queuing. Resolves with the held lock, or with
   * `null` when someone holds it in a conflicting mode or is queued ahead.
   */
  async tryAcquire(
    name: string,
    options: Omit<AcquireOptions, 'waitTimeout' | 'onQueued'> = {},
  ): Promise<Lock | null> {
    try {
      return await this.acquire(name, { ...options, waitTimeout: 0 });
    } catch (error) {
      if (error instanceof LockTimeoutError) return null;
      throw error;
    }
  }

  /**
   * Acquires the lock, runs `fn`, and always releases the lock, resolving with what `fn` returns.
   * `fn` gets `lock.lost` as its signal: pass it on to the work, which should stop when it
   * aborts. If the lock was lost while `fn` ran, rejects with `LockLostError` even when `fn`
   * succeeded, since the work was not protected all along.
   */
  async withLock<T>(
    name: string,
    options: AcquireOptions,
    fn: (signal: AbortSignal, lock: Lock) => Promise<T> | T,
  ): Promise<T> {
    const lock = await this.acquire(name, options);
    let result: T;
    try {
      result = await fn(lock.lost, lock);
    } catch (error) {
      await lock[Symbol.asyncDispose]();
      throw error;
    }
    await lock.release();
    return result;
  }

  /** Who holds `name` and who waits for it, in queue order (across every server on the back end). */
  describe(name: string): Promise<LockDescription> {
    return this.#inspector.describe(name);
  }

  /**
   * The state of `name` as `describe` reports it, now and after every change (WatchLock;
   * changes close together may come as one state), for `for await`. It ends cleanly when
   * `signal` aborts or the loop is left; it throws `LockClientError` if the watch fails (the
   * server shuts down: UNAVAILABLE).
   */
  watch(name: string, options: { signal?: AbortSignal } = {}): AsyncGenerator<LockDescription, void> {
    return this.#inspector.watch(name, options.signal);
  }

  /** A page of the locks that have holders or waiters, by name prefix. */
  list(options: { prefix?: string; pageSize?: number; pageToken?: string } = {}): Promise<LockPage> {
    return this.#inspector.list(options);
  }

  /** Whether `token` is held for `name` right now: for resources that check their callers. */
  checkToken(name: string, token: bigint): Promise<boolean> {
    return this.#inspector.checkToken(name, token);
  }

  /**
   * Asks every holder of `name` to release it; with `forceAfter` (ms), takes it away from a
   * holder that has not by then. Resolves with how many holders were asked.
   */
  revoke(
    name: string,
    options: { reason?: string | undefined; forceAfter?: number | undefined } = {},
  ): Promise<number> {
    return this.#inspector.revoke(name, options.reason ?? '', options.forceAfter);
  }

  /**
   * Closes the channels. Locks still held over them are released by the server (their `lost`
   * fires); acquires still waiting and later calls reject with `LockClientClosedError`
   * (FAILED_PRECONDITION).
   */
  close(): void {
    this.#closed = true;
    this.#session?.close();
    for (const stream of [...this.#streams]) stream.close();
    this.#endpoints.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  async #attempt(request: LockRequest, signal: AbortSignal | undefined): Promise<Lock> {
    // Also checked here: the client may be closed while a retry waits.
    if (this.#closed) throw new LockClientClosedError(request.name);
    const session = this.#session;
    const stream = session ? session.acquire(request) : this.#streamPerLock(request);
    // Through one listener per signal: a signal shared by thousands of waits stays O(1) per wait.
    const unlink =
      signal && !signal.aborted ? onAbort(signal, () => stream.cancel(signal.reason)) : undefined;
    // grpc-js has no connection-attempt timeout: bound the wait for the server's answer ourselves.
    const bound = request.waitTimeout === undefined ? undefined : request.waitTimeout + ANSWER_MARGIN_MS;
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
      if (session && error instanceof LockClientError && error.code === Status.UNIMPLEMENTED) {
        if (this.#session === session) this.#session = undefined;
        session.close();
        return this.#attempt(request, signal);
      }
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

  /** `request` on an Acquire stream of its own. */
  #streamPerLock(request: LockRequest): LockHandle {
    const stream: LockChannel = new LockChannel(this.#perLock, {
      idleMs: 0,
      onEmpty: () => this.#streams.delete(stream),
    });
    this.#streams.add(stream);
    return stream.acquire(request);
  }
}

/**
 * Heartbeats often enough that the last message heard is at most a fifth of the grace old when
 * a stream breaks, and a silent server is noticed (three intervals) before the grace less its
 * margin is over: at least once a second, and no more often than the server accepts (100 ms).
 */
function defaultHeartbeatIntervalMs(resumeGraceMs: number): number {
  return resumeGraceMs === 0 ? 1_000 : Math.max(100, Math.min(1_000, resumeGraceMs / 5));
}

function nonNegative(option: string, value: number): number {
  if (!(Number.isFinite(value) && value >= 0)) {
    throw new TypeError(`${option} must be a number of milliseconds >= 0, not ${value}`);
  }
  return value;
}

/**
 * Adds `authorization: Bearer <token>` to every call. An interceptor rather than call
 * credentials: grpc-js refuses call credentials on a plaintext channel, and a token over
 * loopback plaintext (a sidecar, a test) is legitimate.
 */
function bearerToken(token: string): Interceptor {
  if (!/^[\x21-\x7e]+$/.test(token)) {
    throw new TypeError('token must be printable ASCII without spaces (an HTTP/2 header value)');
  }
  const value = `Bearer ${token}`;
  return (options, nextCall) =>
    new InterceptingCall(nextCall(options), {
      start: (metadata, listener, next) => {
        metadata.set('authorization', value);
        next(metadata, listener);
      },
    });
}
