/*
 * The server's configuration: the arguments and environment of `lockstream serve`, checked and
 * turned into one frozen Config, with every problem reported at once (ConfigError).
 */
import { Command, type OptionValues } from 'commander';
import { parseDurationMs } from '../common/duration.js';
import { ZOOKEEPER_CLIENTS, type ZooKeeperClientKind } from './stores/zookeeper/zookeeper-link.js';
import { LOG_FORMATS, LOG_LEVELS, serveOptions, type LogFormat, type LogLevel } from './serve-options.js';

export { DEFAULTS, serveOptions, type LogFormat, type LogLevel } from './serve-options.js';

export type Backend = 'memory' | 'zookeeper';

export type ZooKeeperWatch = 'tree' | 'nodes';
export const ZOOKEEPER_WATCHES: readonly ZooKeeperWatch[] = ['tree', 'nodes'];

export interface Config {
  /** Address the gRPC server binds. */
  readonly host: string;
  /** gRPC port; 0 picks a free one. */
  readonly port: number;
  readonly backend: Backend;
  /** ZooKeeper connect string (`host:port,...[/chroot]`); set when `backend` is `zookeeper`. */
  readonly zookeeper: string | undefined;
  /** Which ZooKeeper client the store runs on: lockstream's own (`protocol`) or the `zookeeper` addon. */
  readonly zookeeperClient: ZooKeeperClientKind;
  /**
   * How this instance hears of lock nodes: one persistent recursive watch on the lock tree
   * (`tree`, where ZooKeeper and the client can), or a listing per create and a watch per node.
   */
  readonly zookeeperWatch: ZooKeeperWatch;
  /** Root znode under which lockstream keeps its nodes. */
  readonly rootPath: string;
  readonly sessionTimeoutMs: number;
  readonly connectTimeoutMs: number;
  readonly keepaliveTimeMs: number;
  readonly keepaliveTimeoutMs: number;
  readonly shutdownGraceMs: number;
  /** SIGTERM/SIGINT: how long the instance reports itself not ready, still serving, before it stops. */
  readonly drainDelayMs: number;
  /** SIGTERM/SIGINT: leave resumable sessions for another instance (`hand-over`) or free their locks (`release`). */
  readonly onStop: StopMode;
  /** Longest resume grace a client may ask for; 0: requests are never kept after an abnormal end. */
  readonly maxResumeGraceMs: number;
  /** HTTP/2 streams (Acquire calls) one client connection may have open at once. */
  readonly maxStreamsPerConnection: number;
  /** Lock requests one Session stream may have at once. */
  readonly maxRequestsPerSession: number;
  /** Requests a lock's queue may hold ahead of a new one before it is refused. */
  readonly maxWaitersPerLock: number;
  /** Largest lock request (a Session `acquire`, an Acquire `start` message) the server accepts, in bytes. */
  readonly maxMessageBytes: number;
  /** Address of the HTTP port (page, metrics, probes). */
  readonly httpHost: string;
  /** HTTP port for the page, metrics and probes; undefined: no HTTP server; 0 picks a free one. */
  readonly httpPort: number | undefined;
  readonly logLevel: LogLevel;
  /** `json` lines for machines, `pretty` for people; `auto`: pretty on a terminal, else JSON. */
  readonly logFormat: LogFormat;
  /** PEM certificate chain and private key for TLS on the gRPC port; both or neither. */
  readonly tlsCert: string | undefined;
  readonly tlsKey: string | undefined;
  /** PEM CA certificates: client certificates signed by them are required (mTLS). */
  readonly tlsClientCa: string | undefined;
  /** The access policy (YAML): callers, their tokens or certificates, and their grants. */
  readonly authFile: string | undefined;
  /** A file holding `user:password`: ZooKeeper digest credentials, and ACLs on lockstream's nodes. */
  readonly zookeeperDigestFile: string | undefined;
  /** The HTTP port admits only access-policy callers with `http: true` (Basic or Bearer). */
  readonly httpAuth: boolean;
}

