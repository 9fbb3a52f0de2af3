/*
 * The server's configuration: the arguments, environment and configuration file of
 * `lockstream serve`, checked and turned into one frozen Config, with every problem reported at
 * once (ConfigError).
 */
import { readFileSync } from 'node:fs';
import { Command, type OptionValues } from 'commander';
import { parseDurationMs } from '../common/duration.js';
import { ZOOKEEPER_CLIENTS, type ZooKeeperClientKind } from './stores/zookeeper/zookeeper-link.js';
import { readConfigFile, type ConfigFile } from './config-file.js';
import {
  LOG_FORMATS,
  LOG_LEVELS,
  SERVE_OPTION_TABLE,
  serveOptions,
  type LogFormat,
  type LogLevel,
} from './serve-options.js';

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
 * Parses `lockstream serve` arguments, environment and configuration file (`--config` or
 * LOCKSTREAM_CONFIG) into a validated, frozen Config: a flag wins over its environment variable,
 * which wins over the file, which wins over the default. Reads nothing but what it is given and
 * the file, through `readFile`. Throws `ConfigError` listing every problem at once.
 */
export function loadConfig(
  env: Readonly<Record<string, string | undefined>>,
  argv: readonly string[],
  readFile: (path: string) => string = (path) => readFileSync(path, 'utf8'),
): Readonly<Config> {
  const first = parse(env, argv, {});
  const configPath = first.opts()['config'] as string | undefined;
  const namedBy = first.getOptionValueSource('config') === 'cli' ? '--config' : 'LOCKSTREAM_CONFIG';
  const file = configPath ? readConfigFile(configPath, readFile, namedBy) : undefined;
  const command = parse(env, argv, file?.values ?? {});
  return validate(command.opts(), shownWith(command, env, file), file?.problems ?? []);
}

function parse(
  env: Readonly<Record<string, string | undefined>>,
  argv: readonly string[],
  file: Readonly<Record<string, string>>,
): Command {
  const command = new Command('serve')
    .exitOverride()
    .configureOutput({ writeErr: () => {}, writeOut: () => {} });
  for (const option of serveOptions(env, file)) command.addOption(option);
  try {
    command.parse([...argv], { from: 'user' });
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new ConfigError([message.replace(/^error: /, '')]);
  }
  return command;
}

/**
 * How a problem names an option's value: by where it came from, so that it can be found and
 * fixed there: `--port "70000"` (a flag, or the default), `LOCKSTREAM_PORT "70000"`, or
 * `lockstream.yaml: port "70000"`.
 */
function shownWith(
  command: Command,
  env: Readonly<Record<string, string | undefined>>,
  file: ConfigFile | undefined,
): (attribute: string, value?: unknown) => string {
  return (attribute, value) => {
    const option = SERVE_OPTION_TABLE.find((o) => o.attribute === attribute);
    if (!option) throw new Error(`INVARIANT: no serve option ${attribute}`);
    const shown = JSON.stringify(value ?? command.opts()[attribute]);
    if (command.getOptionValueSource(attribute) === 'cli') return `${option.flag} ${shown}`;
    if (env[option.env] !== undefined) return `${option.env} ${shown}`;
    const key = file?.keys.get(attribute);
    if (file && key !== undefined) return `${file.path}: ${key} ${shown}`;
    return `${option.flag} ${shown}`;
  };
}

/**
 * Checks the parsed values; `shown` names an option's value where it came from (see shownWith);
 * `fileProblems` come first, so that a file's unknown key is read before what follows from it.
 */
