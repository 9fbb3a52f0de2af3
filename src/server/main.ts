/*
 * Starting a lockstream server from its Config: the security files, the store, the engine and its
 * sessions, the gRPC and HTTP servers, wired in that order and stopped in the reverse.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { onAbort } from '../common/abort.js';
import type { Config } from './config.js';
import { LockEngine, LockInspector, LockSessions, locksPathOf } from './engine/index.js';
import { keepHeapNearLive, MemoryReclaimer } from './memory-reclaimer.js';
import { MemoryStore } from './stores/memory/memory-store.js';
import type { StoreBackend } from './stores/store.js';
import type { RequestTimer } from './stores/zookeeper/session-requests.js';
import { ZooKeeperStore } from './stores/zookeeper/zookeeper-store.js';
import { HttpServer } from './observability/http-server.js';
import { Metrics } from './observability/metrics.js';
import { Readiness } from './observability/readiness.js';
import { GrpcServer } from './transport/grpc-server.js';
import { GuardedRecords } from './records/guarded-records.js';
import { loadSecurity, type Security } from './security/security.js';
import { plantedBug } from './planted-bugs.js';

export interface RunningServer {
  /** The bound gRPC port. */
  readonly port: number;
  /** The bound HTTP port, when --http-port is set. */
  readonly httpPort: number | undefined;
  /** Whether the instance should be sent calls: /readyz, gRPC health checking. */
  readonly readiness: Readiness;
  readonly store: StoreBackend;
  readonly engine: LockEngine;
  /** Every session of this server, and the requests they keep. */
  readonly sessions: LockSessions;
  /** Resolves once every call has ended and released its lock. */
  whenIdle(): Promise<void>;
  /**
   * Graceful stop: not ready at once, still serving for the drain delay; then resumable sessions
   * are handed over (or released), streams end with UNAVAILABLE and the store's session closes.
   * Idempotent.
   */
  stop(): Promise<void>;
}

/** config -> store -> engine -> transport, and the reverse order on stop. */
export async function startServer(config: Readonly<Config>, logger: Logger): Promise<RunningServer> {
  routeGrpcLogs(logger.child({ component: 'grpc-js' }));
  // Files first: a bad certificate or access policy is reported before anything connects.
  const security = await loadSecurity(config);
  const instanceId = randomUUID();
  // Made before the store, which tells it each request's round trip; scraped only once it is open.
  const metrics = new Metrics({
    backend: config.backend,
    confirmed: () => store.session.confirmed,
    ready: () => readiness.ready,
  });
  const store = await openStore(
    config,
    security.zookeeperDigest,
    instanceId,
    logger.child({ component: 'store' }),
    (operation, seconds, answered) => metrics.storeOperation(operation, seconds, answered),
  );
  const readiness = new Readiness({ store: store.kind, logger: logger.child({ component: 'readiness' }) });
  const engineFor = (on: StoreBackend): LockEngine =>
    new LockEngine({
      store: on,
      replacement: on,
      records: on,
      rootPath: config.rootPath,
      logger: logger.child({ component: 'engine' }),
      instanceId,
      maxWaitersPerLock: config.maxWaitersPerLock,
    });
  const engine = engineFor(store);
  const sessions = new LockSessions({
    engine,
    logger: logger.child({ component: 'sessions' }),
    instanceId,
    maxResumeGraceMs: config.maxResumeGraceMs,
    events: (event, kind) => metrics.sessionEvent(event, kind),
    takeover: store.takeover && { sessions: store.takeover, engineFor, accounting: metrics },
  });
  const inspector = new LockInspector({ store, listing: store, engine });
  const records = new GuardedRecords({ store, records: store, inspector, rootPath: config.rootPath });
  const server = new GrpcServer({
    sessions,
    inspector,
    engine,
    store,
    records,
    metrics,
    logger: logger.child({ component: 'transport' }),
    keepaliveTimeMs: config.keepaliveTimeMs,
    keepaliveTimeoutMs: config.keepaliveTimeoutMs,
    maxStreamsPerConnection: config.maxStreamsPerConnection,
    maxRequestsPerSession: config.maxRequestsPerSession,
    maxMessageBytes: config.maxMessageBytes,
    credentials: security.credentials,
    gate: security.gate,
  });
  const http =
    config.httpPort === undefined
      ? undefined
      : new HttpServer({
          metrics,
          inspector,
          records,
          readiness,
          logger: logger.child({ component: 'http' }),
          admits: security.admitsHttp,
        });
  let port: number;
  let httpPort: number | undefined;
  try {
    port = await server.listen(config.host, config.port);
    if (http) {
      httpPort = await http.listen(config.httpHost, config.httpPort ?? 0);
      logger.info(
        { httpHost: config.httpHost, httpPort },
        `page on http://${config.httpHost}:${httpPort}/, metrics on /metrics, probes on /livez and /readyz`,
      );
    }
  } catch (error) {
    await server.shutdown(0);
    await store.close();
    throw error;
  }
  logger.info(
    {
      host: config.host,
      port,
      backend: store.kind,
      tls: security.tls,
      authenticated: security.authenticated,
    },
    `lockstream listening on ${config.host}:${port}`,
  );
  for (const warning of exposureWarnings(config, security)) logger.warn(warning);
  if (plantedBug !== undefined)
    logger.warn(
      { plantedBug },
      `a bug is planted in this server on purpose (LOCKSTREAM_PLANTED_BUG=${plantedBug})`,
    );
  // gRPC health checking says what /readyz says, turned by the same change.
  readiness.onChange((ready) => server.setServing(ready));
  server.setServing(readiness.ready);
  const unwatchHealth = followSessionHealth(store, (confirmed) => readiness.setStoreConfirmed(confirmed));
  keepHeapNearLive();
  const reclaimer = new MemoryReclaimer({
    requests: () => sessions.size,
    logger: logger.child({ component: 'memory' }),
  });

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      // Not ready before anything is handed over or released: load balancers and probes turn
      // away first, while every call is still served.
      readiness.drain('the instance is stopping');
      logger.info({ drainDelayMs: config.drainDelayMs }, 'shutting down');
      if (config.drainDelayMs > 0) await setTimeout(config.drainDelayMs);
      unwatchHealth();
      reclaimer.stop();
      const handOver = config.onStop === 'hand-over' && store.takeover !== undefined;
      // Handed over first: the streams' shutdown would end (and release) what they carry.
      const handedOver = handOver ? sessions.handOverAll(store) : undefined;
      await server.shutdown(config.shutdownGraceMs);
      await http?.close();
      if (handedOver) {
        // The store session lives on, with every resumable session's locks, until another
        // instance takes it over or the longest grace passes.
        await handedOver;
      } else {
        // Requests kept for a resume that can no longer come: release them with the session.
        await sessions.close();
        await store.close();
      }
      logger.info('stopped');
    })();
    return stopping;
  };
  return {
    port,
    httpPort,
    readiness,
    store,
    engine,
    sessions,
    stop,
    whenIdle: () => server.whenIdle(),
  };
}

