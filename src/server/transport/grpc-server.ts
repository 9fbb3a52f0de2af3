/*
 * The gRPC server (GrpcServer): the lock service, health checking and reflection on one port, the
 * lock streams open on it, and its shutdown.
 */
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import type { Logger } from 'pino';
import { LockServiceService, type LockServiceServer } from '../../gen/lockstream/v1/lockstream.js';
import { ElectionServiceService } from '../../gen/lockstream/v1/election.js';
import { RecordServiceService } from '../../gen/lockstream/v1/records.js';
import { createElectionHandlers } from './election-handlers.js';
import { createRecordHandlers } from './record-handlers.js';
import type { GuardedRecords } from '../records/guarded-records.js';
import type { CoordinationStore } from '../stores/store.js';
import { unboundedController } from '../../common/abort.js';
import type { LockEngine, LockInspector, LockSessions } from '../engine/index.js';
import type { Metrics } from '../observability/metrics.js';
import { LockError } from '../lock-error.js';
import { ACQUIRE_WIRE } from './acquire-wire.js';
import { lockStreamHandler } from './lock-stream.js';
import { sessionWire } from './session-wire.js';
import { createUnaryHandlers } from './unary-handlers.js';
import { addReflection } from './reflection.js';
import { installCallDeadlines } from './call-deadline.js';
import { OpenStreams } from './open-streams.js';
import { RequestSizeLimit } from './request-size.js';
import type { Gate } from '../security/gate.js';

export interface GrpcServerOptions {
  /** The sessions that carry lock requests, resumable ones included; the lock engine is behind them. */
  readonly sessions: LockSessions;
  /** Answers DescribeLock, ListLocks and CheckToken. */
  readonly inspector: LockInspector;
  /** Carries out RevokeLock, Resign and Proclaim, and keeps the elections' history. */
  readonly engine: LockEngine;
  /** What Observe watches. */
  readonly store: CoordinationStore;
  /** Answers PutRecord, GetRecord and DeleteRecord. */
  readonly records: GuardedRecords;
  readonly metrics: Metrics;
  readonly logger: Logger;
  /**
   * HTTP/2 keepalive: a ping after this much idle time on a connection, and the connection
   * (with every lock held over it) is dropped when no answer comes within `keepaliveTimeoutMs`.
   * This is what frees the locks of a client whose host vanished without closing its socket.
   */
  readonly keepaliveTimeMs: number;
  readonly keepaliveTimeoutMs: number;
  /** HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS: Acquire calls per client connection. */
  readonly maxStreamsPerConnection: number;
  /** Requests one Session stream may have at once. */
  readonly maxRequestsPerSession: number;
  /** Larger lock requests end alone with RESOURCE_EXHAUSTED (see RequestSizeLimit). */
  readonly maxMessageBytes: number;
  /** Plaintext, TLS or mTLS on the port. */
  readonly credentials: grpc.ServerCredentials;
  /** Admits each call's caller, and says what it may do. */
  readonly gate: Gate;
}

const LOCK_SERVICE = 'lockstream.v1.LockService';
const ELECTION_SERVICE = 'lockstream.v1.ElectionService';
const RECORD_SERVICE = 'lockstream.v1.RecordService';

