import { Command, Option, type OptionValues } from 'commander';
import { parseDurationMs } from '../common/duration.js';
import { ZOOKEEPER_CLIENTS, type ZooKeeperClientKind } from './stores/zookeeper/zookeeper-link.js';
import { LARGEST_LEGAL_REQUEST_BYTES, RECEIVE_MARGIN_BYTES } from './largest-request.js';

export type Backend = 'memory' | 'zookeeper';
export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal' | 'silent';

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
  /** Root znode under which lockstream keeps its nodes. */
  readonly rootPath: string;
  readonly sessionTimeoutMs: number;
  readonly connectTimeoutMs: number;
  readonly keepaliveTimeMs: number;
  readonly keepaliveTimeoutMs: number;
  readonly shutdownGraceMs: number;
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
  /** Address of the HTTP port (metrics). */
  readonly httpHost: string;
  /** HTTP port for metrics; undefined: no HTTP server; 0 picks a free one. */
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

export const DEFAULTS = Object.freeze({
  host: '127.0.0.1',
  port: 50051,
  rootPath: '/lockstream',
  zookeeperClient: 'protocol',
  sessionTimeout: '10s',
  connectTimeout: '15s',
  // A vanished client's connection is dropped 3-6 s after it went silent (sooner with the SDK's
  // heartbeats), then its resume grace runs. The clients count their own grace from the last
  // message they heard, so a holder is told `lost` before the server can free the lock.
  keepaliveTime: '3s',
  keepaliveTimeout: '3s',
  shutdownGrace: '5s',
  maxResumeGrace: '60s',
  maxStreamsPerConnection: 1000,
  maxRequestsPerSession: 100_000,
  maxWaitersPerLock: 10_000,
  // Every legal request fits, with room for encoders that also write fields left at their
  // defaults: the largest (16 semaphores of 512-byte names, with owner and value) rounded up to KiB.
  maxMessageBytes: Math.ceil(LARGEST_LEGAL_REQUEST_BYTES / 1024) * 1024,
  logLevel: 'info',
  logFormat: 'auto',
});

export type LogFormat = 'json' | 'pretty' | 'auto';
const LOG_FORMATS: readonly LogFormat[] = ['json', 'pretty', 'auto'];

const LOG_LEVELS: readonly LogLevel[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
  }
}

interface OptionSpec {
  readonly flags: string;
  readonly env: string;
  readonly description: string;
  readonly default?: string;
}

