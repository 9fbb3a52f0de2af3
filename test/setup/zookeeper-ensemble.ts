/**
 * Starts a throwaway ZooKeeper ensemble (three servers by default) on loopback, for fault tests
 * that need a real quorum: kill the leader, restart a member, freeze one with SIGSTOP.
 *
 * Each member is a QuorumPeerMain JVM started exactly as the standalone harness starts one (see
 * zookeeper-process.ts for why `java` is spawned directly); only its zoo.cfg differs. Everything
 * lives in one temp dir:
 *
 *   <dir>/log4j.properties
 *   <dir>/member-N/zoo.cfg
 *   <dir>/member-N/data/myid      (and ZooKeeper's version-2/ snapshots and txn logs)
 *
 * A member keeps its ports, zoo.cfg and data dir for the ensemble's whole life, so restart()
 * brings back the same server with the same state, as a real restart would.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import {
  findFreePort,
  findZooKeeperInstallation,
  killOnExit,
  LOG4J_PROPERTIES,
  sendFourLetterWord,
  SHARED_ZOO_CFG,
  terminate,
  zooKeeperJvmArgs,
  type ZooKeeperInstallation,
} from './zookeeper-process.js';

export type MemberMode = 'leader' | 'follower' | 'down';

export interface EnsembleMember {
  /** ZooKeeper's server id (myid), 1..size. */
  readonly id: number;
  readonly clientPort: number;
  /** "127.0.0.1:<clientPort>": a connect string that reaches this member only. */
  readonly connectString: string;
  /** The running JVM's pid; null while the member is stopped (killed, crashed, not yet restarted). */
  readonly pid: number | null;
  /** True between pause() and resume(). */
  readonly paused: boolean;
  /** This member's ZooKeeper dataDir (myid, version-2/), inside the ensemble's dir. */
  readonly dataDir: string;
  /**
   * "leader" or "follower" as reported by the `srvr` four-letter word; "down" when the member is
   * stopped, does not answer within `timeoutMs` (default 2 s; a paused JVM never answers), or
   * answers that it is not serving (e.g. while it looks for a leader).
   */
  mode(timeoutMs?: number): Promise<MemberMode>;
  /** How many client sessions are connected to this member now (the `cons` four-letter word). */
  sessionsConnected(): Promise<number>;
  /**
   * Sends `signal` (default SIGKILL) and resolves once the JVM has exited. A paused member is
   * continued after the signal so that a catchable one (SIGTERM) is handled. The signal must be
   * one that ends the JVM (not SIGQUIT, which makes it print a thread dump and carry on).
   */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /**
   * Starts the JVM again with the same zoo.cfg and data dir; resolves once it serves (mode leader
   * or follower). Needs a quorum to serve, like any member. If it does not serve within
   * `timeoutMs` (default 60 s) it is killed again and the returned promise rejects.
   */
  restart(timeoutMs?: number): Promise<void>;
  /**
   * SIGSTOP: the JVM freezes. To its peers and clients this looks like a network partition: its
   * sockets stay open (the kernel even accepts new connections) but nothing is answered. Returns
   * once every thread of the JVM has stopped.
   */
  pause(): void;
  /** SIGCONT after pause(). */
  resume(): void;
  /** The last lines the member printed, across restarts (for diagnostics). */
  logTail(): string;
}

export interface ZooKeeperEnsemble {
  readonly members: readonly EnsembleMember[];
  /** All client addresses, comma-separated, for a client's connect string. */
  readonly connectString: string;
  /** The temp dir holding everything; removed by stop(). */
  readonly dir: string;
  /** Milliseconds from the first spawn until a leader was elected and every member served. */
  readonly startupMs: number;
  /**
   * Waits (polling `srvr` every ~100 ms, default at most 30 s) until exactly one member reports
   * leader, and returns it.
   */
  leader(timeoutMs?: number): Promise<EnsembleMember>;
  /**
   * Resolves once a quorum serves again: one leader and at least floor(size/2) followers
   * answering (default at most 30 s).
   */
  waitForQuorum(timeoutMs?: number): Promise<void>;
  /** Resumes paused members, stops every JVM (SIGTERM, then SIGKILL), removes `dir`. Idempotent. */
  stop(): Promise<void>;
}

