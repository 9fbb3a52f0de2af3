/**
 * Starts a throwaway, standalone Apache ZooKeeper server for integration tests.
 *
 * Why spawn `java` directly instead of `zkServer.sh start`:
 * - `zkServer.sh start` daemonises (nohup + `&`) and leaves a pid file, so we would not own the
 *   JVM's pid and could not reliably kill exactly our server in teardown.
 * - Either mode sources zkEnv.sh, which on Debian is a symlink to /etc/zookeeper/conf/environment
 *   (an alternatives-managed, admin-editable file). It assigns ZOO_LOG_DIR=/var/log/zookeeper and
 *   ZOO_LOG4J_PROP unconditionally, so those env vars cannot be overridden from outside, and it
 *   also turns on JMX remote flags. Nothing under /etc is read here; the equivalent settings are
 *   passed as -D flags (zookeeper.log.dir, zookeeper.root.logger, log4j.configuration).
 * - Debian's stock classpath (/etc/zookeeper/conf:/usr/share/java/zookeeper.jar) has no SLF4J
 *   binding, so the server silently logs nothing (SLF4J "NOP logger"). We add the log4j 1.2
 *   binding ourselves so a failed start comes with a useful log tail.
 *
 * Each server gets a fresh temp dir (zoo.cfg, log4j.properties, data/) and a free loopback port,
 * so several servers (the global one plus per-test ones) can run side by side.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants as fsConstants, existsSync, rmSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';

export interface ZooKeeperInstallation {
  /** Absolute path of the `java` executable. */
  java: string;
  /** `-cp` value: ZooKeeper's jar (its manifest Class-Path pulls in its dependencies) + logging. */
  classpath: string;
  /** How the server's SLF4J logging is wired; `none` means the server will log nothing. */
  logging: 'log4j' | 'slf4j-simple' | 'none';
}

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

const DEBIAN_JAVA_DIR = '/usr/share/java';
/** Escape hatch for non-Debian machines: a full classpath, e.g. "/opt/zookeeper/lib/*". */
const CLASSPATH_ENV = 'LOCKSTREAM_ZK_CLASSPATH';

const DEFAULT_TICK_TIME_MS = 200;
const DEFAULT_MAX_SESSION_TIMEOUT_MS = 60_000;
const DEFAULT_START_TIMEOUT_MS = 60_000;
const READY_POLL_INTERVAL_MS = 75;
const STOP_GRACE_MS = 5_000;
const LOG_TAIL_LINES = 200;
const START_ATTEMPTS = 3;

/**
 * Locates java and the ZooKeeper server jars, or returns null when either is missing.
 * Looks at $LOCKSTREAM_ZK_CLASSPATH first, then Debian's layout (packages `zookeeper` and
 * `libzookeeper-java`, which put every jar flat in /usr/share/java).
 */
export function findZooKeeperInstallation(): ZooKeeperInstallation | null {
  const java = findJava();
  if (java === null) return null;

  const override = process.env[CLASSPATH_ENV];
  if (override !== undefined && override !== '') {
    return { java, classpath: override, logging: 'none' };
  }

  const jar = (name: string): string | null => {
    const file = path.join(DEBIAN_JAVA_DIR, name);
    return existsSync(file) ? file : null;
  };
  const zookeeperJar = jar('zookeeper.jar');
  if (zookeeperJar === null) return null;

  // zookeeper.jar's manifest Class-Path lists its runtime deps (jute, netty, slf4j-api, jetty,
  // ...) by absolute path, but no SLF4J binding: add one, preferring the log4j 1.2 binding that
  // Debian's own /etc/zookeeper/conf/log4j.properties is written for.
  const slf4jLog4j = jar('slf4j-log4j12.jar');
  const log4j = jar('log4j-1.2.jar');
  if (slf4jLog4j !== null && log4j !== null) {
    return { java, classpath: [zookeeperJar, slf4jLog4j, log4j].join(':'), logging: 'log4j' };
  }
  const slf4jSimple = jar('slf4j-simple.jar');
  if (slf4jSimple !== null) {
    return { java, classpath: [zookeeperJar, slf4jSimple].join(':'), logging: 'slf4j-simple' };
  }
  return { java, classpath: zookeeperJar, logging: 'none' };
}