/** The gRPC face of lockstream: the lock service, health checking and server reflection (v1 and v1alpha). */
export class GrpcServer {
  readonly #server: grpc.Server;
  readonly #logger: Logger;
  readonly #credentials: grpc.ServerCredentials;
  readonly #shutdown = unboundedController();
  /** The open lock streams: calls whose lock request (or session) has not ended or been detached. */
  readonly #streams = new OpenStreams(this.#shutdown.signal);
  /**
   * grpc.health.v1, for probes and load balancers: SERVING while the coordination store can
   * vouch for its session (see `setServing`), NOT_SERVING from the start of shutdown on.
   */
  readonly #health = new HealthImplementation({
    '': 'SERVING',
    [LOCK_SERVICE]: 'SERVING',
    [ELECTION_SERVICE]: 'SERVING',
    [RECORD_SERVICE]: 'SERVING',
  });

  constructor(options: GrpcServerOptions) {
    this.#logger = options.logger;
    this.#credentials = options.credentials;
    installCallDeadlines();
    const requestSize = new RequestSizeLimit(options.maxMessageBytes);
    this.#server = new grpc.Server({
      'grpc.keepalive_time_ms': options.keepaliveTimeMs,
      'grpc.keepalive_timeout_ms': options.keepaliveTimeoutMs,
      // Clients may ping every second, even between calls, without being cut off (the SDK
      // pings every 3 s whatever this server's own interval).
      'grpc.http2.min_ping_interval_without_data_ms': Math.min(options.keepaliveTimeMs, 1_000),
      'grpc.keepalive_permit_without_calls': 1,
      'grpc.max_concurrent_streams': options.maxStreamsPerConnection,
      // Above the request limit, so that a request over it is refused alone (a Session goes on).
      'grpc.max_receive_message_length': requestSize.receiveLimitBytes,
      // Nothing serves channelz here; its per-call bookkeeping would only cost time and memory.
      'grpc.enable_channelz': 0,
    });
    // What both lock-holding RPCs need: the requests, shutdown, metrics, the gate and the open streams.
    const streamOptions = {
      sessions: options.sessions,
      logger: options.logger,
      shutdown: this.#shutdown.signal,
      metrics: options.metrics,
      gate: options.gate,
      requestSize,
      streams: this.#streams,
    };
    const lockService: LockServiceServer = {
      acquire: lockStreamHandler(ACQUIRE_WIRE, streamOptions),
      session: lockStreamHandler(sessionWire(options.maxRequestsPerSession), streamOptions),
      ...createUnaryHandlers({ ...options, shutdown: this.#shutdown.signal }, options.logger),
    };
    this.#server.addService(requestSize.noting(LockServiceService, ['acquire', 'session']), lockService);
    this.#server.addService(
      requestSize.noting(ElectionServiceService, ['campaign']),
      createElectionHandlers(streamOptions, {
        engine: options.engine,
        store: options.store,
        logger: options.logger,
      }),
    );
    this.#server.addService(
      RecordServiceService,
      createRecordHandlers(options.records, {
        gate: options.gate,
        logger: options.logger,
        metrics: options.metrics,
      }),
    );
    this.#health.addToServer(this.#server);
    addReflection(this.#server);
  }

  /** Reports through health checking whether locks can be granted and vouched for now. */
  setServing(serving: boolean): void {
    if (!this.#shutdown.signal.aborted) this.#reportHealth(serving);
  }

  /** The same status for the server as a whole ('') and for the lock service. */
  #reportHealth(serving: boolean): void {
    const status = serving ? 'SERVING' : 'NOT_SERVING';
    this.#health.setStatus('', status);
    this.#health.setStatus(LOCK_SERVICE, status);
    this.#health.setStatus(ELECTION_SERVICE, status);
    this.#health.setStatus(RECORD_SERVICE, status);
  }

  /** Calls whose handler has not finished (a lock held or queued, or being released). */
  get openCalls(): number {
    return this.#streams.size;
  }

  /** Resolves once no call is open: every lock taken through this server has been released. */
  whenIdle(): Promise<void> {
    return this.#streams.whenIdle();
  }

  /** Binds `host:port` (port 0 picks a free one) and resolves with the bound port. */
  listen(host: string, port: number): Promise<number> {
    const address = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
    return new Promise((resolve, reject) => {
      this.#server.bindAsync(address, this.#credentials, (error, bound) => {
        if (error) reject(error);
        else resolve(bound);
      });
    });
  }

  /**
   * Ends every open Acquire stream with UNAVAILABLE (releasing its lock), lets the calls
   * finish for up to `graceMs`, then closes whatever is left. Idempotent.
   */
  async shutdown(graceMs: number): Promise<void> {
    if (this.#shutdown.signal.aborted) return;
    this.#reportHealth(false);
    // Streams never end by themselves, so tryShutdown alone would always wait out the grace.
    this.#shutdown.abort(new LockError('SHUTTING_DOWN', 'the lockstream server is shutting down'));
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.#logger.warn({ graceMs }, 'calls still open after the grace period; closing them');
        this.#server.forceShutdown();
        resolve();
      }, graceMs);
      this.#server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
    // Handlers release their locks after their calls end; the store must outlive that.
    await this.whenIdle();
  }
}
