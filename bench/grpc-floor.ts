/**
 * The gRPC floor: a LockService that grants every request at once and keeps nothing, so a
 * benchmark against it measures only what gRPC, HTTP/2 and the SDK cost. It speaks the same
 * conversations as lockstream, on Acquire (`resumable` when asked for, `acquired`, `released`,
 * OK) and on Session (`opened`, then `acquired`, `released` and `ended` per request), so the
 * same SDK and load generator drive it.
 *
 * It speaks to the benchmark as floor-server.ts says.
 */
import type * as grpc from '@grpc/grpc-js';
import { serveFloor } from './floor-server.js';
import {
  type AcquireRequest,
  type AcquireResponse,
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

await serveFloor('the gRPC floor', { acquire, session });