function findJava(): string | null {
  const candidates: string[] = [];
  const javaHome = process.env['JAVA_HOME'];
  if (javaHome !== undefined && javaHome !== '') {
    candidates.push(path.join(javaHome, 'bin', 'java'));
  }
  candidates.push('/usr/bin/java');
  for (const dir of (process.env['PATH'] ?? '').split(path.delimiter)) {
    if (dir !== '') candidates.push(path.join(dir, 'java'));
  }
  for (const candidate of candidates) {
    try {
      accessSync(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // not here; keep looking
    }
  }
  return null;
}

/** Starts a fresh standalone server and resolves once it is serving requests. */
export async function startZooKeeper(options: StartZooKeeperOptions = {}): Promise<ZooKeeperProcess> {
  const installation = findZooKeeperInstallation();
  if (installation === null) {
    throw new Error(
      `ZooKeeper is not installed: need java and ${DEBIAN_JAVA_DIR}/zookeeper.jar ` +
        `(run scripts/install-test-deps.sh, or set ${CLASSPATH_ENV}).`,
    );
  }
  // The free port is found by binding :0 and closing it, so another process can grab it before
  // the JVM binds. That shows up as an early exit with a BindException: just try another port.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(installation, options);
    } catch (error) {
      if (!(error instanceof PortInUseError) || attempt >= START_ATTEMPTS) throw error;
    }
  }
}

class PortInUseError extends Error {}

async function startOnce(
  installation: ZooKeeperInstallation,
  options: StartZooKeeperOptions,
): Promise<ZooKeeperProcess> {
  const tickTimeMs = options.tickTimeMs ?? DEFAULT_TICK_TIME_MS;
  const minSessionTimeoutMs = options.minSessionTimeoutMs ?? 2 * tickTimeMs;
  const maxSessionTimeoutMs = options.maxSessionTimeoutMs ?? DEFAULT_MAX_SESSION_TIMEOUT_MS;
  const startTimeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;

  const dir = await mkdtemp(path.join(os.tmpdir(), 'lockstream-zk-'));
  const dataDir = path.join(dir, 'data');
  const configFile = path.join(dir, 'zoo.cfg');
  const log4jFile = path.join(dir, 'log4j.properties');
  let port: number;
  try {
    await mkdir(dataDir);
    port = await findFreePort();
    await writeFile(
      configFile,
      zooCfg({
        dataDir,
        port,
        tickTimeMs,
        minSessionTimeoutMs,
        maxSessionTimeoutMs,
        forceSync: options.production ?? false,
      }),
    );
    await writeFile(log4jFile, LOG4J_PROPERTIES);
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }

  const args = zooKeeperJvmArgs(installation, {
    logDir: dir,
    log4jFile,
    configFile,
    production: options.production ?? false,
  });
  const command = [installation.java, ...args] as const;

  const spawnedAt = performance.now();
  const child = spawn(installation.java, args, {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
  });

  const tail: string[] = [];
  const onLine = (line: string): void => {
    tail.push(line);
    if (tail.length > LOG_TAIL_LINES) tail.shift();
    options.logger?.(line);
  };
  // Always drain both pipes: a full pipe would block the JVM's logging threads.
  for (const stream of [child.stdout, child.stderr]) {
    createInterface({ input: stream, crlfDelay: Infinity }).on('line', onLine);
  }
  const logTail = (): string => tail.join('\n');

  let exited = false;
  let exitDescription = '';
  const exitPromise = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      exited = true;
      exitDescription = signal !== null ? `signal ${signal}` : `exit code ${String(code)}`;
      resolve();
    });
    // spawn failures (ENOENT, EACCES) emit 'error' and possibly no 'exit'.
    child.once('error', (error) => {
      exited = true;
      exitDescription = `spawn error: ${error.message}`;
      resolve();
    });
  });

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      untrack();
      await terminate(child, exitPromise, () => exited);
      await rm(dir, { recursive: true, force: true, maxRetries: 3 });
    })();
    return stopping;
  };
  const untrack = killOnExit(child, dir);

  const fourLetterWord = (cmd: string, timeoutMs = 5_000): Promise<string> =>
    sendFourLetterWord(port, cmd, timeoutMs);

  try {
    await waitUntilServing({
      fourLetterWord,
      exitPromise,
      isExited: () => exited,
      dataDir,
      deadline: spawnedAt + startTimeoutMs,
    });
  } catch (error) {
    await stop();
    const reason = exited
      ? `ZooKeeper exited during start-up (${exitDescription})`
      : `ZooKeeper did not become ready within ${startTimeoutMs} ms`;
    const details =
      `${reason}; ${String(error instanceof Error ? error.message : error)}\n` +
      `command: ${command.join(' ')}\n--- last server output ---\n${logTail()}`;
    if (exited && /BindException|Address already in use/.test(logTail())) {
      throw new PortInUseError(details);
    }
    throw new Error(details, { cause: error });
  }
  const startupMs = performance.now() - spawnedAt;

  if (child.pid === undefined) throw new Error('unreachable: running child without a pid');
  const pid = child.pid;
  return {
    connectString: `127.0.0.1:${port}`,
    port,
    pid,
    dir,
    dataDir,
    command,
    startupMs,
    get exited() {
      return exited;
    },
    logTail,
    fourLetterWord,
    stop,
  };
}

