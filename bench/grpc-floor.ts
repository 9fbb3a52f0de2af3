/**
 * The gRPC floor: a LockService that grants every Acquire at once and keeps nothing, so a
 * benchmark against it measures only what gRPC, HTTP/2 and the SDK cost. It speaks the same
 * conversation as lockstream (`resumable` when asked for, `acquired`, `released`, OK), so the
 * same SDK and load generator drive it.
 *
 * Prints `{"event":"listening","port":N}`; answers a `cpu` line on stdin with
 * `{"event":"cpu","micros":N}` (its own process.cpuUsage()).
 */
import { createInterface } from 'node:readline';
import * as grpc from '@grpc/grpc-js';
import {
  LockServiceService,
  type AcquireRequest,
  type AcquireResponse,
  type LockServiceServer,
} from '../dist/gen/lockstream/v1/lockstream.js';

let nextToken = 1n;

function acquire(call: grpc.ServerDuplexStream<AcquireRequest, AcquireResponse>): void {
  let done = false;
  const release = (): void => {
    if (done) return;
    done = true;
    call.write({ kind: { $case: 'released', value: {} } });
    call.end();
  };
  call.on('data', (request: AcquireRequest) => {
    if (request.kind?.$case === 'start') {
      const { resumeGrace } = request.kind.value;
      if (resumeGrace) {
        call.write({ kind: { $case: 'resumable', value: { resumeToken: 'floor.0', resumeGrace } } });
      }
      call.write({ kind: { $case: 'acquired', value: { fencingToken: nextToken++ } } });
    } else if (request.kind?.$case === 'release') {
      release();
    }
  });
  call.on('end', release);
  call.on('error', () => (done = true));
}

const unimplemented = (_call: unknown, callback: grpc.sendUnaryData<never>): void =>
  callback({ code: grpc.status.UNIMPLEMENTED, details: 'the gRPC floor only grants' });

const service: LockServiceServer = {
  acquire,
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
process.stdout.write(`${JSON.stringify({ event: 'listening', port })}\n`);
for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() !== 'cpu') continue;
  const used = process.cpuUsage();
  process.stdout.write(`${JSON.stringify({ event: 'cpu', micros: used.user + used.system })}\n`);
}
server.forceShutdown();
