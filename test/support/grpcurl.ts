import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

/**
 * The grpcurl binary: on PATH, or where `go install` put it (scripts/install-test-deps.sh).
 * Throws, naming the fix, when it is missing: a missing grpcurl never passes.
 */
export function findGrpcurl(): string {
  const dirs = (process.env['PATH'] ?? '').split(path.delimiter).filter(Boolean);
  const goPath = process.env['GOPATH'] ?? path.join(process.env['HOME'] ?? '/root', 'go');
  dirs.push(path.join(goPath, 'bin'));
  for (const dir of dirs) {
    const candidate = path.join(dir, 'grpcurl');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // keep looking
    }
  }
  throw new Error('grpcurl is not installed: run scripts/install-test-deps.sh');
}

const run = promisify(execFile);

/** Runs one grpcurl command to completion and resolves with its stdout. */
export async function grpcurl(args: string[]): Promise<string> {
  const { stdout } = await run(findGrpcurl(), args, { timeout: 20_000 });
  return stdout;
}

/**
 * A grpcurl process whose stdin stays open, as an operator typing at a terminal: messages are
 * written as they come, and closing stdin is pressing Ctrl-D.
 */
export class InteractiveGrpcurl {
  readonly #child: ChildProcess;
  #stdout = '';
  #stderr = '';
  readonly #waiters: Array<() => void> = [];
  /** Resolves with the exit code once grpcurl has exited. */
  readonly exited: Promise<number | null>;

  constructor(args: string[]) {
    this.#child = spawn(findGrpcurl(), args, { stdio: ['pipe', 'pipe', 'pipe'] });
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
    });
  }

  get stdout(): string {
    return this.#stdout;
  }

  get stderr(): string {
    return this.#stderr;
  }

  /** Types one JSON message. */
  type(message: unknown): void {
    this.#child.stdin?.write(`${JSON.stringify(message)}\n`);
  }

  /** Ctrl-D: closes stdin, which grpcurl turns into a half-close of the stream. */
  endInput(): void {
    this.#child.stdin?.end();
  }

  kill(): void {
    this.#child.kill('SIGKILL');
  }

  /** Resolves with the first match of `pattern` in stdout; rejects if grpcurl exits first. */
  async waitFor(pattern: RegExp): Promise<RegExpMatchArray> {
    for (;;) {
      const match = pattern.exec(this.#stdout);
      if (match) return match;
      if (this.#child.exitCode !== null) {
        throw new Error(
          `grpcurl exited (${this.#child.exitCode}) before printing ${pattern}:\n${this.#stdout}\n${this.#stderr}`,
        );
      }
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }

  #notify(): void {
    for (const wake of this.#waiters.splice(0)) wake();
  }
}