/**
 * What start-up must warn about, loudly: a port reachable beyond this machine without
 * protection (anyone who can reach the gRPC port could take, hold and revoke any lock; anyone
 * who can reach the HTTP port sees every lock, owner and peer).
 */
export function exposureWarnings(
  config: Readonly<Config>,
  security: Pick<Security, 'tls' | 'authenticated' | 'admitsHttp'>,
): string[] {
  const warnings: string[] = [];
  if (!isLoopback(config.host) && !(security.tls && security.authenticated)) {
    const missing = [
      ...(security.tls ? [] : ['TLS (--tls-cert, --tls-key)']),
      ...(security.authenticated ? [] : ['authentication (--auth-file or --tls-client-ca)']),
    ];
    warnings.push(
      `listening on ${config.host} beyond loopback without ${missing.join(' or ')}: anyone who can reach this port can take, hold and revoke any lock`,
    );
  }
  if (config.httpPort !== undefined && !isLoopback(config.httpHost) && !security.admitsHttp) {
    warnings.push(
      `HTTP port on ${config.httpHost} beyond loopback without --http-auth: anyone who can reach it sees every lock, owner and peer`,
    );
  }
  return warnings;
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

async function openStore(
  config: Readonly<Config>,
  digest: string | undefined,
  instanceId: string,
  logger: Logger,
  timeRequest: RequestTimer,
): Promise<StoreBackend> {
  if (config.backend === 'memory') {
    logger.warn(
      'using the embedded in-memory store: single process, locks do not survive a restart; use --zookeeper for high availability',
    );
    return new MemoryStore();
  }
  const zookeeper = config.zookeeper ?? '';
  logger.info(
    { zookeeper, client: config.zookeeperClient, root: config.rootPath, protected: digest !== undefined },
    `connecting to ZooKeeper at ${zookeeper}`,
  );
  const store = await ZooKeeperStore.connect({
    connectString: zookeeper,
    sessionTimeoutMs: config.sessionTimeoutMs,
    connectTimeoutMs: config.connectTimeoutMs,
    client: config.zookeeperClient,
    logger,
    timeRequest,
    // Published for other instances to take over (the addon has no multi to fence with).
    ...(config.zookeeperClient === 'protocol'
      ? { publish: { root: config.rootPath, owner: instanceId } }
      : {}),
    ...(digest === undefined ? {} : { protection: { digest, root: config.rootPath } }),
    ...(config.zookeeperWatch === 'tree' ? { locksPath: locksPathOf(config.rootPath) } : {}),
  });
  return store;
}

/**
 * Calls `report` with whether the store's current session is confirmed, now and on every change,
 * following the store from a lost session to its next one. Returns a function that stops it.
 */
function followSessionHealth(store: StoreBackend, report: (serving: boolean) => void): () => void {
  let stopped = false;
  let unsubscribe = (): void => {};
  const follow = (): void => {
    if (stopped) return;
    const session = store.session;
    report(session.confirmed);
    const unsubscribeChange = session.onConfirmedChange(report);
    // The store has put the next session in place by the time the lost one aborts.
    const unlinkLost = onAbort(session.lost, () => {
      unsubscribeChange();
      follow();
    });
    unsubscribe = () => {
      unsubscribeChange();
      unlinkLost();
    };
  };
  follow();
  return () => {
    stopped = true;
    unsubscribe();
  };
}

/**
 * Loaded lazily: the embedded path never loads the native addon, and `zookeeper` is an optional
 * dependency, so an install without a C toolchain still serves locks on the embedded store.
 */
function routeGrpcLogs(logger: Logger): void {
  grpc.setLogger({
    error: (...args: unknown[]) => logger.error(args.map(String).join(' ')),
    info: (...args: unknown[]) => logger.debug(args.map(String).join(' ')),
    debug: (...args: unknown[]) => logger.trace(args.map(String).join(' ')),
  });
}
