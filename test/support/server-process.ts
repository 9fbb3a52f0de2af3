import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { killOnExit } from '../setup/zookeeper-process.js';

export interface ServerProcess {
  readonly address: string;
  readonly pid: number;
  /** Every log line the server printed, parsed. */
  readonly logs: Array<Record<string, unknown>>;
  /**
   * The first log line that `matches`, printed already or when it comes: the log reaches the
   * test through a pipe of its own, so it may come after what a client was told meanwhile.
   * Rejects if the server exits first.
   */
  logged(matches: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>>;
  /** What the server printed on stderr (a crash's stack trace). */
  readonly stderr: () => string;
  /** Null while it runs. */
  readonly exitCode: () => number | NodeJS.Signals | null;
  /** Resolves with the exit code (or signal) once the process has exited. */
  readonly exited: Promise<number | NodeJS.Signals>;
  kill(signal: NodeJS.Signals): Promise<number | NodeJS.Signals>;
}

export const CLI = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));

/**
 * Where a server runs when not on this machine's loopback: a test host (test/jepsen/net), its
 * address, and the command prefix that runs a program inside it.
 */
export interface ServerPlacement {
  readonly ip: string;
  readonly prefix: readonly string[];
}

/** Runs `lockstream serve <args>` as its own process on a free port; resolves once it listens. */
export async function startServerProcess(
  args: string[],
  env: Record<string, string> = {},
  placement?: ServerPlacement,
): Promise<ServerProcess> {
  const serve = ['--import', 'tsx', CLI, 'serve', '--port', '0', '--log-level', 'debug'];
  if (placement) serve.push('--host', placement.ip);
  // `ip netns exec` execs the program itself: the child's pid is the server's.
  const [command, ...prefixArgs] = placement ? [...placement.prefix, process.execPath] : [process.execPath];
  const child: ChildProcess = spawn(command, [...prefixArgs, ...serve, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  const logs: Array<Record<string, unknown>> = [];
  const awaited = new Set<(line: Record<string, unknown>) => void>();
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  // Never outlive the test process, even when it is killed before it can stop the server.
  const untrack = killOnExit(child);
  // 'close', not 'exit': only then has everything the server printed been read.
  const exited = once(child, 'close').then(([code, signal]) => {
    untrack();
    return (code ?? signal) as number | NodeJS.Signals;
  });
  const port = await new Promise<number>((resolve, reject) => {
    let buffered = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) {
        // The log is JSON lines; anything else on stdout is kept, marked, for tests to catch.
        let entry: Record<string, unknown>;
        try {
          entry = JSON.parse(line) as Record<string, unknown>;
        } catch {
          entry = { notJson: line };
        }
        logs.push(entry);
        for (const hear of awaited) hear(entry);
        if (typeof entry['port'] === 'number' && String(entry['msg']).startsWith('lockstream listening')) {
          resolve(entry['port']);
        }
      }
    });
    void exited.then((code) =>
      reject(new Error(`lockstream serve exited (${code}) before listening:\n${stderr}`)),
    );
  });
  return {
    address: `${placement?.ip ?? '127.0.0.1'}:${port}`,
    pid: child.pid ?? -1,
    logs,
    logged: (matches) => {
      const found = logs.find(matches);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const hear = (line: Record<string, unknown>): void => {
          if (!matches(line)) return;
          awaited.delete(hear);
          resolve(line);
        };
        awaited.add(hear);
        void exited.then((code) => {
          if (!awaited.delete(hear)) return;
          reject(new Error(`lockstream serve exited (${code}) before logging the line awaited`));
        });
      });
    },
    stderr: () => stderr,
    exitCode: () => child.exitCode ?? child.signalCode,
    exited,
    kill: async (signal) => {
      child.kill(signal);
      return exited;
    },
  };
}
