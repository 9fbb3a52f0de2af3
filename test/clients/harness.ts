import { spawn, type ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { killOnExit } from '../setup/zookeeper-process.js';
import type { ClientOptions, Command, StampedObservation } from './protocol.js';
import { goBuild } from '../support/go-build.js';
import { scaled } from '../support/timing.js';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const GO_DRIVER = join(repo, '.tmp/bin/lockstream-conformance-go');
const PYTHON = join(repo, '.venv/bin/python');

export type ClientLanguage = 'typescript' | 'go' | 'python';

/** How each driver is started (README.md). */
const COMMANDS: Record<ClientLanguage, () => [string, string[]]> = {
  typescript: () => [
    process.execPath,
    ['--import', 'tsx', fileURLToPath(new URL('./drivers/ts-driver.ts', import.meta.url))],
  ],
  go: () => [GO_DRIVER, []],
  python: () => [PYTHON, [fileURLToPath(new URL('./drivers/python_driver.py', import.meta.url))]],
};

/**
 * Builds the Go driver from the source under test (go caches the build) and checks that the
 * Python package is installed in .venv (scripts/test-clients.sh installs it).
 */
export async function prepareDrivers(): Promise<void> {
  await goBuild(GO_DRIVER, './cmd/conformance-driver', { cwd: join(repo, 'clients/go') });
  if (!existsSync(PYTHON)) throw new Error(`${PYTHON} is missing: run scripts/install-test-deps.sh`);
  await promisify(execFile)(PYTHON, ['-c', 'import lockstream.aio']).catch((error: unknown) => {
    throw new Error(
      `the lockstream Python package is not installed in .venv (scripts/test-clients.sh installs it): ${String(error)}`,
    );
  });
}

/** An observation as the suite received it: `arrivedAt` is performance.now() in this process. */
export type Received = StampedObservation & { readonly arrivedAt: number };

/** How long to wait for an observation before failing with what the driver said so far. */
const PATIENCE_MS = scaled(30_000);

/**
 * One driver process: commands go to its stdin, observations come from its stdout and are kept
 * in arrival order. Waiting for an observation is awaiting an event; the wait fails (rather
 * than hangs) after PATIENCE_MS, or as soon as the driver exits, listing what it said.
 */
export class Driver {
  readonly language: ClientLanguage;
  readonly observations: Received[] = [];
  readonly #child: ChildProcess;
  readonly #untrack: () => void;
  readonly #waiters = new Set<() => void>();
  #stderr = '';
  #exited = false;

  private constructor(language: ClientLanguage) {
    this.language = language;
    const [command, args] = COMMANDS[language]();
    this.#child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'], cwd: repo });
    this.#untrack = killOnExit(this.#child);
    this.#child.stderr?.on('data', (chunk: Buffer) => (this.#stderr += chunk.toString()));
    createInterface({ input: this.#child.stdout! }).on('line', (line) => {
      const arrivedAt = performance.now();
      let observation: StampedObservation;
      try {
        observation = JSON.parse(line) as StampedObservation;
      } catch {
        this.#stderr += `(not an observation on stdout) ${line}\n`;
        return;
      }
      this.observations.push({ ...observation, arrivedAt });
      this.#wake();
    });
    this.#child.once('exit', () => {
      this.#exited = true;
      this.#untrack();
      this.#wake();
    });
  }

  /**
   * Starts a driver, resolves once it says it is ready, and connects it to `address` (one
   * address, or a list of endpoints) with `options` (none: the client's defaults).
   */
  static async start(
    language: ClientLanguage,
    address: string | readonly string[],
    options: ClientOptions = {},
  ): Promise<Driver> {
    const driver = await Driver.launch(language);
    const connected = await driver.connect(address, options);
    if (connected.event !== 'connected') {
      throw new Error(`${language} driver could not connect: ${JSON.stringify(connected)}`);
    }
    return driver;
  }

  /** Starts a driver and resolves once it says it is ready, not yet connected. */
  static async launch(language: ClientLanguage): Promise<Driver> {
    const driver = new Driver(language);
    await driver.next((o) => o.event === 'ready', 'ready');
    return driver;
  }

  /**
   * Sends `connect` (`addresses` for a list) with `options`, and resolves with its answer:
   * connected or error.
   */
  async connect(address: string | readonly string[], options: ClientOptions = {}): Promise<Received> {
    const from = this.observations.length;
    this.send(
      typeof address === 'string'
        ? { op: 'connect', address, ...options }
        : { op: 'connect', addresses: address, ...options },
    );
    return this.next(
      (o) => o.event === 'connected' || (o.event === 'error' && o.id === ''),
      'the answer to connect',
      from,
    );
  }

  /** Sends a command; returns performance.now() when it was written. */
  send(command: Command): number {
    this.#child.stdin!.write(`${JSON.stringify(command)}\n`);
    return performance.now();
  }

  /** The first observation (from index `from`) that matches, once it has arrived. */
  async next(match: (o: Received) => boolean, what: string, from = 0): Promise<Received> {
    const deadline = performance.now() + PATIENCE_MS;
    for (;;) {
      const found = this.observations.slice(from).find(match);
      if (found) return found;
      if (this.#exited) throw new Error(`${this.#describe()} exited before reporting ${what}`);
      const left = deadline - performance.now();
      if (left <= 0) throw new Error(`${this.#describe()} did not report ${what} within ${PATIENCE_MS} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(wake, left);
        const waiters = this.#waiters;
        function wake(): void {
          clearTimeout(timer);
          waiters.delete(wake);
          resolve();
        }
        waiters.add(wake);
      });
    }
  }

  /** How request `id` was answered: acquired, not-acquired, a record written, unsupported or an error. */
  outcome(id: string): Promise<Received> {
    return this.next(
      (o) =>
        'id' in o &&
        o.id === id &&
        (o.event === 'acquired' ||
          o.event === 'not-acquired' ||
          o.event === 'record-written' ||
          o.event === 'unsupported' ||
          o.event === 'error'),
      `the outcome of ${id}`,
    );
  }

  /** The token of request `id`, which must have been acquired. */
  async acquired(id: string): Promise<string> {
    const outcome = await this.outcome(id);
    if (outcome.event !== 'acquired') {
      throw new Error(`${this.language}: ${id} was not acquired: ${JSON.stringify(outcome)}`);
    }
    return outcome.token;
  }

  /** Releases `id` and resolves with how the release was answered (released or error). */
  async release(id: string): Promise<Received> {
    const from = this.observations.length;
    this.send({ op: 'release', id });
    return this.next(
      (o) => 'id' in o && o.id === id && (o.event === 'released' || o.event === 'error'),
      `the answer to the release of ${id}`,
      from,
    );
  }

  /**
   * Sends `command` and resolves with the first observation about its `id` after it whose event
   * is one of `answers` or `error`.
   */
  async ask(command: Command & { readonly id: string }, answers: readonly string[]): Promise<Received> {
    const from = this.observations.length;
    this.send(command);
    return this.next(
      (o) => 'id' in o && o.id === command.id && (answers.includes(o.event) || o.event === 'error'),
      `the answer to ${command.op} ${command.id}`,
      from,
    );
  }

  /** The term candidate `id` was elected with, once it is (it must not fail). */
  async elected(id: string): Promise<string> {
    const outcome = await this.next(
      (o) => 'id' in o && o.id === id && (o.event === 'elected' || o.event === 'error'),
      `the election of ${id}`,
    );
    if (outcome.event !== 'elected') {
      throw new Error(`${this.language}: ${id} was not elected: ${JSON.stringify(outcome)}`);
    }
    return outcome.term;
  }

  /** What observer `id` was told so far, in order. */
  observedBy(id: string): Array<{ what: string; term: string; value?: string }> {
    return this.observations.flatMap((o) =>
      o.event === 'observed' && o.id === id
        ? [{ what: o.what, term: o.term, ...(o.value === undefined ? {} : { value: o.value }) }]
        : [],
    );
  }

  /** Every observation about request `id`, in order, by event name. */
  eventsOf(id: string): string[] {
    return this.observations.filter((o) => 'id' in o && o.id === id).map((o) => o.event);
  }

  /** What the driver said about request `id` (or everything), one observation a line: for messages. */
  transcript(id?: string): string {
    return this.observations
      .filter((o) => id === undefined || ('id' in o && o.id === id))
      .map(({ arrivedAt: _, ...o }) => JSON.stringify(o))
      .join('\n');
  }

  /** Ends input (the driver closes its client and exits), killing it if it lingers. */
  async stop(): Promise<void> {
    if (this.#exited) return;
    const exited = new Promise<void>((resolve) => this.#child.once('exit', () => resolve()));
    this.#child.stdin!.end();
    const lingering = setTimeout(() => this.#child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(lingering);
  }

  #wake(): void {
    for (const wake of [...this.#waiters]) wake();
  }

  #describe(): string {
    const said = this.observations.map((o) => JSON.stringify(o)).join('\n  ');
    return `the ${this.language} driver (observations:\n  ${said}\nstderr:\n${this.#stderr})`;
  }
}