export interface StartZooKeeperEnsembleOptions {
  /** Number of servers. Default 3. */
  size?: number;
  /** ZooKeeper's tick: initLimit/syncLimit and session expiry are counted in it. Default 200 ms. */
  tickTimeMs?: number;
  /** Overall time allowed from spawn until every member serves. Default 90 000 ms. */
  startTimeoutMs?: number;
  /** Receives every line every member prints (stdout and stderr), with the member's id. */
  logger?: (member: number, line: string) => void;
  /**
   * The epoch every member starts from (its currentEpoch and acceptedEpoch files): the first
   * leader's epoch is one more, and a zxid is `epoch << 32 | counter`. Above 2^21 every zxid,
   * and so every fencing token, exceeds 2^53.
   */
  epoch?: number;
}

const DEFAULT_SIZE = 3;
const DEFAULT_TICK_TIME_MS = 200;
const DEFAULT_MAX_SESSION_TIMEOUT_MS = 60_000;
// Generous: three JVMs are serving after 2-3 s here, but on CI they share two slow cores with
// the rest of the test run.
const DEFAULT_START_TIMEOUT_MS = 90_000;
const DEFAULT_RESTART_TIMEOUT_MS = 60_000;
const DEFAULT_WAIT_TIMEOUT_MS = 30_000;
const POLL_INTERVAL_MS = 100;
// A live member answers `srvr` in milliseconds; a frozen one never does. Polling loops use the
// shorter timeout so that a paused member slows each round by at most that much.
const MODE_TIMEOUT_MS = 2_000;
const POLL_MODE_TIMEOUT_MS = 1_000;
const PAUSE_TIMEOUT_MS = 2_000;
const LOG_TAIL_LINES = 200;
const OWN_PROBE_LOG_LINE = /Processing (srvr|conf|cons) command from/;
const ERROR_TAIL_LINES = 80;
const START_ATTEMPTS = 3;
/** Ports are picked below the kernel's ephemeral range, but not lower than this. */
const LOWEST_PORT = 10_000;

/** Starts a fresh ensemble and resolves once a leader is elected and every member serves. */
export async function startZooKeeperEnsemble(
  options: StartZooKeeperEnsembleOptions = {},
): Promise<ZooKeeperEnsemble> {
  const size = options.size ?? DEFAULT_SIZE;
  // extendedTypesEnabled (TTL nodes) needs server ids below 255.
  if (!Number.isInteger(size) || size < 1 || size > 254) {
    throw new Error(`ensemble size must be an integer from 1 to 254, got ${size}`);
  }
  const installation = findZooKeeperInstallation();
  if (installation === null) {
    throw new Error(
      'ZooKeeper is not installed: need java and /usr/share/java/zookeeper.jar ' +
        '(run scripts/install-test-deps.sh, or set LOCKSTREAM_ZK_CLASSPATH).',
    );
  }
  // As in the standalone harness: a port found free can be taken before the JVM binds it, which
  // shows up as a BindException. Start over with all new ports.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(installation, size, options);
    } catch (error) {
      if (!(error instanceof PortInUseError) || attempt >= START_ATTEMPTS) throw error;
    }
  }
}

class PortInUseError extends Error {}

