/**
 * Part 1 of `npm run bench:zk-sessions`: what N sessions cost at rest, one per client session or
 * one per instance, on the client and on ZooKeeper.
 */
import { execFile } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { promisify } from 'node:util';
import type { ZooKeeperProcess } from '../../test/setup/zookeeper-process.js';
import { processCpuMicros, residentBytes } from '../measure.js';
import { sleep, startWorker, uniqueRoot, workerSample, type WorkerSample } from './worker-process.js';

const run = promisify(execFile);

export type Design = 'session per client session' | 'session per instance';

export interface CostResult {
  readonly design: Design;
  /** Sessions (one node each), or nodes of the one session. */
  readonly count: number;
  readonly openMs: number;
  readonly openFailures: number;
  readonly client: {
    readonly rssBytes: number;
    /** RSS and live JS heap added per session (or node) over the process before it opened any. */
    readonly rssBytesPer: number;
    readonly heapBytesPer: number;
    /** CPU while idle, as a share of one core. */
    readonly idleCpuShare: number;
    readonly fds: number;
    /** Connections lost, or sessions expired, from the opening to the end of the window. */
    readonly connectionsLost: number;
  };
  readonly zookeeper: {
    readonly rssBytes: number;
    /** RSS added since before the worker started (the JVM keeps what it once took). */
    readonly rssBytesAdded: number;
    /** Live heap (after a full collection) added per session or node. */
    readonly heapBytesPer: number;
    readonly idleCpuShare: number;
    /** Packets received per second while idle: pings. */
    readonly packetsPerSecond: number;
    readonly fds: number;
    readonly connections: number;
  };
  readonly closeMs: number;
}

interface ZooKeeperSample {
  readonly rssBytes: number;
  readonly cpuMicros: number;
  readonly fds: number;
  readonly packetsReceived: number;
  readonly connections: number;
}

async function zooKeeperSample(zookeeper: ZooKeeperProcess): Promise<ZooKeeperSample> {
  const [rssBytes, cpuMicros, fds, mntr] = await Promise.all([
    residentBytes(zookeeper.pid),
    processCpuMicros(zookeeper.pid),
    readdir(`/proc/${zookeeper.pid}/fd`).then((entries) => entries.length),
    zookeeper.fourLetterWord('mntr'),
  ]);
  const counter = (name: string): number => {
    const value = new RegExp(`^${name}\\t(\\d+)$`, 'm').exec(mntr)?.[1];
    if (value === undefined) throw new Error(`no ${name} in ZooKeeper's mntr output`);
    return Number(value);
  };
  return {
    rssBytes,
    cpuMicros,
    fds,
    packetsReceived: counter('zk_packets_received'),
    connections: counter('zk_num_alive_connections'),
  };
}

/** The JVM's live heap after a full collection (jcmd), bytes. */
async function zooKeeperHeapBytes(zookeeper: ZooKeeperProcess): Promise<number> {
  await run('jcmd', [String(zookeeper.pid), 'GC.run']);
  const { stdout } = await run('jcmd', [String(zookeeper.pid), 'GC.heap_info']);
  // Serial GC: "def new generation total 78656K, used 1234K", "tenured generation total …, used …".
  const used = [...stdout.matchAll(/generation\s+total \d+K, used (\d+)K/g)].map((m) => Number(m[1]) * 1024);
  if (used.length === 0) throw new Error(`unexpected jcmd GC.heap_info output:\n${stdout}`);
  return used.reduce((a, b) => a + b, 0);
}

/**
 * Opens `count` sessions with a node each (`sessions`), or one session with `count` nodes
 * (`instance`), in a worker process; leaves them idle for `windowMs`; closes them.
 */
export async function measureCost(
  zookeeper: ZooKeeperProcess,
  role: 'sessions' | 'instance',
  count: number,
  windowMs: number,
): Promise<CostResult> {
  const heapBefore = await zooKeeperHeapBytes(zookeeper);
  const rssBefore = await residentBytes(zookeeper.pid);
  const worker = startWorker(zookeeper.connectString, role, uniqueRoot(role), count);
  try {
    const baseline = (await worker.next('baseline')) as unknown as WorkerSample;
    const opened = await worker.next('opened');
    const start = await workerSample(worker);
    const zkStart = await zooKeeperSample(zookeeper);
    // A fixed window of idleness to measure, not a wait for an event.
    await sleep(windowMs);
    const end = await workerSample(worker);
    const zkEnd = await zooKeeperSample(zookeeper);
    const heapAfter = await zooKeeperHeapBytes(zookeeper);
    worker.send('close');
    const closed = await worker.next('closed');
    await worker.exited;
    return {
      design: role === 'sessions' ? 'session per client session' : 'session per instance',
      count,
      openMs: Number(opened['ms']),
      openFailures: Number(opened['failures']),
      client: {
        rssBytes: end.rssBytes,
        rssBytesPer: (end.rssBytes - baseline.rssBytes) / count,
        heapBytesPer: (end.heapUsedBytes - baseline.heapUsedBytes) / count,
        idleCpuShare: (end.cpuMicros - start.cpuMicros) / (windowMs * 1000),
        fds: end.fds,
        connectionsLost: end.disconnected + end.expired,
      },
      zookeeper: {
        rssBytes: zkEnd.rssBytes,
        rssBytesAdded: zkEnd.rssBytes - rssBefore,
        heapBytesPer: (heapAfter - heapBefore) / count,
        idleCpuShare: (zkEnd.cpuMicros - zkStart.cpuMicros) / (windowMs * 1000),
        packetsPerSecond: ((zkEnd.packetsReceived - zkStart.packetsReceived) * 1000) / windowMs,
        fds: zkEnd.fds,
        connections: zkEnd.connections,
      },
      closeMs: Number(closed['ms']),
    };
  } finally {
    await worker.kill();
  }
}
