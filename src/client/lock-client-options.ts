/*
 * What a LockClient can be told (LockClientOptions), and what it makes of it: the gRPC channel
 * settings of its connections, and the settings its lock streams ask for.
 */
import {
  InterceptingCall,
  credentials as grpcCredentials,
  type Interceptor,
  type ChannelCredentials,
  type ChannelOptions,
} from '@grpc/grpc-js';
import type { StreamSettings } from './stream-opening.js';
import { HEARTBEAT_INTERVAL_MIN_MS } from '../common/limits.js';
import { checkStreamOptions } from './request-checks.js';

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

/** How a LockClient's connections are made. */
export interface ConnectionSettings {
  readonly credentials: ChannelCredentials;
  readonly channelOptions: ChannelOptions;
}

/** The connections `options` ask for; throws a TypeError for a token that cannot be sent. */
export function connectionSettings(options: LockClientOptions): ConnectionSettings {
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
  return { credentials, channelOptions };
}

/** What every lock stream of a client made with `options` asks for; throws a TypeError for a bad one. */
export function streamSettings(options: LockClientOptions): StreamSettings {
  const resumeGraceMs = nonNegative('resumeGraceMs', options.resumeGraceMs ?? 5_000);
  const settings = {
    resumeGraceMs,
    heartbeatIntervalMs: nonNegative(
      'heartbeatIntervalMs',
      options.heartbeatIntervalMs ?? defaultHeartbeatIntervalMs(resumeGraceMs),
    ),
  };
  checkStreamOptions(settings.resumeGraceMs, settings.heartbeatIntervalMs);
  return settings;
}

/**
 * Heartbeats often enough that the last message heard is at most a fifth of the grace old when
 * a stream breaks, and a silent server is noticed (three intervals) before the grace less its
 * margin is over: at least once a second, and no more often than the server accepts.
 */
function defaultHeartbeatIntervalMs(resumeGraceMs: number): number {
  return resumeGraceMs === 0
    ? 1_000
    : Math.max(HEARTBEAT_INTERVAL_MIN_MS, Math.min(1_000, resumeGraceMs / 5));
}

export function nonNegative(option: string, value: number): number {
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