export type StopMode = 'hand-over' | 'release';
const STOP_MODES: readonly StopMode[] = ['hand-over', 'release'];

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
  }
}

/**
 * Parses `lockstream serve` arguments and environment into a validated, frozen Config.
 * Pure: reads only what it is given. Throws `ConfigError` listing every problem at once.
 */
export function loadConfig(
  env: Readonly<Record<string, string | undefined>>,
  argv: readonly string[],
): Readonly<Config> {
  const command = new Command('serve')
    .exitOverride()
    .configureOutput({ writeErr: () => {}, writeOut: () => {} });
  for (const option of serveOptions(env)) command.addOption(option);
  try {
    command.parse([...argv], { from: 'user' });
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new ConfigError([message.replace(/^error: /, '')]);
  }
  return validate(command.opts());
}

function validate(values: OptionValues): Readonly<Config> {
  const problems: string[] = [];
  const duration = (key: string, flag: string, min: number): number => {
    const raw = String(values[key]);
    const parsed = parseDurationMs(raw);
    if (parsed === undefined || parsed < min) {
      problems.push(
        `${flag} ${JSON.stringify(raw)}: expected a duration of at least ${min} ms, e.g. 10s or 500ms`,
      );
      return min;
    }
    return Math.round(parsed);
  };
  const rawPort = String(values['port']);
  // Number('') is 0, which would silently pick a random port.
  const port = /^\d+$/.test(rawPort) ? Number(rawPort) : Number.NaN;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    problems.push(`--port ${JSON.stringify(values['port'])}: expected a port number from 0 to 65535`);
  }
  const rootPath = String(values['root']);
  if (!/^\/[^/]+(\/[^/]+)*$/.test(rootPath)) {
    problems.push(`--root ${JSON.stringify(rootPath)}: expected an absolute znode path like /lockstream`);
  }
  const zookeeper = values['zookeeper'] === undefined ? undefined : String(values['zookeeper']);
  if (zookeeper !== undefined && !/^[^\s,/]+(,[^\s,/]+)*(\/\S*)?$/.test(zookeeper)) {
    problems.push(`--zookeeper ${JSON.stringify(zookeeper)}: expected host:port[,host:port...][/chroot]`);
  }
  const count = (key: string, flag: string, min: number, max: number): number => {
    const raw = String(values[key]);
    const parsed = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
    if (!(Number.isSafeInteger(parsed) && parsed >= min && parsed <= max)) {
      problems.push(`${flag} ${JSON.stringify(raw)}: expected a whole number from ${min} to ${max}`);
      return min;
    }
    return parsed;
  };
  const rawHttpPort = values['httpPort'] === undefined ? undefined : String(values['httpPort']);
  const httpPort =
    rawHttpPort === undefined ? undefined : /^\d+$/.test(rawHttpPort) ? Number(rawHttpPort) : Number.NaN;
  if (httpPort !== undefined && !(Number.isInteger(httpPort) && httpPort <= 65535)) {
    problems.push(`--http-port ${JSON.stringify(rawHttpPort)}: expected a port number from 0 to 65535`);
  }
  const logFormat = String(values['logFormat']) as LogFormat;
  if (!LOG_FORMATS.includes(logFormat)) {
    problems.push(`--log-format ${JSON.stringify(logFormat)}: expected one of ${LOG_FORMATS.join(', ')}`);
  }
  const onStop = String(values['onStop']) as StopMode;
  if (!STOP_MODES.includes(onStop)) {
    problems.push(`--on-stop ${JSON.stringify(onStop)}: expected one of ${STOP_MODES.join(', ')}`);
  }
  const logLevel = String(values['logLevel']) as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) {
    problems.push(`--log-level ${JSON.stringify(logLevel)}: expected one of ${LOG_LEVELS.join(', ')}`);
  }
  const file = (key: string): string | undefined =>
    values[key] === undefined || values[key] === '' ? undefined : String(values[key]);
  const [tlsCert, tlsKey, tlsClientCa, authFile, zookeeperDigestFile] = [
    'tlsCert',
    'tlsKey',
    'tlsClientCa',
    'authFile',
    'zookeeperDigestFile',
  ].map(file);
  if (zookeeperDigestFile !== undefined && zookeeper === undefined) {
    problems.push('--zookeeper-digest-file needs --zookeeper: the embedded store has no ACLs');
  }
  const zookeeperClient = String(values['zookeeperClient']) as ZooKeeperClientKind;
  if (!ZOOKEEPER_CLIENTS.includes(zookeeperClient)) {
    problems.push(
      `--zookeeper-client ${JSON.stringify(zookeeperClient)}: expected one of ${ZOOKEEPER_CLIENTS.join(', ')}`,
    );
  }
  const zookeeperWatch = String(values['zookeeperWatch']) as ZooKeeperWatch;
  if (!ZOOKEEPER_WATCHES.includes(zookeeperWatch)) {
    problems.push(
      `--zookeeper-watch ${JSON.stringify(zookeeperWatch)}: expected one of ${ZOOKEEPER_WATCHES.join(', ')}`,
    );
  }
  if ((tlsCert === undefined) !== (tlsKey === undefined)) {
    problems.push('--tls-cert and --tls-key: give both (TLS) or neither (plaintext)');
  }
  if (tlsClientCa !== undefined && tlsCert === undefined) {
    problems.push('--tls-client-ca needs --tls-cert and --tls-key: client certificates are checked over TLS');
  }
  const httpAuthRaw = String(values['httpAuth']).toLowerCase();
  const httpAuth = ['on', 'true', '1'].includes(httpAuthRaw);
  if (!httpAuth && !['off', 'false', '0'].includes(httpAuthRaw)) {
    problems.push(`--http-auth ${JSON.stringify(values['httpAuth'])}: expected on or off`);
  }
  if (httpAuth && authFile === undefined) {
    problems.push('--http-auth on needs --auth-file: the callers allowed on the HTTP port are named there');
  }
  const config: Config = {
    host: String(values['host']),
    port,
    backend: zookeeper === undefined ? 'memory' : 'zookeeper',
    zookeeper,
    zookeeperClient,
    zookeeperWatch,
    rootPath,
    sessionTimeoutMs: duration('sessionTimeout', '--session-timeout', 1),
    connectTimeoutMs: duration('connectTimeout', '--connect-timeout', 1),
    keepaliveTimeMs: duration('keepaliveTime', '--keepalive-time', 1),
    keepaliveTimeoutMs: duration('keepaliveTimeout', '--keepalive-timeout', 1),
    shutdownGraceMs: duration('shutdownGrace', '--shutdown-grace', 0),
    drainDelayMs: duration('drainDelay', '--drain-delay', 0),
    onStop,
    maxResumeGraceMs: duration('maxResumeGrace', '--max-resume-grace', 0),
    maxStreamsPerConnection: count('maxStreamsPerConnection', '--max-streams-per-connection', 1, 2 ** 31 - 1),
    maxRequestsPerSession: count('maxRequestsPerSession', '--max-requests-per-session', 1, 2 ** 31 - 1),
    maxWaitersPerLock: count('maxWaitersPerLock', '--max-waiters-per-lock', 1, 2 ** 31 - 1),
    // A start message with a 512-byte name and a 256-byte owner needs under 1 KiB; a lower
    // limit would refuse plain requests.
    maxMessageBytes: count('maxMessageBytes', '--max-message-bytes', 1024, 4 * 1024 * 1024),
    httpHost: String(values['httpHost']),
    httpPort,
    logLevel,
    logFormat,
    tlsCert,
    tlsKey,
    tlsClientCa,
    authFile,
    zookeeperDigestFile,
    httpAuth,
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze(config);
}
