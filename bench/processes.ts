/** Child processes of the benchmark that speak JSON lines on stdout and take commands on stdin. */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { killOnExit } from '../test/setup/zookeeper-process.js';
import type { WorkloadResult } from './workloads.js';

export const BENCH_DIR = fileURLToPath(new URL('.', import.meta.url));

export interface LineProcess {
  readonly pid: number;
  /** Resolves with the next stdout line that parses as JSON with this `event` (or that matches). */
  next(event: string | ((message: Record<string, unknown>) => boolean)): Promise<Record<string, unknown>>;
  send(line: string): void;
  /** Resolves with the exit code once the process has ended. */
  readonly exited: Promise<number | null>;
  kill(): Promise<number | null>;
}

export function spawnLineProcess(
  command: string,
  args: readonly string[],
  /** Sees every JSON line as it arrives, whether or not `next` asks for it. */
  onMessage?: (message: Record<string, unknown>) => void,
): LineProcess {
  const child: ChildProcess = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  const untrack = killOnExit(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const exited = new Promise<number | null>((resolve) =>
    child.on('close', (code) => {
      untrack();
      resolve(code);
    }),
  );
  const queue: Array<Record<string, unknown>> = [];
  type Matcher = (message: Record<string, unknown>) => boolean;
  const matcher = (event: string | Matcher): Matcher =>
    typeof event === 'string' ? (m) => m['event'] === event || m['event'] === 'error' : event;
  const waiting: Array<{ matches: Matcher; resolve: (m: Record<string, unknown>) => void }> = [];
  createInterface({ input: child.stdout! }).on('line', (line) => {
    let message: Record<string, unknown>;
    try {
      message = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return; // not ours (a library printing to stdout)
    }
    onMessage?.(message);
    const index = waiting.findIndex((w) => w.matches(message));
    const waiter = index >= 0 ? waiting.splice(index, 1)[0] : undefined;
    if (waiter) waiter.resolve(message);
    else queue.push(message);
  });
  const describe = `${command} ${args.join(' ')}`;
  return {
    pid: child.pid ?? -1,
    next: (event) => {
      const matches = matcher(event);
      const index = queue.findIndex(matches);
      const queued = index >= 0 ? queue.splice(index, 1)[0] : undefined;
      const message = queued
        ? Promise.resolve(queued)
        : Promise.race([
            new Promise<Record<string, unknown>>((resolve) => waiting.push({ matches, resolve })),
            exited.then((code) => ({ event: 'error', message: `exited (${code}) before it was ready` })),
          ]);
      return message.then((m) => {
        if (m['event'] === 'error') {
          throw new Error(`${describe}: ${String(m['message'])}\n${stderr}`);
        }
        return m;
      });
    },
    send: (line) => child.stdin?.write(`${line}\n`),
    exited,
    kill: async () => {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

/** `[command, ...args]` that run a TypeScript file of the repository under Node. */
export function nodeScript(file: string, args: readonly string[]): [string, string[]] {
  return [process.execPath, ['--import', 'tsx', fileURLToPath(new URL(file, import.meta.url)), ...args]];
}

export interface LockstreamServer {
  readonly address: string;
  readonly pid: number;
  /** Its /metrics port. */
  readonly httpPort: number;
  /** The log lines at warn level or above it has printed so far (pino levels: warn 40, error 50). */
  warnings(): ReadonlyArray<Record<string, unknown>>;
  stop(): Promise<void>;
}

/**
 * `lockstream serve` as a benchmark runs it: built JavaScript, info logs, metrics port, no stream
 * cap. `nodeArgs` go to Node itself (e.g. `--heapsnapshot-signal=SIGUSR2`); `build.cli` runs
 * another checkout's build, and `build.root` gives it a lock tree of its own.
 */
export async function startLockstreamServer(
  zookeeper: string | undefined,
  extraArgs: readonly string[] = [],
  nodeArgs: readonly string[] = [],
  build: { readonly cli?: string; readonly root?: string } = {},
): Promise<LockstreamServer> {
  const root = build.root ?? '/bench-lockstream';
  const store = zookeeper === undefined ? [] : ['--zookeeper', zookeeper, '--root', root];
  const warnings: Array<Record<string, unknown>> = [];
  const keepWarning = (line: Record<string, unknown>): void => {
    if (typeof line['level'] === 'number' && line['level'] >= 40) warnings.push(line);
  };
  const server = spawnLineProcess(
    process.execPath,
    [
      ...nodeArgs,
      build.cli ?? fileURLToPath(new URL('../dist/cli.js', import.meta.url)),
      'serve',
      '--port',
      '0',
      ...store,
      '--http-port',
      '0',
      '--max-streams-per-connection',
      '100000',
      ...extraArgs,
    ],
    keepWarning,
  );
  const listening = await server.next((m) => String(m['msg']).startsWith('lockstream listening'));
  const page = await server.next((m) => typeof m['httpPort'] === 'number').catch(() => listening);
  return {
    address: `127.0.0.1:${String(listening['port'])}`,
    pid: server.pid,
    httpPort: Number(page['httpPort']),
    warnings: () => warnings,
    stop: async () => void (await server.kill()),
  };
}

/** Runs the U workload from a separate load process against a lockstream server. */
export async function runUncontended(
  address: string,
  prefix: string,
  cycles: number,
  rpc: 'acquire' | 'session' = 'session',
): Promise<{ p50: number; p99: number; opsPerSec: number }> {
  const load = spawnLineProcess(
    ...nodeScript('./load.ts', [
      '--target',
      'grpc',
      ...(rpc === 'acquire' ? ['--per-lock'] : []),
      '--server',
      address,
      '--workload',
      'U',
      '--prefix',
      prefix,
      '--cycles',
      String(cycles),
      '--warmup',
      String(Math.min(200, cycles)),
    ]),
  );
  await load.next('ready');
  load.send('go');
  const { result } = (await load.next('done')) as { result: WorkloadResult };
  await load.exited;
  return { ...result.latencyMs, opsPerSec: (result.acquisitions * 1000) / result.durationMs };
}
