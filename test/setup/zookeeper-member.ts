/**
 * One ZooKeeper server of a test ensemble (a standalone server is an ensemble of one): its JVM,
 * started, probed, killed, paused and restarted with the same zoo.cfg and data dir, as a real
 * restart would; and the process hygiene every test JVM needs (stop, kill on exit).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { scaled } from '../support/timing.js';

/** `standalone`: a server of an ensemble of one run without a quorum (standaloneEnabled). */
export type MemberMode = 'leader' | 'follower' | 'standalone' | 'down';

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
   * "leader", "follower" or "standalone" as reported by the `srvr` four-letter word; "down" when the member is
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

const DEFAULT_RESTART_TIMEOUT_MS = scaled(60_000);
/** Polling `srvr` while a member starts. */
export const POLL_INTERVAL_MS = 100;
// A live member answers `srvr` in milliseconds; a frozen one never does. Polling loops use the
// shorter timeout so that a paused member slows each round by at most that much.
const MODE_TIMEOUT_MS = 2_000;
export const POLL_MODE_TIMEOUT_MS = 1_000;
const PAUSE_TIMEOUT_MS = 2_000;
const STOP_GRACE_MS = 5_000;
const LOG_TAIL_LINES = 200;
const OWN_PROBE_LOG_LINE = /Processing (srvr|conf|cons|ruok) command from/;
const ERROR_TAIL_LINES = 80;

export interface MemberConfig {
  id: number;
  clientPort: number;
  dataDir: string;
  cwd: string;
  ensembleDir: string;
  java: string;
  args: readonly string[];
  logger: ((member: number, line: string) => void) | undefined;
  /**
   * Where the member runs when not on this machine's loopback: a test host of its own (a
   * network namespace, test/jepsen/net), its address there, the command prefix that runs a
   * program inside it, and how a four-letter word reaches it.
   */
  host?: {
    readonly ip: string;
    readonly prefix: readonly string[];
    readonly fourLetterWord: (port: number, cmd: string, timeoutMs: number) => Promise<string>;
  };
}

/** The current JVM of a member; a new one per (re)start. */
interface Jvm {
  child: ChildProcess;
  exited: Promise<void>;
  hasExited: boolean;
  exitDescription: string;
}

export class Member implements EnsembleMember {
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
    this.connectString = `${config.host?.ip ?? '127.0.0.1'}:${config.clientPort}`;
    this.dataDir = config.dataDir;
  }

  get pid(): number | null {
    return this.#jvm?.child.pid ?? null;
  }

  /** The command line of its JVM: [java, ...args]. */
  get command(): readonly string[] {
    return [this.#config.java, ...this.#config.args];
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
      const srvr = await this.#fourLetterWord('srvr', timeoutMs);
      const mode = /^Mode: (\w+)/m.exec(srvr)?.[1];
      this.#lastProbe = JSON.stringify(mode ?? srvr.trim().slice(0, 100));
      // Anything else (observer, "not currently serving requests") is not serving as this
      // harness sets servers up.
      return mode === 'leader' || mode === 'follower' || mode === 'standalone' ? mode : 'down';
    } catch (error) {
      this.#lastProbe = error instanceof Error ? error.message : String(error);
      return 'down';
    }
  }

  async sessionsConnected(): Promise<number> {
    const cons = await this.#fourLetterWord('cons', MODE_TIMEOUT_MS);
    // One line per connection; the four-letter word's own connection has no session id.
    return cons.split('\n').filter((line) => /sid=0x[0-9a-f]*[1-9a-f]/.test(line)).length;
  }

  /** Sends a four-letter word (`conf`, `mntr`, ...) to the member; resolves with its answer. */
  fourLetterWord(cmd: string, timeoutMs = MODE_TIMEOUT_MS): Promise<string> {
    return this.#fourLetterWord(cmd, timeoutMs);
  }

  #fourLetterWord(cmd: string, timeoutMs: number): Promise<string> {
    const send = this.#config.host?.fourLetterWord ?? sendFourLetterWord;
    return send(this.clientPort, cmd, timeoutMs);
  }

  spawn(): void {
    const { java, args, cwd, ensembleDir, logger, id, host } = this.#config;
    // `ip netns exec` execs the program itself: the child's pid is the JVM's.
    const [command, ...prefixArgs] = host ? [...host.prefix, java] : [java];
    const child = spawn(command, [...prefixArgs, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
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

  /**
   * Fails unless the server on our client port is this member: its data dir is ours (not a
   * process that grabbed the port between finding it free and our bind). `conf` answers once
   * the member serves.
   */
  async checkIdentity(): Promise<void> {
    const conf = await this.#fourLetterWord('conf', 5_000);
    // Printed as "dataDir=<our dataDir>/version-2".
    if (!conf.includes(`dataDir=${this.dataDir}${path.sep}`)) {
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