function validate(
  values: OptionValues,
  shown: (attribute: string, value?: unknown) => string,
  fileProblems: readonly string[],
): Readonly<Config> {
  const problems: string[] = [...fileProblems];
  const duration = (key: string, min: number): number => {
    const raw = String(values[key]);
    const parsed = parseDurationMs(raw);
    if (parsed === undefined || parsed < min) {
      problems.push(`${shown(key, raw)}: expected a duration of at least ${min} ms, e.g. 10s or 500ms`);
      return min;
    }
    return Math.round(parsed);
  };
  const rawPort = String(values['port']);
  // Number('') is 0, which would silently pick a random port.
  const port = /^\d+$/.test(rawPort) ? Number(rawPort) : Number.NaN;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    problems.push(`${shown('port')}: expected a port number from 0 to 65535`);
  }
  const rootPath = String(values['root']);
  if (!/^\/[^/]+(\/[^/]+)*$/.test(rootPath)) {
    problems.push(`${shown('root', rootPath)}: expected an absolute znode path like /lockstream`);
  }
  const zookeeper = values['zookeeper'] === undefined ? undefined : String(values['zookeeper']);
  if (zookeeper !== undefined && !/^[^\s,/]+(,[^\s,/]+)*(\/\S*)?$/.test(zookeeper)) {
    problems.push(`${shown('zookeeper', zookeeper)}: expected host:port[,host:port...][/chroot]`);
  }
  const count = (key: string, min: number, max: number): number => {
    const raw = String(values[key]);
    const parsed = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
    if (!(Number.isSafeInteger(parsed) && parsed >= min && parsed <= max)) {
      problems.push(`${shown(key, raw)}: expected a whole number from ${min} to ${max}`);
      return min;
    }
    return parsed;
  };
  const rawHttpPort = values['httpPort'] === undefined ? undefined : String(values['httpPort']);
  const httpPort =
    rawHttpPort === undefined ? undefined : /^\d+$/.test(rawHttpPort) ? Number(rawHttpPort) : Number.NaN;
  if (httpPort !== undefined && !(Number.isInteger(httpPort) && httpPort <= 65535)) {
    problems.push(`${shown('httpPort', rawHttpPort)}: expected a port number from 0 to 65535`);
  }
  const logFormat = String(values['logFormat']) as LogFormat;
  if (!LOG_FORMATS.includes(logFormat)) {
    problems.push(`${shown('logFormat', logFormat)}: expected one of ${LOG_FORMATS.join(', ')}`);
  }
  const onStop = String(values['onStop']) as StopMode;
  if (!STOP_MODES.includes(onStop)) {
    problems.push(`${shown('onStop', onStop)}: expected one of ${STOP_MODES.join(', ')}`);
  }
  const logLevel = String(values['logLevel']) as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) {
    problems.push(`${shown('logLevel', logLevel)}: expected one of ${LOG_LEVELS.join(', ')}`);
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
      `${shown('zookeeperClient', zookeeperClient)}: expected one of ${ZOOKEEPER_CLIENTS.join(', ')}`,
    );
  }
  const zookeeperWatch = String(values['zookeeperWatch']) as ZooKeeperWatch;
  if (!ZOOKEEPER_WATCHES.includes(zookeeperWatch)) {
    problems.push(
      `${shown('zookeeperWatch', zookeeperWatch)}: expected one of ${ZOOKEEPER_WATCHES.join(', ')}`,
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
    problems.push(`${shown('httpAuth')}: expected on or off`);
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
    sessionTimeoutMs: duration('sessionTimeout', 1),
    connectTimeoutMs: duration('connectTimeout', 1),
    keepaliveTimeMs: duration('keepaliveTime', 1),
    keepaliveTimeoutMs: duration('keepaliveTimeout', 1),
    shutdownGraceMs: duration('shutdownGrace', 0),
    drainDelayMs: duration('drainDelay', 0),
    onStop,
    maxResumeGraceMs: duration('maxResumeGrace', 0),
    maxStreamsPerConnection: count('maxStreamsPerConnection', 1, 2 ** 31 - 1),
    maxRequestsPerSession: count('maxRequestsPerSession', 1, 2 ** 31 - 1),
    maxWaitersPerLock: count('maxWaitersPerLock', 1, 2 ** 31 - 1),
    // A start message with a 512-byte name and a 256-byte owner needs under 1 KiB; a lower
    // limit would refuse plain requests.
    maxMessageBytes: count('maxMessageBytes', 1024, 4 * 1024 * 1024),
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
