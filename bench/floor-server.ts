/**
 * What the benchmark's floors (grpc-floor.ts, zk-floor.ts) share: a LockService that locks
 * through `acquire` and `session` only, served on 127.0.0.1 until stdin closes. Prints
 * `{"event":"listening","port":N}`; answers a `cpu` line on stdin with
 * `{"event":"cpu","micros":N}` (the process's own process.cpuUsage()).
 */
import { createInterface } from 'node:readline';
import * as grpc from '@grpc/grpc-js';
import { LockServiceService, type LockServiceServer } from '../dist/gen/lockstream/v1/lockstream.js';

export async function serveFloor(
  name: string,
  rpcs: Pick<LockServiceServer, 'acquire' | 'session'>,
): Promise<void> {
  const unimplemented = (_call: unknown, callback: grpc.sendUnaryData<never>): void =>
    callback({ code: grpc.status.UNIMPLEMENTED, details: `${name} only locks` });
  const service: LockServiceServer = {
    ...rpcs,
    describeLock: unimplemented,
    listLocks: unimplemented,
    checkToken: unimplemented,
    revokeLock: unimplemented,
    watchLock: (call) => call.destroy(new Error('unimplemented')),
  };
  const server = new grpc.Server({ 'grpc.max_concurrent_streams': 100_000, 'grpc.enable_channelz': 0 });
  server.addService(LockServiceService, service);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  // A SIGTERM (the benchmark's stop) exits normally, so that `--cpu-prof` writes its profile.
  process.once('SIGTERM', () => process.exit(0));
  process.stdout.write(`${JSON.stringify({ event: 'listening', port })}\n`);
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim() !== 'cpu') continue;
    const used = process.cpuUsage();
    process.stdout.write(`${JSON.stringify({ event: 'cpu', micros: used.user + used.system })}\n`);
  }
  server.forceShutdown();
}
