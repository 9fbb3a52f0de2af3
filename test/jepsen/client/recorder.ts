/**
 * Starts recorder-main.ts (a lock client that records its history) as a process of its own on a
 * test host, and collects the history it prints.
 */
import { type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { killOnExit } from '../../setup/zookeeper-process.js';
import type { Host, TestNetwork } from '../net/test-network.js';

const MAIN = fileURLToPath(new URL('./recorder-main.ts', import.meta.url));

/** One line of a history (test/jepsen/checker/README.md). */
export interface HistoryEvent {
  readonly t: number;
  readonly client: string;
  readonly op: number;
  readonly type: 'invoke' | 'ok' | 'fail' | 'info' | 'event';
  readonly f:
    | 'acquire'
    | 'release'
    | 'check'
    | 'in_doubt'
    | 'confirmed'
    | 'lost'
    // Elections (checker README: "Elections").
    | 'observe'
    | 'proclaim'
    | 'resign'
    | 'term'
    | 'proclaimed'
    | 'vacant'
    | 'history_gone'
    | 'skipped'
    // Records (checker README: "Records").
    | 'increment'
    | 'read'
    | 'final';
  readonly lock: string;
  readonly mode?: string;
  readonly token?: string;
  /** A check's answer: whether the token held the lock. */
  readonly held?: boolean;
  readonly error?: string;
  /** Elections: the term a term event, proclaim or resign names. */
  readonly term?: string;
  readonly reference?: boolean;
  /** A candidate's `elected` (acquire ok): the instance it was elected through; a final read's server. */
  readonly server?: string;
  /** Records: the counter (store, key of `lock`) an increment or a read is of, an increment's id. */
  readonly store?: string;
  readonly key?: string;
  readonly id?: string;
}

export interface RecorderOptions {
  readonly client: string;
  readonly servers: readonly string[];
  readonly locks: readonly string[];
  readonly mode?: 'write' | 'read' | 'semaphore' | 'mutex';
  readonly limit?: number;
  readonly holdMs?: string;
  readonly pauseMs?: string;
  readonly waitTimeoutMs?: number;
  readonly count?: number;
  readonly timeMs?: number;
  /** Record no CheckToken answers (`check` ops). */
  readonly noCheck?: boolean;
  /** A planted bug: told its lock is lost, the client holds on to its hold time's end. */
  readonly ignoreLost?: boolean;
  /** Further environment for the client process. */
  readonly env?: Readonly<Record<string, string>>;
  /**
   * lock (the default), an election's candidate, observer or reference (election-roles.ts), or
   * the records workload's incrementer or final-reader (record-increments.ts).
   */
  readonly role?: 'lock' | 'candidate' | 'observer' | 'reference' | 'incrementer' | 'final-reader';
  readonly graceMs?: number;
  readonly quick?: number;
  readonly stale?: number;
  /** An observer's stream lifetime, `min-max` ms. */
  readonly observeMs?: string;
  /** Candidates: the campaigns that start on these servers ask for the grace, the others not. */
  readonly graceServers?: readonly string[];
  /** Records: counters per lock, increments per hold (`min-max`), ms between a read and its write. */
  readonly keys?: number;
  readonly increments?: string;
  readonly thinkMs?: string;
  /** Records: the PostgreSQL store's connection string, and the planted run's plain transactions. */
  readonly postgres?: string;
  readonly unfenced?: boolean;
}

export class Recorder {
  readonly client: string;
  readonly history: HistoryEvent[] = [];
  readonly #child: ChildProcess;
  readonly #exited: Promise<unknown>;
  #exit: number | NodeJS.Signals | null = null;
  #stderr = '';
  readonly #awaited = new Set<(event: HistoryEvent) => void>();

  private constructor(client: string, child: ChildProcess) {
    this.client = client;
    this.#child = child;
    const untrack = killOnExit(child);
    this.#exited = once(child, 'close').then(([code, signal]) => {
      untrack();
      this.#exit = (code ?? signal) as number | NodeJS.Signals;
    });
    child.stderr?.on('data', (chunk: Buffer) => (this.#stderr += chunk.toString()));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const event = JSON.parse(line) as HistoryEvent;
      this.history.push(event);
      for (const hear of [...this.#awaited]) hear(event);
    });
  }

  static start(network: TestNetwork, host: Host, options: RecorderOptions): Recorder {
    const args = [
      '--import',
      'tsx',
      MAIN,
      '--client',
      options.client,
      '--servers',
      options.servers.join(','),
      '--locks',
      options.locks.join(','),
      '--mode',
      options.mode ?? 'write',
      ...(options.limit === undefined ? [] : ['--limit', String(options.limit)]),
      ...(options.holdMs === undefined ? [] : ['--hold-ms', options.holdMs]),
      ...(options.pauseMs === undefined ? [] : ['--pause-ms', options.pauseMs]),
      ...(options.waitTimeoutMs === undefined ? [] : ['--wait-timeout-ms', String(options.waitTimeoutMs)]),
      ...(options.count === undefined ? [] : ['--count', String(options.count)]),
      ...(options.timeMs === undefined ? [] : ['--time-ms', String(options.timeMs)]),
      ...(options.noCheck ? ['--no-check'] : []),
      ...(options.ignoreLost ? ['--ignore-lost'] : []),
      ...(options.role === undefined ? [] : ['--role', options.role]),
      ...(options.graceMs === undefined ? [] : ['--grace-ms', String(options.graceMs)]),
      ...(options.quick === undefined ? [] : ['--quick', String(options.quick)]),
      ...(options.stale === undefined ? [] : ['--stale', String(options.stale)]),
      ...(options.observeMs === undefined ? [] : ['--observe-ms', options.observeMs]),
      ...(options.graceServers === undefined ? [] : ['--grace-servers', options.graceServers.join(',')]),
      ...(options.keys === undefined ? [] : ['--keys', String(options.keys)]),
      ...(options.increments === undefined ? [] : ['--increments', options.increments]),
      ...(options.thinkMs === undefined ? [] : ['--think-ms', options.thinkMs]),
      ...(options.postgres === undefined ? [] : ['--postgres', options.postgres]),
      ...(options.unfenced ? ['--unfenced'] : []),
    ];
    const child = network.spawn(host, process.execPath, args, {
      stdio: ['pipe', 'pipe', 'pipe'],
      ...(options.env ? { env: { ...process.env, ...options.env } } : {}),
    });
    return new Recorder(options.client, child);
  }

  /** Calls `hear` with every event recorded from now on, until the returned function is called. */
  listen(hear: (event: HistoryEvent) => void): () => void {
    this.#awaited.add(hear);
    return () => this.#awaited.delete(hear);
  }

  /** The first event that `matches`, recorded already or when it comes. */
  event(matches: (event: HistoryEvent) => boolean, timeoutMs = 60_000): Promise<HistoryEvent> {
    const found = this.history.find(matches);
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        unlisten();
        reject(new Error(`${this.client}: no such event within ${timeoutMs} ms\n${this.#stderr}`));
      }, timeoutMs);
      const unlisten = this.listen((event) => {
        if (!matches(event)) return;
        clearTimeout(timer);
        unlisten();
        resolve(event);
      });
    });
  }

  /** Resolves once the client was told its request for `lock` is queued (behind others). */
  queued(lock: string, timeoutMs = 60_000): Promise<void> {
    const told = (): boolean => new RegExp(`^queued [1-9]\\d* ${lock}$`, 'm').test(this.#stderr);
    return new Promise((resolve, reject) => {
      const started = performance.now();
      const poll = (): void => {
        if (told()) resolve();
        else if (performance.now() - started > timeoutMs)
          reject(new Error(`${this.client}: not queued for ${lock} within ${timeoutMs} ms\n${this.#stderr}`));
        else this.#child.stderr?.once('data', poll);
      };
      poll();
    });
  }

  /** Tells the recorder to stop (it releases what it holds) and waits for it to exit. */
  async stop(): Promise<void> {
    this.#child.stdin?.end();
    const timer = setTimeout(() => this.#child.kill('SIGKILL'), 15_000);
    await this.#exited;
    clearTimeout(timer);
  }

  /** Sends `signal` to the recorder (SIGKILL: dies holding what it holds) and waits for its exit. */
  async kill(signal: NodeJS.Signals): Promise<void> {
    this.#child.kill(signal);
    if (signal === 'SIGKILL' || signal === 'SIGTERM') await this.#exited;
  }

  /** How the process ended (exit code or signal); null while it runs. */
  get exitCode(): number | NodeJS.Signals | null {
    return this.#exit;
  }

  /** Waits for the recorder to finish on its own (`count` or `timeMs`). */
  async finished(): Promise<void> {
    await this.#exited;
  }

  get stderr(): string {
    return this.#stderr;
  }
}