async function startOnce(
  installation: ZooKeeperInstallation,
  size: number,
  options: StartZooKeeperEnsembleOptions,
): Promise<ZooKeeperEnsemble> {
  const tickTimeMs = options.tickTimeMs ?? DEFAULT_TICK_TIME_MS;
  const startTimeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;

  const dir = await mkdtemp(path.join(os.tmpdir(), 'lockstream-zk-ensemble-'));
  const members: Member[] = [];
  try {
    // Per member: client port, quorum port (followers connect to the leader's), election port.
    const ports = await findFreePorts(3 * size);
    const port = (index: number): number => {
      const found = ports[index];
      if (found === undefined) throw new Error(`INVARIANT: no port #${index}`);
      return found;
    };
    const servers = Array.from({ length: size }, (_, i) => ({
      id: i + 1,
      clientPort: port(3 * i),
      quorumPort: port(3 * i + 1),
      electionPort: port(3 * i + 2),
    }));
    const log4jFile = path.join(dir, 'log4j.properties');
    await writeFile(log4jFile, LOG4J_PROPERTIES);
    for (const server of servers) {
      const memberDir = path.join(dir, `member-${server.id}`);
      const dataDir = path.join(memberDir, 'data');
      const configFile = path.join(memberDir, 'zoo.cfg');
      await mkdir(dataDir, { recursive: true });
      await writeFile(path.join(dataDir, 'myid'), `${server.id}\n`);
      if (options.epoch !== undefined) {
        const epochDir = path.join(dataDir, 'version-2');
        await mkdir(epochDir, { recursive: true });
        await writeFile(path.join(epochDir, 'currentEpoch'), String(options.epoch));
        await writeFile(path.join(epochDir, 'acceptedEpoch'), String(options.epoch));
      }
      await writeFile(configFile, zooCfg({ ...server, dataDir, tickTimeMs, servers }));
      const args = zooKeeperJvmArgs(installation, { logDir: memberDir, log4jFile, configFile });
      members.push(
        new Member({
          id: server.id,
          clientPort: server.clientPort,
          dataDir,
          cwd: memberDir,
          ensembleDir: dir,
          java: installation.java,
          args,
          logger: options.logger,
        }),
      );
    }
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }

  const ensemble = new Ensemble(members, dir);
  const spawnedAt = performance.now();
  const deadline = spawnedAt + startTimeoutMs;
  try {
    for (const member of members) member.spawn();
    // Fails fast when any member exits: the others may well form a quorum without it.
    await Promise.all(members.map((member) => member.waitUntilServing(deadline)));
    // Prove that each port is answered by our JVM, not by a process that grabbed the port
    // between findFreePorts() and our bind (conf only answers once the member serves).
    await Promise.all(members.map((member) => member.checkIdentity()));
    await ensemble.leader(Math.max(deadline - performance.now(), POLL_INTERVAL_MS));
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const details =
      `ZooKeeper ensemble of ${size} failed to start (time allowed: ${startTimeoutMs} ms): ${message}\n` +
      members.map((member) => member.describe()).join('\n');
    const portTaken = members.some((member) => /BindException|Address already in use/.test(member.logTail()));
    await ensemble.stop();
    if (portTaken) throw new PortInUseError(details);
    throw new Error(details, { cause: error });
  }
  ensemble.startupMs = performance.now() - spawnedAt;
  return ensemble;
}

function zooCfg(c: {
  id: number;
  clientPort: number;
  dataDir: string;
  tickTimeMs: number;
  servers: readonly { id: number; quorumPort: number; electionPort: number }[];
}): string {
  return [
    `tickTime=${c.tickTimeMs}`,
    // In ticks (2 s and 1 s at the default 200 ms tick): time for a follower to connect and sync
    // with a new leader, and the silence after which leader and follower give up on each other
    // (how long a pause() has to last to count as a partition).
    'initLimit=10',
    'syncLimit=5',
    `minSessionTimeout=${2 * c.tickTimeMs}`,
    `maxSessionTimeout=${DEFAULT_MAX_SESSION_TIMEOUT_MS}`,
    `dataDir=${c.dataDir}`,
    'clientPortAddress=127.0.0.1',
    `clientPort=${c.clientPort}`,
    // A lone member must not fall back to standalone mode, and the membership is fixed: no
    // dynamic config file is written next to zoo.cfg.
    'standaloneEnabled=false',
    'reconfigEnabled=false',
    ...SHARED_ZOO_CFG,
    ...c.servers.map((s) => `server.${s.id}=127.0.0.1:${s.quorumPort}:${s.electionPort}`),
    '',
  ].join('\n');
}

class Ensemble implements ZooKeeperEnsemble {
  readonly members: readonly Member[];
  readonly connectString: string;
  readonly dir: string;
  startupMs = NaN;
  #stopping: Promise<void> | undefined;

  constructor(members: readonly Member[], dir: string) {
    this.members = members;
    this.connectString = members.map((member) => member.connectString).join(',');
    this.dir = dir;
  }

