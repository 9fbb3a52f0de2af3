/*
 * The options of `lockstream serve`, their environment variables, configuration-file keys and
 * defaults: the one table that `--help` shows, config.ts validates, config-file.ts checks a file
 * against and docs/configuration.md is generated from.
 */
import { Option } from 'commander';
import { LARGEST_LEGAL_REQUEST_BYTES, RECEIVE_MARGIN_BYTES } from './largest-request.js';

export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal' | 'silent';
export const LOG_LEVELS: readonly LogLevel[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];
export type LogFormat = 'json' | 'pretty' | 'auto';
export const LOG_FORMATS: readonly LogFormat[] = ['json', 'pretty', 'auto'];

export const DEFAULTS = Object.freeze({
  host: '127.0.0.1',
  port: 50051,
  rootPath: '/lockstream',
  zookeeperClient: 'protocol',
  zookeeperWatch: 'tree',
  sessionTimeout: '10s',
  connectTimeout: '15s',
  // A vanished client's connection is dropped 3-6 s after it went silent (sooner with the SDK's
  // heartbeats), then its resume grace runs. The clients count their own grace from the last
  // message they heard, so a holder is told `lost` before the server can free the lock.
  keepaliveTime: '3s',
  keepaliveTimeout: '3s',
  shutdownGrace: '5s',
  drainDelay: '0s',
  onStop: 'hand-over',
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

interface OptionSpec {
  readonly flags: string;
  readonly env: string;
  readonly description: string;
  readonly default?: string;
  /** False for an option that cannot be set in the configuration file (`--config` itself). */
  readonly inFile?: false;
}

const SERVE_OPTIONS: readonly OptionSpec[] = [
  {
    flags: '--config <file>',
    env: 'LOCKSTREAM_CONFIG',
    description:
      'YAML file of settings, each option a top-level key named like its flag without the dashes (port: 50051); flags and environment variables override it',
    inFile: false,
  },
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
    flags: '--zookeeper-watch <how>',
    env: 'LOCKSTREAM_ZOOKEEPER_WATCH',
    description:
      'tree: one persistent recursive watch on the lock tree tells this instance every change (ZooKeeper 3.6+ and the protocol client; a lock cycle costs a create and a delete), or nodes: each create lists its lock and each request watches the node it waits for (ZooKeeper 3.5, the addon, or to spare an instance the events of every lock)',
    default: DEFAULTS.zookeeperWatch,
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
    flags: '--drain-delay <duration>',
    env: 'LOCKSTREAM_DRAIN_DELAY',
    description:
      'on SIGTERM/SIGINT, how long the instance reports itself not ready (/readyz 503, gRPC health NOT_SERVING) while it still serves, before it hands over or releases its sessions: time for load balancers to stop sending it calls',
    default: DEFAULTS.drainDelay,
  },
  {
    flags: '--on-stop <hand-over|release>',
    env: 'LOCKSTREAM_ON_STOP',
    description:
      'what SIGTERM/SIGINT does with the locks of resumable sessions: hand-over leaves them for another instance on the same ZooKeeper (clients resume there and keep them; the ZooKeeper protocol client only), release frees them at once',
    default: DEFAULTS.onStop,
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
    description:
      'serve the page, Prometheus metrics on /metrics and the probes /livez and /readyz at this port (0 picks a free one); off by default',
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

/** One option of `lockstream serve`, with every name it goes by. */
export interface ServeOption {
  /** The long flag, `--session-timeout`. */
  readonly flag: string;
  /** What the flag takes, as `--help` shows it: `<duration>`. */
  readonly argument: string;
  /** Its key in the values commander parses and config.ts reads: `sessionTimeout`. */
  readonly attribute: string;
  /** Its environment variable: `LOCKSTREAM_SESSION_TIMEOUT`. */
  readonly env: string;
  /** Its top-level key in a configuration file, the flag without its dashes; undefined: not settable there. */
  readonly fileKey: string | undefined;
  readonly description: string;
  /** Undefined: unset unless given (the option is off, or its absence means something). */
  readonly default: string | undefined;
}

/** Every option of `lockstream serve`, in `--help` order. */
export const SERVE_OPTION_TABLE: readonly ServeOption[] = Object.freeze(
  SERVE_OPTIONS.map((spec): ServeOption => {
    const option = new Option(spec.flags);
    if (option.long === undefined) throw new Error(`INVARIANT: ${spec.flags} has no long flag`);
    return Object.freeze({
      flag: option.long,
      argument: spec.flags.slice(option.long.length).trim(),
      attribute: option.attributeName(),
      env: spec.env,
      fileKey: spec.inFile === false ? undefined : option.long.replace(/^--/, ''),
      description: spec.description,
      default: spec.default,
    });
  }),
);

/**
 * The options of `lockstream serve`. Each can also be set by its environment variable, or by
 * its key in the configuration file (`file`, keyed by attribute, as config-file.ts reads it):
 * the variable's value, else the file's, becomes the option's default, so a flag wins over both
 * and the environment over the file (commander's own `.env()` would read process.env behind our back).
 */
export function serveOptions(
  env: Readonly<Record<string, string | undefined>>,
  file: Readonly<Record<string, string>> = {},
): Option[] {
  return SERVE_OPTIONS.map((spec, i) => {
    const { attribute } = SERVE_OPTION_TABLE[i]!;
    const option = new Option(spec.flags, `${spec.description} (env: ${spec.env})`);
    const value = env[spec.env] ?? file[attribute] ?? spec.default;
    if (value !== undefined) option.default(value);
    return option;
  });
}