/**
 * The JVM command line (after `java`) for one ZooKeeper server. Shared with the ensemble harness
 * (zookeeper-ensemble.ts), whose members differ only in their zoo.cfg.
 */
export function zooKeeperJvmArgs(
  installation: ZooKeeperInstallation,
  files: { logDir: string; log4jFile: string; configFile: string; production?: boolean },
): string[] {
  return [
    '-Xmx256m',
    '-XX:+UseSerialGC',
    '-Djava.net.preferIPv4Stack=true',
    // Anything that still resolves ${zookeeper.log.dir} must write to our temp dir, not /var/log.
    `-Dzookeeper.log.dir=${files.logDir}`,
    ...loggingFlags(installation, files.log4jFile),
    // Redundant with the zoo.cfg key (which the config parser copies into this property), kept
    // so the command line alone shows that every four-letter word is allowed.
    '-Dzookeeper.4lw.commands.whitelist=*',
    // Not settable from zoo.cfg: unknown cfg keys become "zookeeper."-prefixed system properties,
    // and ContainerManager reads the unprefixed name. The default is 60 s; with 1 s, empty
    // CONTAINER znodes (that once had children) vanish within a couple of seconds.
    ...(files.production ? [] : ['-Dznode.container.checkIntervalMs=1000']),
    '-cp',
    installation.classpath,
    // QuorumPeerMain is what zkServer.sh runs; with no server.N entries it runs standalone.
    'org.apache.zookeeper.server.quorum.QuorumPeerMain',
    files.configFile,
  ];
}

function zooCfg(c: {
  dataDir: string;
  port: number;
  tickTimeMs: number;
  minSessionTimeoutMs: number;
  maxSessionTimeoutMs: number;
  forceSync: boolean;
}): string {
  return [
    `tickTime=${c.tickTimeMs}`,
    `minSessionTimeout=${c.minSessionTimeoutMs}`,
    `maxSessionTimeout=${c.maxSessionTimeoutMs}`,
    `dataDir=${c.dataDir}`,
    'clientPortAddress=127.0.0.1',
    `clientPort=${c.port}`,
    'standaloneEnabled=true',
    ...SHARED_ZOO_CFG.filter((line) => !(c.forceSync && line.startsWith('forceSync='))),
    '',
  ].join('\n');
}

/** zoo.cfg lines every test server has, standalone or in an ensemble. */
export const SHARED_ZOO_CFG: readonly string[] = [
  // The AdminServer (Jetty) listens on 8080 by default: two servers would collide.
  'admin.enableServer=false',
  '4lw.commands.whitelist=*',
  // 0 = no per-IP connection limit; every test client comes from 127.0.0.1.
  'maxClientCnxns=0',
  // Allows TTL nodes; harmless otherwise.
  'extendedTypesEnabled=true',
  // Throwaway data: skip the fsync per transaction (large speed-up on slow CI disks) and the
  // 64 MB txn-log preallocation.
  'forceSync=no',
  'preAllocSize=1024',
];

/** Console-only log4j 1.2 config: the server's output goes to our pipe, never to /var/log. */
export const LOG4J_PROPERTIES = [
  'log4j.rootLogger=INFO, CONSOLE',
  'log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender',
  'log4j.appender.CONSOLE.Target=System.out',
  'log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout',
  'log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n',
  '',
].join('\n');

export function loggingFlags(installation: ZooKeeperInstallation, log4jFile: string): string[] {
  switch (installation.logging) {
    case 'log4j':
      return [
        `-Dlog4j.configuration=file:${log4jFile}`,
        // What older upstream scripts derived from ZOO_LOG4J_PROP; Debian's log4j config reads it.
        '-Dzookeeper.root.logger=INFO,CONSOLE',
        // Skip registering log4j MBeans with JMX; nothing here uses them.
        '-Dzookeeper.jmx.log4j.disable=true',
      ];
    case 'slf4j-simple':
      return [
        '-Dorg.slf4j.simpleLogger.defaultLogLevel=info',
        '-Dorg.slf4j.simpleLogger.showDateTime=true',
        '-Dorg.slf4j.simpleLogger.logFile=System.out',
      ];
    case 'none':
      return [];
  }
}

