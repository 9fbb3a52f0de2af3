/** What the benchmark reads off the processes it measures. */
import { readFile } from 'node:fs/promises';
import { sendFourLetterWord } from '../test/setup/zookeeper-process.js';

export interface ZooKeeperCounters {
  /** The last zxid: every write (create, delete, setData, session open/close) takes one. */
  readonly zxid: number;
  /** Requests through ZooKeeper's request pipeline (reads, writes and idle sessions' pings). */
  readonly requests: number;
  /** CPU time of the ZooKeeper JVM, µs (10 ms resolution). */
  readonly cpuMicros: number;
}

export async function zooKeeperCounters(port: number, pid: number): Promise<ZooKeeperCounters> {
  const [srvr, mntr, cpuMicros] = await Promise.all([
    sendFourLetterWord(port, 'srvr', 5_000),
    sendFourLetterWord(port, 'mntr', 5_000),
    processCpuMicros(pid),
  ]);
  const zxid = /^Zxid: (0x[0-9a-f]+)$/m.exec(srvr)?.[1];
  const requests = /^zk_cnt_prep_process_time\t(\d+)$/m.exec(mntr)?.[1];
  if (zxid === undefined || requests === undefined) throw new Error(`unexpected srvr/mntr output:\n${srvr}`);
  return { zxid: Number(BigInt(zxid)), requests: Number(requests), cpuMicros };
}

/** ZooKeeper writes and reads between two snapshots. */
export function zooKeeperDelta(
  before: ZooKeeperCounters,
  after: ZooKeeperCounters,
): { writes: number; reads: number; cpuMicros: number } {
  const writes = after.zxid - before.zxid;
  return {
    writes,
    reads: Math.max(0, after.requests - before.requests - writes),
    cpuMicros: after.cpuMicros - before.cpuMicros,
  };
}

const CLOCK_TICK_MICROS = 10_000; // USER_HZ is 100 on Linux

/** User + system CPU of another process, from /proc (10 ms resolution). */
export async function processCpuMicros(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces) start at field 3.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * CLOCK_TICK_MICROS;
}

/** Resident set size of a process, bytes. */
export async function residentBytes(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kib = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1];
  if (kib === undefined) throw new Error(`no VmRSS for ${pid}`);
  return Number(kib) * 1024;
}

/**
 * A lockstream server's own CPU time, µs: prom-client's process_cpu_seconds_total, which is
 * the server's process.cpuUsage() at the time of the scrape.
 */
export async function lockstreamCpuMicros(httpPort: number): Promise<number> {
  const response = await fetch(`http://127.0.0.1:${httpPort}/metrics`);
  const text = await response.text();
  const seconds = /^lockstream_process_cpu_seconds_total (\S+)$/m.exec(text)?.[1];
  if (seconds === undefined) throw new Error('no lockstream_process_cpu_seconds_total in /metrics');
  return Math.round(Number(seconds) * 1e6);
}