  async leader(timeoutMs = DEFAULT_WAIT_TIMEOUT_MS): Promise<EnsembleMember> {
    const modes = await this.#pollModes(
      'exactly one leader',
      timeoutMs,
      (m) => m.filter((mode) => mode === 'leader').length === 1,
    );
    const index = modes.indexOf('leader');
    const leader = this.members[index];
    if (leader === undefined) throw new Error('INVARIANT: no leader after polling for one');
    return leader;
  }

  async waitForQuorum(timeoutMs = DEFAULT_WAIT_TIMEOUT_MS): Promise<void> {
    const followersNeeded = Math.floor(this.members.length / 2);
    await this.#pollModes(
      `a quorum (one leader, at least ${followersNeeded} follower(s))`,
      timeoutMs,
      (m) =>
        m.filter((mode) => mode === 'leader').length === 1 &&
        m.filter((mode) => mode === 'follower').length >= followersNeeded,
    );
  }

  /** Asks every member for its mode until `done` accepts the answers; they are returned. */
  async #pollModes(
    awaited: string,
    timeoutMs: number,
    done: (modes: MemberMode[]) => boolean,
  ): Promise<MemberMode[]> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const modes = await Promise.all(this.members.map((member) => member.mode(POLL_MODE_TIMEOUT_MS)));
      if (done(modes)) return modes;
      if (this.#stopping !== undefined) throw new Error(`the ensemble was stopped; awaited ${awaited}`);
      if (performance.now() + POLL_INTERVAL_MS > deadline) {
        const summary = this.members.map((member, i) => `${member.id}: ${modes[i] ?? '?'}`).join(', ');
        throw new Error(
          `timed out after ${timeoutMs} ms waiting for ${awaited}; modes: ${summary}\n` +
            this.members.map((member) => member.describe()).join('\n'),
        );
      }
      await sleep(POLL_INTERVAL_MS);
    }
  }

  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      await Promise.all(this.members.map((member) => member.stop()));
      await rm(this.dir, { recursive: true, force: true, maxRetries: 3 });
    })();
    return this.#stopping;
  }
}

interface MemberConfig {
  id: number;
  clientPort: number;
  dataDir: string;
  cwd: string;
  ensembleDir: string;
  java: string;
  args: readonly string[];
  logger: ((member: number, line: string) => void) | undefined;
}

/** The current JVM of a member; a new one per (re)start. */
interface Jvm {
  child: ChildProcess;
  exited: Promise<void>;
  hasExited: boolean;
  exitDescription: string;
}

class Member implements EnsembleMember {
  readonly id: number;
  readonly clientPort: number;
  readonly connectString: string;
  readonly dataDir: string;
  readonly #config: MemberConfig;
  #jvm: Jvm | null = null;
  #paused = false;
  #stopped = false;
  #lastExit = 'not started';
  #lastProbe = 'none yet';
  readonly #tail: string[] = [];
  /** One per JVM ever spawned; called by stop(). */
  readonly #untrack: (() => void)[] = [];

  constructor(config: MemberConfig) {
    this.#config = config;
    this.id = config.id;
    this.clientPort = config.clientPort;
    this.connectString = `127.0.0.1:${config.clientPort}`;
    this.dataDir = config.dataDir;
  }

  get pid(): number | null {
    return this.#jvm?.child.pid ?? null;
  }

  get paused(): boolean {
    return this.#paused;
  }

  logTail(): string {
    return this.#tail.join('\n');
  }

  /** For error messages: state, last `srvr` answer, and the end of the log. */
  describe(): string {
    const state =
      this.#jvm === null
        ? `stopped (last exit: ${this.#lastExit})`
        : `pid ${this.pid ?? '?'}${this.#paused ? ', paused' : ''}, last srvr: ${this.#lastProbe}`;
    const tail = this.#tail.slice(-ERROR_TAIL_LINES).join('\n');
    return (
      `--- member ${this.id} (${this.connectString}): ${state}\n` +
      `--- last output of member ${this.id} ---\n${tail}`
    );
  }

