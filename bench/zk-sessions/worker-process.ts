/** Starting and sampling the client processes of `npm run bench:zk-sessions` (worker.ts). */
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/server/config.js';
import { spawnLineProcess, type LineProcess } from '../processes.js';

/** lockstream's default ZooKeeper session timeout (`--session-timeout`). */
export const SESSION_TIMEOUT_MS = loadConfig({}, []).sessionTimeoutMs;

const WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url));

export type Role = 'sessions' | 'instance' | 'holder';

/** A worker process with `role`, on the ZooKeeper members of `connect`, under `root`. */
export function startWorker(
  connect: string,
  role: Role,
  root: string,
  count: number,
  onMessage?: (message: Record<string, unknown>) => void,
): LineProcess {
  const args = ['--expose-gc', '--import', 'tsx', WORKER, role, connect, root, String(count)];
  return spawnLineProcess(process.execPath, [...args, String(SESSION_TIMEOUT_MS)], onMessage);
}

export interface WorkerSample {
  readonly rssBytes: number;
  readonly heapUsedBytes: number;
  readonly cpuMicros: number;
  readonly fds: number;
  /** Sessions connected now. */
  readonly connected: number;
  /** Since the sessions were opened: connections lost, re-established, sessions expired. */
  readonly disconnected: number;
  readonly reconnected: number;
  readonly expired: number;
}

export async function workerSample(worker: LineProcess): Promise<WorkerSample> {
  worker.send('sample');
  return (await worker.next('sample')) as unknown as WorkerSample;
}

/** A root of its own for each run, so that runs never see each other's nodes. */
export const uniqueRoot = (what: string): string =>
  `/bench-zk-sessions-${what}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 6)}`;

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
