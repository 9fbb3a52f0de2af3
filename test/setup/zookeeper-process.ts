/**
 * Starts a throwaway, standalone Apache ZooKeeper server for integration tests: an ensemble of
 * one run standalone (zookeeper-ensemble.ts starts it), seen as one process.
 */
import { startZooKeeperEnsemble } from './zookeeper-ensemble.js';
import { sendFourLetterWord } from './zookeeper-member.js';
import { scaled } from '../support/timing.js';

// What callers of the single-server harness use from the shared one.
export { findZooKeeperInstallation, type ZooKeeperInstallation } from './zookeeper-installation.js';
export { killOnExit, sendFourLetterWord } from './zookeeper-member.js';
export { findFreePort } from './zookeeper-ports.js';

export interface StartZooKeeperOptions {
  /** ZooKeeper's tick; session expiry is checked at this granularity. Default 200 ms. */
  tickTimeMs?: number;
  /** Smallest session timeout the server grants. Default 2 * tickTime (ZooKeeper's own rule). */
  minSessionTimeoutMs?: number;
  /** Largest session timeout the server grants. Default 60 000 ms. */
  maxSessionTimeoutMs?: number;
  /** Overall time allowed from spawn to "serving requests". Default 60 000 ms. */
  startTimeoutMs?: number;
  /** Receives every line the server prints (stdout and stderr). */
  logger?: (line: string) => void;
  /**
   * Run as in production: fsync every transaction and keep ZooKeeper's default container check
   * (60 s). For benchmarks; tests skip the fsync and reap empty containers within a second.
   */
  production?: boolean;
  /**
   * Connections one client IP may hold (zoo.cfg `maxClientCnxns`; 0 = no limit). Default 0:
   * every test client comes from 127.0.0.1. ZooKeeper's own default is 60.
   */
  maxClientCnxns?: number;
}

export interface ZooKeeperProcess {
  /** "127.0.0.1:PORT", ready to hand to a client. */
  readonly connectString: string;
  readonly port: number;
  /** The JVM's pid (the child we spawned, not a wrapper script). */
  readonly pid: number;
  /** The temp dir holding everything for this server; removed by stop(). */
  readonly dir: string;
  /** ZooKeeper's dataDir (snapshots and txn logs), inside `dir`. */
  readonly dataDir: string;
  /** The full command line used to start the server: [java, ...args]. */
  readonly command: readonly string[];
  /** Milliseconds from spawn until the server answered `ruok` and was serving requests. */
  readonly startupMs: number;
  /** True once the JVM has exited (for whatever reason). */
  readonly exited: boolean;
  /** The last lines the server printed (for diagnostics). */
  logTail(): string;
  /**
   * Sends a four-letter-word command ("ruok", "mntr", "srvr", "cons", "wchp", ...) to the client
   * port and returns everything the server writes before closing the connection.
   */
  fourLetterWord(cmd: string, timeoutMs?: number): Promise<string>;
  /** SIGTERM, wait for exit (SIGKILL after a few seconds), remove `dir`. Idempotent. */
  stop(): Promise<void>;
}

const DEFAULT_START_TIMEOUT_MS = scaled(60_000);

/** Starts a fresh standalone server and resolves once it is serving requests. */
export async function startZooKeeper(options: StartZooKeeperOptions = {}): Promise<ZooKeeperProcess> {
  const { logger } = options;
  const ensemble = await startZooKeeperEnsemble({
    size: 1,
    standalone: true,
    startTimeoutMs: options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS,
    ...(options.tickTimeMs === undefined ? {} : { tickTimeMs: options.tickTimeMs }),
    ...(options.minSessionTimeoutMs === undefined
      ? {}
      : { minSessionTimeoutMs: options.minSessionTimeoutMs }),
    ...(options.maxSessionTimeoutMs === undefined
      ? {}
      : { maxSessionTimeoutMs: options.maxSessionTimeoutMs }),
    ...(options.production === undefined ? {} : { production: options.production }),
    ...(options.maxClientCnxns === undefined ? {} : { maxClientCnxns: options.maxClientCnxns }),
    ...(logger === undefined ? {} : { logger: (_member: number, line: string) => logger(line) }),
  });
  const [server] = ensemble.members;
  const pid = server?.pid;
  if (server === undefined || pid == null)
    throw new Error('INVARIANT: a started ensemble of one without its server');
  const port = server.clientPort;
  return {
    connectString: server.connectString,
    port,
    pid,
    dir: ensemble.dir,
    dataDir: server.dataDir,
    command: server.command,
    startupMs: ensemble.startupMs,
    get exited() {
      return server.pid === null;
    },
    logTail: () => server.logTail(),
    fourLetterWord: (cmd, timeoutMs = 5_000) => sendFourLetterWord(port, cmd, timeoutMs),
    stop: () => ensemble.stop(),
  };
}
