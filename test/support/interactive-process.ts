import { spawn, type ChildProcess } from 'node:child_process';

/**
 * A child process driven like a terminal session: its stdin stays open for typing, its stdout is
 * searched as it arrives, and closing stdin is pressing Ctrl-D.
 */
export class InteractiveProcess {
  readonly #child: ChildProcess;
  readonly #description: string;
  #stdout = '';
  #stderr = '';
  readonly #waiters: Array<() => void> = [];
  /** Resolves with the exit code once the process has exited. */
  readonly exited: Promise<number | null>;

  constructor(
    command: string,
    args: readonly string[],
    options: { cwd?: string; env?: Readonly<Record<string, string>> } = {},
  ) {
    this.#description = [command, ...args].join(' ');
    this.#child = spawn(command, args, {
      stdio: ['pipe', 'pipe', 'pipe'],
      cwd: options.cwd,
      env: { ...process.env, ...options.env },
    });
    this.#child.stdout?.on('data', (chunk: Buffer) => {
      this.#stdout += chunk.toString();
      this.#notify();
    });
    this.#child.stderr?.on('data', (chunk: Buffer) => {
      this.#stderr += chunk.toString();
    });
    this.exited = new Promise((resolve) => {
      this.#child.once('exit', (code) => {
        resolve(code);
        this.#notify();
      });
      this.#child.once('error', (error) => {
        this.#stderr += String(error);
        resolve(null);
        this.#notify();
      });
    });
  }

  get stdout(): string {
    return this.#stdout;
  }

  get stderr(): string {
    return this.#stderr;
  }

  /** Types one JSON message followed by a newline. */
  type(message: unknown): void {
    this.#child.stdin?.write(`${JSON.stringify(message)}\n`);
  }

  /** Types one line of text. */
  typeLine(line: string): void {
    this.#child.stdin?.write(`${line}\n`);
  }

  /** Ctrl-D: closes stdin. */
  endInput(): void {
    this.#child.stdin?.end();
  }

  kill(): void {
    this.#child.kill('SIGKILL');
  }

  /** Sends `signal` (SIGSTOP pauses the process, SIGCONT wakes it). */
  signal(signal: NodeJS.Signals): void {
    this.#child.kill(signal);
  }

  /**
   * Resolves with the first match of `pattern` in stdout (from offset `from`); rejects if the
   * process exits first.
   */
  async waitFor(pattern: RegExp, from = 0): Promise<RegExpMatchArray> {
    for (;;) {
      const match = pattern.exec(this.#stdout.slice(from));
      if (match) return match;
      if (this.#child.exitCode !== null || this.#child.signalCode !== null) {
        throw new Error(
          `${this.#description} exited before printing ${pattern}:\n${this.#stdout}\n${this.#stderr}`,
        );
      }
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }

  #notify(): void {
    for (const wake of this.#waiters.splice(0)) wake();
  }
}