  async mode(timeoutMs = MODE_TIMEOUT_MS): Promise<MemberMode> {
    if (this.#jvm === null) return 'down';
    try {
      const srvr = await sendFourLetterWord(this.clientPort, 'srvr', timeoutMs);
      const mode = /^Mode: (\w+)/m.exec(srvr)?.[1];
      this.#lastProbe = JSON.stringify(mode ?? srvr.trim().slice(0, 100));
      // Anything else (standalone, observer, "not currently serving requests") is not a member
      // of a serving quorum as this harness sets it up.
      return mode === 'leader' || mode === 'follower' ? mode : 'down';
    } catch (error) {
      this.#lastProbe = error instanceof Error ? error.message : String(error);
      return 'down';
    }
  }

  async sessionsConnected(): Promise<number> {
    const cons = await sendFourLetterWord(this.clientPort, 'cons', MODE_TIMEOUT_MS);
    // One line per connection; the four-letter word's own connection has no session id.
    return cons.split('\n').filter((line) => /sid=0x[0-9a-f]*[1-9a-f]/.test(line)).length;
  }

  spawn(): void {
    const { java, args, cwd, ensembleDir, logger, id } = this.#config;
    const child = spawn(java, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    const jvm: Jvm = { child, exited: Promise.resolve(), hasExited: false, exitDescription: '' };
    jvm.exited = new Promise<void>((resolve) => {
      const onExit = (description: string): void => {
        if (jvm.hasExited) return;
        jvm.hasExited = true;
        jvm.exitDescription = description;
        this.#lastExit = description;
        this.#remember(`[harness] ---- JVM ${child.pid ?? '?'} exited: ${description} ----`);
        // Exited on its own or killed: either way the member is down now.
        if (this.#jvm === jvm) {
          this.#jvm = null;
          this.#paused = false;
        }
        resolve();
      };
      child.once('exit', (code, signal) => {
        onExit(signal !== null ? `signal ${signal}` : `exit code ${String(code)}`);
      });
      // spawn failures (ENOENT, EACCES) emit 'error' and possibly no 'exit'.
      child.once('error', (error) => onExit(`spawn error: ${error.message}`));
    });
    this.#jvm = jvm;
    this.#paused = false;
    this.#lastProbe = 'none yet';
    this.#untrack.push(killOnExit(child, ensembleDir));

    const onLine = (line: string): void => {
      logger?.(id, line);
      // Each of our probes makes the member log a line; polling ten times a second, they would
      // soon be all the tail holds.
      if (!OWN_PROBE_LOG_LINE.test(line)) this.#remember(line);
    };
    if (this.#tail.length > 0) this.#remember(`[harness] ---- restarted: JVM ${child.pid ?? '?'} ----`);
    // Always drain both pipes: a full pipe would block the JVM's logging threads.
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream, crlfDelay: Infinity }).on('line', onLine);
    }
  }

  /** Adds a line to the log tail (not to the logger, which gets the JVM's own lines only). */
  #remember(line: string): void {
    this.#tail.push(line);
    if (this.#tail.length > LOG_TAIL_LINES) this.#tail.shift();
  }

