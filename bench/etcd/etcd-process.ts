/**
 * A private single-member etcd for the benchmark's etcd row: Debian's `etcd-server` (3.4) on
 * loopback ports, its data in a temp dir, the WAL fsynced on every commit as etcd always does
 * (the same durability as the benchmark's ZooKeeper with fsync on).
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { findFreePort, killOnExit } from '../../test/setup/zookeeper-process.js';

export const ETCD_BINARY = '/usr/bin/etcd';

export interface EtcdProcess {
  /** host:port of its gRPC (client) endpoint. */
  readonly address: string;
  readonly pid: number;
  stop(): Promise<void>;
}

export async function startEtcd(): Promise<EtcdProcess> {
  if (!existsSync(ETCD_BINARY)) {
    throw new Error(
      `${ETCD_BINARY} is missing: apt-get install etcd-server (scripts/install-test-deps.sh does)`,
    );
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lockstream-bench-etcd-'));
  const [clientPort, peerPort] = [await findFreePort(), await findFreePort()];
  const client = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const child = spawn(
    ETCD_BINARY,
    [
      '--name=bench',
      `--data-dir=${path.join(dir, 'data')}`,
      `--listen-client-urls=${client}`,
      `--advertise-client-urls=${client}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=bench=${peer}`,
      '--logger=zap',
      '--log-level=error',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const untrack = killOnExit(child, dir);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const stop = async (): Promise<void> => {
    child.kill('SIGTERM');
    await exited;
    untrack();
    await rm(dir, { recursive: true, force: true });
  };
  // Ready once /health says so (it answers on the client port, next to gRPC).
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null)
      throw new Error(`etcd exited (${child.exitCode}) before it was ready:\n${stderr}`);
    const healthy = await fetch(`${client}/health`)
      .then(async (response) => ((await response.json()) as { health?: string }).health === 'true')
      .catch(() => false);
    if (healthy) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`etcd was not healthy within 30 s:\n${stderr}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { address: `127.0.0.1:${clientPort}`, pid: child.pid ?? -1, stop };
}