const SERVE_OPTIONS: readonly OptionSpec[] = [
  {
    flags: '--host <address>',
    env: 'LOCKSTREAM_HOST',
    description: 'address to listen on',
    default: DEFAULTS.host,
  },
  {
    flags: '--port <port>',
    env: 'LOCKSTREAM_PORT',
    description: 'gRPC port (0 picks a free one)',
    default: String(DEFAULTS.port),
  },
  {
    flags: '--zookeeper <connect-string>',
    env: 'LOCKSTREAM_ZOOKEEPER',
    description:
      'ZooKeeper ensemble, e.g. zk1:2181,zk2:2181[/chroot]; without it, locks live in this process only',
  },
  {
    flags: '--zookeeper-digest-file <file>',
    env: 'LOCKSTREAM_ZOOKEEPER_DIGEST_FILE',
    description:
      'file holding user:password: the ZooKeeper session authenticates with them (digest), and only they may touch the nodes under --root',
  },
  {
    flags: '--zookeeper-client <client>',
    env: 'LOCKSTREAM_ZOOKEEPER_CLIENT',
    description:
      "ZooKeeper client: protocol (lockstream's own, in TypeScript: create2, ACL on create, exact 64-bit zxids) or addon (the native `zookeeper` package, if installed)",
    default: DEFAULTS.zookeeperClient,
  },
  {
    flags: '--root <path>',
    env: 'LOCKSTREAM_ROOT',
    description: 'root znode for lockstream',
    default: DEFAULTS.rootPath,
  },
  {
    flags: '--session-timeout <duration>',
    env: 'LOCKSTREAM_SESSION_TIMEOUT',
    description: 'ZooKeeper session timeout to request',
    default: DEFAULTS.sessionTimeout,
  },
  {
    flags: '--connect-timeout <duration>',
    env: 'LOCKSTREAM_CONNECT_TIMEOUT',
    description: 'how long start-up and requests wait for ZooKeeper before failing',
    default: DEFAULTS.connectTimeout,
  },
  {
    flags: '--keepalive-time <duration>',
    env: 'LOCKSTREAM_KEEPALIVE_TIME',
    description: 'idle time before the server pings a client connection',
    default: DEFAULTS.keepaliveTime,
  },
  {
    flags: '--keepalive-timeout <duration>',
    env: 'LOCKSTREAM_KEEPALIVE_TIMEOUT',
    description: 'how long a ping may go unanswered before the connection, and its locks, are dropped',
    default: DEFAULTS.keepaliveTimeout,
  },
  {
    flags: '--shutdown-grace <duration>',
    env: 'LOCKSTREAM_SHUTDOWN_GRACE',
    description: 'how long open calls may take to end on SIGTERM/SIGINT',
    default: DEFAULTS.shutdownGrace,
  },
  {
    flags: '--max-resume-grace <duration>',
    env: 'LOCKSTREAM_MAX_RESUME_GRACE',
    description:
      'longest time a request (queued or holding) may wait to be resumed after its stream ends abnormally, if its client asks; 0 turns resuming off',
    default: DEFAULTS.maxResumeGrace,
  },
  {
    flags: '--max-streams-per-connection <count>',
    env: 'LOCKSTREAM_MAX_STREAMS_PER_CONNECTION',
    description: 'Acquire calls one client connection may have open at once (further calls wait)',
    default: String(DEFAULTS.maxStreamsPerConnection),
  },
  {
    flags: '--max-requests-per-session <count>',
    env: 'LOCKSTREAM_MAX_REQUESTS_PER_SESSION',
    description: 'lock requests one Session stream may have at once (more end with RESOURCE_EXHAUSTED)',
    default: String(DEFAULTS.maxRequestsPerSession),
  },
  {
    flags: '--max-waiters-per-lock <count>',
    env: 'LOCKSTREAM_MAX_WAITERS_PER_LOCK',
    description:
      'requests a lock may have queued ahead of a new one before it is refused (RESOURCE_EXHAUSTED)',
    default: String(DEFAULTS.maxWaitersPerLock),
  },
  {
    flags: '--max-message-bytes <bytes>',
    env: 'LOCKSTREAM_MAX_MESSAGE_BYTES',
    description: `largest lock request (Session acquire, Acquire start) accepted; a larger one ends alone with RESOURCE_EXHAUSTED, the session's other locks go on. The default admits every legal request (at most ${LARGEST_LEGAL_REQUEST_BYTES} bytes); a lower limit refuses the largest (multi-locks, values). A message over the limit + ${RECEIVE_MARGIN_BYTES / 1024} KiB ends its whole call`,
    default: String(DEFAULTS.maxMessageBytes),
  },
  {
    flags: '--tls-cert <file>',
    env: 'LOCKSTREAM_TLS_CERT',
    description: 'PEM certificate chain for TLS on the gRPC port (with --tls-key)',
  },
  {
    flags: '--tls-key <file>',
    env: 'LOCKSTREAM_TLS_KEY',
    description: 'PEM private key for --tls-cert',
  },
  {
    flags: '--tls-client-ca <file>',
    env: 'LOCKSTREAM_TLS_CLIENT_CA',
    description:
      'PEM CA certificates; clients must present a certificate they signed (mTLS), whose identity names the caller',
  },
  {
    flags: '--auth-file <file>',
    env: 'LOCKSTREAM_AUTH_FILE',
    description:
      'access policy (YAML): callers by token or certificate, the lock prefixes and modes each may use, and who may revoke',
  },
  {
    flags: '--http-port <port>',
    env: 'LOCKSTREAM_HTTP_PORT',
    description: 'serve Prometheus metrics on /metrics at this port (0 picks a free one); off by default',
  },
  {
    flags: '--http-host <address>',
    env: 'LOCKSTREAM_HTTP_HOST',
    description: 'address for the HTTP port',
    default: '127.0.0.1',
  },
  {
    flags: '--http-auth <on|off>',
    env: 'LOCKSTREAM_HTTP_AUTH',
    description:
      'require an access-policy caller with `http: true` on the HTTP port (Bearer token, or Basic with its name and token)',
    default: 'off',
  },
  {
    flags: '--log-level <level>',
    env: 'LOCKSTREAM_LOG_LEVEL',
    // Checked in validate() rather than with commander's choices(), which would stop at the
    // first bad value instead of reporting every problem at once.
    description: `log level: ${LOG_LEVELS.join(', ')}`,
    default: DEFAULTS.logLevel,
  },
  {
    flags: '--log-format <format>',
    env: 'LOCKSTREAM_LOG_FORMAT',
    description: 'json (one object per line), pretty (for people), or auto: pretty when stdout is a terminal',
    default: DEFAULTS.logFormat,
  },
];

/**
 * The options of `lockstream serve`. Each can also be set by its environment variable; the
 * variable's value becomes the option's default, so a flag still wins (commander's own `.env()`
 * would read process.env behind our back).
 */
export function serveOptions(env: Readonly<Record<string, string | undefined>>): Option[] {
  return SERVE_OPTIONS.map((spec) => {
    const option = new Option(spec.flags, `${spec.description} (env: ${spec.env})`);
    const value = env[spec.env] ?? spec.default;
    if (value !== undefined) option.default(value);
    return option;
  });
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
    rootPath,
    sessionTimeoutMs: duration('sessionTimeout', '--session-timeout', 1),
    connectTimeoutMs: duration('connectTimeout', '--connect-timeout', 1),
    keepaliveTimeMs: duration('keepaliveTime', '--keepalive-time', 1),
    keepaliveTimeoutMs: duration('keepaliveTimeout', '--keepalive-timeout', 1),
    shutdownGraceMs: duration('shutdownGrace', '--shutdown-grace', 0),
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