  /** Polls `srvr` until the current JVM serves as leader or follower. */
  async waitUntilServing(deadline: number): Promise<void> {
    const jvm = this.#jvm;
    if (jvm === null) throw new Error(`member ${this.id} is not running`);
    for (;;) {
      if (jvm.hasExited) throw new Error(`member ${this.id} exited (${jvm.exitDescription})`);
      const mode = await this.mode(POLL_MODE_TIMEOUT_MS);
      if (mode !== 'down' && this.#jvm === jvm) return;
      if (performance.now() > deadline) {
        throw new Error(`member ${this.id} was not serving in time (last srvr: ${this.#lastProbe})`);
      }
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((resolve) => (timer = setTimeout(resolve, POLL_INTERVAL_MS))),
        jvm.exited,
      ]);
      clearTimeout(timer);
    }
  }

  /** Fails unless the server on our client port says it is server `id` with our data dir. */
  async checkIdentity(): Promise<void> {
    const conf = await sendFourLetterWord(this.clientPort, 'conf', 5_000);
    // Printed as "serverId=<id>" and "dataDir=<our dataDir>/version-2".
    if (!conf.includes(`serverId=${this.id}\n`) || !conf.includes(`dataDir=${this.dataDir}${path.sep}`)) {
      throw new Error(
        `port ${this.clientPort} is not answered by member ${this.id}: conf said ` +
          JSON.stringify(conf.trim().slice(0, 300)),
      );
    }
  }

  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const jvm = this.#jvm;
    if (jvm === null) return;
    jvm.child.kill(signal);
    // A stopped process only acts on SIGKILL; let it run so that it can handle `signal`.
    if (this.#paused) this.resume();
    await jvm.exited;
  }

  async restart(timeoutMs = DEFAULT_RESTART_TIMEOUT_MS): Promise<void> {
    if (this.#stopped) throw new Error(`member ${this.id}: the ensemble was stopped`);
    if (this.#jvm !== null)
      throw new Error(`member ${this.id} is running (pid ${this.pid}); kill() it first`);
    this.spawn();
    try {
      await this.waitUntilServing(performance.now() + timeoutMs);
    } catch (error) {
      // Leave the member in a known state (stopped) rather than half-started.
      await this.kill('SIGKILL');
      const message = error instanceof Error ? error.message : String(error);
      throw new Error(`member ${this.id} did not serve again after restart: ${message}\n${this.describe()}`, {
        cause: error,
      });
    }
  }

  pause(): void {
    const jvm = this.#jvm;
    if (jvm === null || jvm.child.pid === undefined) throw new Error(`member ${this.id} is not running`);
    jvm.child.kill('SIGSTOP');
    this.#paused = true;
    waitUntilStopped(jvm.child.pid, PAUSE_TIMEOUT_MS);
  }

  resume(): void {
    const jvm = this.#jvm;
    if (jvm === null) return;
    jvm.child.kill('SIGCONT');
    this.#paused = false;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    const jvm = this.#jvm;
    if (jvm !== null) {
      // A stopped JVM would hold SIGTERM pending and only die of terminate()'s SIGKILL later.
      if (this.#paused) this.resume();
      await terminate(jvm.child, jvm.exited, () => jvm.hasExited);
    }
    for (const untrack of this.#untrack.splice(0)) untrack();
  }
}

/**
 * Returns once every thread of `pid` is stopped. SIGSTOP takes effect thread by thread after
 * kill() has returned (seen here: a JVM answered `srvr` right after its SIGSTOP), so without
 * this wait a probe sent just after pause() could still be answered. Synchronous because
 * pause() is; it takes a few milliseconds. Without /proc (not Linux) it cannot tell and returns
 * at once.
 */
function waitUntilStopped(pid: number, timeoutMs: number): void {
  const deadline = performance.now() + timeoutMs;
  const nap = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    let threads: string[];
    try {
      threads = readdirSync(`/proc/${pid}/task`);
    } catch {
      return; // no /proc, or the process is gone
    }
    const running = threads.filter((thread) => {
      try {
        const stat = readFileSync(`/proc/${pid}/task/${thread}/stat`, 'utf8');
        // The state letter follows the command name, which is in parentheses and may contain ')'.
        const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
        // T: stopped by a signal; t: tracing stop; Z, X: the thread has ended.
        return !'TtZX'.includes(state);
      } catch {
        return false; // the thread has ended
      }
    });
    if (running.length === 0) return;
    if (performance.now() > deadline) {
      throw new Error(`pid ${pid}: ${running.length} threads still running ${timeoutMs} ms after SIGSTOP`);
    }
    Atomics.wait(nap, 0, 0, 1); // sleep 1 ms without spinning
  }
}

/**
 * `count` distinct ports that were free on 127.0.0.1 a moment ago, picked below the kernel's
 * ephemeral port range when there is room. Why not port 0 as for the standalone server: a
 * member binds some of its ports late (the quorum port only when it becomes leader) or again
 * (after restart()), and meanwhile any outgoing connection on the machine (test clients, the
 * members' own connections to each other) may be given a port from the ephemeral range as its
 * local port, which then makes the member's bind fail.
 */
async function findFreePorts(count: number): Promise<number[]> {
  const range = ephemeralPortRange();
  const highest = range === null ? 0 : range.low - 1;
  // Holding every probe socket open until all are found keeps the ports distinct.
  const held: net.Server[] = [];
  try {
    const ports: number[] = [];
    for (let attempt = 0; ports.length < count && highest - LOWEST_PORT >= 1_000; attempt++) {
      if (attempt >= 50 * count) break;
      const port = LOWEST_PORT + Math.floor(Math.random() * (highest - LOWEST_PORT + 1));
      if (ports.includes(port)) continue;
      const server = await listenOn(port);
      if (server === null) continue;
      held.push(server);
      ports.push(port);
    }
    // No room below the ephemeral range (or too crowded): fall back to what the kernel gives.
    while (ports.length < count) {
      const port = await findFreePort();
      if (!ports.includes(port)) ports.push(port);
    }
    return ports;
  } finally {
    await Promise.all(held.map((server) => new Promise((resolve) => server.close(resolve))));
  }
}

function ephemeralPortRange(): { low: number; high: number } | null {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
      .trim()
      .split(/\s+/)
      .map(Number);
    if (low === undefined || high === undefined || !Number.isInteger(low) || !Number.isInteger(high)) {
      return null;
    }
    return { low, high };
  } catch {
    return null; // not Linux
  }
}

/** A server listening on 127.0.0.1:`port`, or null if the port is taken. */
function listenOn(port: number): Promise<net.Server | null> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(null));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => resolve(server));
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