/** A port that was free on 127.0.0.1 a moment ago. */
export function findFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => {
      const address = server.address();
      server.close(() => {
        if (address !== null && typeof address === 'object') resolve(address.port);
        else reject(new Error(`unexpected listen address: ${String(address)}`));
      });
    });
  });
}

/** Sends a four-letter word ("wchp", "mntr", ...) to the server on `port`; resolves with its answer. */
export function sendFourLetterWord(port: number, cmd: string, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let failure: Error | undefined;
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.setTimeout(timeoutMs, () => {
      socket.destroy(new Error(`four-letter word "${cmd}" timed out after ${timeoutMs} ms`));
    });
    // Do not half-close after writing: the server runs the command on a separate thread and may
    // close the connection on our FIN before that thread has written the answer.
    socket.once('connect', () => socket.write(cmd));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.once('error', (error) => {
      failure = error;
    });
    socket.once('close', () => {
      if (failure !== undefined) reject(failure);
      else resolve(Buffer.concat(chunks).toString('utf8'));
    });
  });
}

/**
 * `ruok` answers "imok" as soon as the listener thread runs, which is slightly before the
 * database is loaded (observed here: a `srvr` right after the first "imok" still said "not
 * currently serving requests"). So after "imok" we also ask `conf`, which answers the same way
 * until the server is serving, and whose dataDir line proves that the server on the port is ours
 * and not one that grabbed the port between findFreePort() and our JVM's bind.
 */
async function waitUntilServing(w: {
  fourLetterWord: (cmd: string, timeoutMs?: number) => Promise<string>;
  exitPromise: Promise<void>;
  isExited: () => boolean;
  dataDir: string;
  deadline: number;
}): Promise<void> {
  let lastProblem = 'no answer yet';
  for (;;) {
    if (w.isExited()) throw new Error(`last probe: ${lastProblem}`);
    if (performance.now() > w.deadline) throw new Error(`last probe: ${lastProblem}`);
    try {
      const ruok = await w.fourLetterWord('ruok', 1_000);
      if (ruok === 'imok') {
        const conf = await w.fourLetterWord('conf', 1_000);
        // Printed as "dataDir=<our dataDir>/version-2".
        if (conf.includes(`dataDir=${w.dataDir}${path.sep}`)) return;
        lastProblem = `conf answered ${JSON.stringify(conf.trim().slice(0, 200))}`;
      } else {
        lastProblem = `ruok answered ${JSON.stringify(ruok)}`;
      }
    } catch (error) {
      lastProblem = error instanceof Error ? error.message : String(error);
    }
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      new Promise<void>((resolve) => (timer = setTimeout(resolve, READY_POLL_INTERVAL_MS))),
      w.exitPromise,
    ]);
    clearTimeout(timer);
  }
}

export async function terminate(
  child: ChildProcess,
  exitPromise: Promise<void>,
  isExited: () => boolean,
): Promise<void> {
  if (isExited()) return;
  child.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const graceful = await Promise.race([
    exitPromise.then(() => true),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), STOP_GRACE_MS))),
  ]);
  clearTimeout(timer);
  if (!graceful) {
    child.kill('SIGKILL');
    await exitPromise;
  }
}

/**
 * Last-resort cleanup if the test process exits without calling stop() (a crashed worker, a
 * forgotten afterAll): kill our JVMs and remove their dirs, so no orphan keeps running. Only
 * synchronous work is possible in an 'exit' handler. Does not help against SIGKILL of Node itself.
 */
interface LiveServer {
  child: ChildProcess;
  dir: string | undefined;
}
const liveServers = new Set<LiveServer>();
let exitHookRegistered = false;

/**
 * SIGKILLs `child` and removes `dir` (if given) if this process exits while the child is
 * tracked (SIGKILL also ends a SIGSTOPped JVM). Returns the function that stops tracking it;
 * call it when the child is being stopped on purpose. Several children may share one `dir`.
 */
export function killOnExit(child: ChildProcess, dir?: string): () => void {
  const entry: LiveServer = { child, dir };
  liveServers.add(entry);
  registerExitHook();
  return () => {
    liveServers.delete(entry);
  };
}

function registerExitHook(): void {
  if (exitHookRegistered) return;
  exitHookRegistered = true;
  process.once('exit', () => {
    for (const { child, dir } of liveServers) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    }
  });
}
