/**
 * The gRPC floor: a LockService that grants every request at once and keeps nothing, so a
 * benchmark against it measures only what gRPC, HTTP/2 and the SDK cost. It speaks the same
 * conversations as lockstream, on Acquire (`resumable` when asked for, `acquired`, `released`,
 * OK) and on Session (`opened`, then `acquired`, `released` and `ended` per request), so the
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
  type SessionRequest,
  type SessionResponse,
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
      call.write({ kind: { $case: 'acquired', value: { fencingToken: nextToken++, tokens: [] } } });
    } else if (request.kind?.$case === 'release') {
      release();
    }
  });
  call.on('end', release);
  call.on('error', () => (done = true));
}

function session(call: grpc.ServerDuplexStream<SessionRequest, SessionResponse>): void {
  call.on('data', ({ kind }: SessionRequest) => {
    switch (kind?.$case) {
      case 'open':
        call.write({
          requestId: 0,
          kind: { $case: 'opened', value: { resumeToken: '', resumeGrace: undefined } },
        });
        return;
      case 'acquire':
        call.write({
          requestId: kind.value.requestId,
          kind: { $case: 'acquired', value: { fencingToken: nextToken++, tokens: [] } },
        });
        return;
      case 'release':
      case 'cancel':
        call.write({ requestId: kind.value.requestId, kind: { $case: 'released', value: {} } });
        call.write({
          requestId: kind.value.requestId,
          kind: { $case: 'ended', value: { code: 0, message: '' } },
        });
        return;
      // The floor measures acquire/release only; holder requests are not part of it.
      case 'heartbeat':
      case 'resume':
      case 'setValue':
      case 'downgrade':
      case undefined:
        return;
    }
  });
  call.on('end', () => call.end());
  call.on('error', () => {});
}

const unimplemented = (_call: unknown, callback: grpc.sendUnaryData<never>): void =>
  callback({ code: grpc.status.UNIMPLEMENTED, details: 'the gRPC floor only grants' });

const service: LockServiceServer = {
  acquire,
  session,
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
