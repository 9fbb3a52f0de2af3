import type { ClientHttp2Session } from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AcquireRequest,
  AcquireResponse,
  LockMode,
  SessionRequest,
  SessionResponse,
} from '../../src/gen/lockstream/v1/lockstream.js';
import { connectRaw, RawGrpcCall } from '../support/raw-grpc.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

/**
 * A call's deadline ends it no earlier than it says, however long: gRPC allows `grpc-timeout`
 * up to 99,999,999 hours, and a lock holder that asked for a month must not lose its lock
 * because a timer overflowed. The server runs in its own process and the client speaks raw
 * HTTP/2, so each test chooses the exact header a client in any language could send.
 */
describe('call deadlines', () => {
  let server: ServerProcess;
  let connection: ClientHttp2Session;
  let lockNumber = 0;

  beforeAll(async () => {
    server = await startServerProcess([]);
    connection = await connectRaw(server.address);
  });
  afterAll(async () => {
    connection?.close();
    await server?.kill('SIGTERM');
  });

  const acquireCall = (name: string, timeout?: string): RawGrpcCall<AcquireRequest, AcquireResponse> => {
    const call = new RawGrpcCall(
      connection,
      '/lockstream.v1.LockService/Acquire',
      timeout === undefined ? {} : { 'grpc-timeout': timeout },
      { request: AcquireRequest, response: AcquireResponse },
    );
    call.send(
      AcquireRequest.fromPartial({ kind: { $case: 'start', value: { name, mode: LockMode.MUTEX } } }),
    );
    return call;
  };
  const is =
    (kind: string) =>
    (message: { kind?: { $case: string } | undefined }): boolean =>
      message.kind?.$case === kind;

  // Just past 2^31 − 1 ms (the largest Node.js timer), 100 years, and gRPC's largest value.
  it.each(['2147484S', '876000H', '99999999H'])(
    'an Acquire call with grpc-timeout %s keeps its lock until the client releases it',
    async (timeout) => {
      const name = `long-deadline-${(lockNumber += 1)}`;
      const holder = acquireCall(name, timeout);
      await holder.next(is('acquired'));
      // A second request, answered after the holder's grant, finds it still holding.
      const waiter = acquireCall(name);
      const queued = await waiter.next(is('queued'));
      expect(queued.kind).toEqual({ $case: 'queued', value: { ahead: 1 } });
      holder.halfClose();
      expect(await holder.ended).toMatchObject({ code: grpc.status.OK });
      expect(holder.received.map((m) => m.kind?.$case)).toEqual(['acquired', 'released']);
      await waiter.next(is('acquired'));
      waiter.halfClose();
      expect((await waiter.ended).code).toBe(grpc.status.OK);
    },
  );

  it('a Session stream with grpc-timeout 99999999H keeps its locks until it half-closes', async () => {
    const name = `long-deadline-${(lockNumber += 1)}`;
    const session = new RawGrpcCall(
      connection,
      '/lockstream.v1.LockService/Session',
      { 'grpc-timeout': '99999999H' },
      { request: SessionRequest, response: SessionResponse },
    );
    session.send(SessionRequest.fromPartial({ kind: { $case: 'open', value: {} } }));
    session.send(
      SessionRequest.fromPartial({
        kind: { $case: 'acquire', value: { requestId: 1, name, mode: LockMode.MUTEX } },
      }),
    );
    await session.next((m) => m.requestId === 1 && m.kind?.$case === 'acquired');
    const waiter = acquireCall(name);
    await waiter.next(is('queued'));
    session.halfClose();
    expect(await session.ended).toMatchObject({ code: grpc.status.OK });
    expect(session.received.map((m) => `${m.requestId}:${m.kind?.$case}`)).toEqual([
      '0:opened',
      '1:acquired',
      '1:released',
      '1:ended',
    ]);
    await waiter.next(is('acquired'));
    waiter.halfClose();
    await waiter.ended;
  });

  it.each([
    ['1500u', 1.5],
    ['40000000n', 40],
    ['30m', 30],
  ])(
    'a waiting Acquire call with grpc-timeout %s ends DEADLINE_EXCEEDED, not before %f ms',
    async (timeout, ms) => {
      const name = `short-deadline-${(lockNumber += 1)}`;
      const holder = acquireCall(name);
      await holder.next(is('acquired'));
      const startedAt = performance.now();
      const waiter = acquireCall(name, timeout);
      const end = await waiter.ended;
      expect(performance.now() - startedAt).toBeGreaterThanOrEqual(ms);
      expect(end).toEqual({ code: grpc.status.DEADLINE_EXCEEDED, details: 'Deadline exceeded' });
      holder.halfClose();
      expect(await holder.ended).toMatchObject({ code: grpc.status.OK });
    },
  );

  it('a holder whose call deadline passes ends DEADLINE_EXCEEDED, an abnormal end that frees the lock for the next', async () => {
    const name = `held-deadline-${(lockNumber += 1)}`;
    const holder = acquireCall(name, '300m');
    await holder.next(is('acquired'));
    const waiter = acquireCall(name);
    await waiter.next(is('queued'));
    expect(await holder.ended).toEqual({ code: grpc.status.DEADLINE_EXCEEDED, details: 'Deadline exceeded' });
    // No `released`: the holder did not release; it asked for no resume grace, so the lock is freed.
    expect(holder.received.map((m) => m.kind?.$case)).toEqual(['acquired']);
    await waiter.next(is('acquired'));
    waiter.halfClose();
    await waiter.ended;
  });

  it.each(['123456789S', '10s', '5', 'soon'])(
    'refuses grpc-timeout %s, which gRPC does not allow, with INTERNAL',
    async (timeout) => {
      const name = `bad-deadline-${(lockNumber += 1)}`;
      const call = acquireCall(name, timeout);
      expect(await call.ended).toEqual({
        code: grpc.status.INTERNAL,
        details: `Invalid grpc-timeout value "${timeout}"`,
      });
      // Nothing was queued for it: the next request holds at once.
      const next = acquireCall(name);
      await next.next(is('acquired'));
      next.halfClose();
      await next.ended;
    },
  );
});
