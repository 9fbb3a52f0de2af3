/*
 * The handlers of the unary RPCs (DescribeLock, ListLocks, CheckToken, RevokeLock) and of the
 * WatchLock stream, each admitting its caller through the gate first.
 */
import { status, type sendUnaryData, type ServerUnaryCall, type ServerWritableStream } from '@grpc/grpc-js';
import { onAbort, writeDrained } from '../../common/abort.js';
import type { Logger } from 'pino';
import type {
  DescribeLockResponse,
  LockRequestInfo as WireLockRequestInfo,
  LockServiceServer,
  WatchLockRequest,
  WatchLockResponse,
} from '../../gen/lockstream/v1/lockstream.js';
import type { LockDescription, LockEngine, LockInspector, LockRequestInfo } from '../engine/index.js';
import { durationToMs, toWireMode, validateLabel } from './acquire-request.js';
import { toCallStatus } from './error-status.js';
import type { Caller, Gate } from '../security/gate.js';

type UnaryRpcs = Pick<
  LockServiceServer,
  'describeLock' | 'listLocks' | 'checkToken' | 'revokeLock' | 'watchLock'
>;

/**
 * The unary RPCs: DescribeLock, ListLocks, CheckToken (the inspector) and RevokeLock (the engine),
 * and the WatchLock stream. Each admits its caller through the gate before it reads anything.
 */
export function createUnaryHandlers(
  {
    inspector,
    engine,
    shutdown,
    gate,
  }: { inspector: LockInspector; engine: LockEngine; shutdown: AbortSignal; gate: Gate },
  logger: Logger,
): UnaryRpcs {
  return {
    revokeLock: unary(logger, gate, async ({ name, reason, forceAfter }, caller) => {
      caller.checkRevoke(name);
      validateLabel('reason', reason);
      const forceAfterMs = forceAfter === undefined ? undefined : durationToMs(forceAfter, 'force_after');
      const holdersAsked = await engine.revoke(name, reason, forceAfterMs);
      // Who revoked what is an operator's first question afterwards.
      logger.info(
        { lock: name, caller: caller.name, reason, forceAfterMs, holdersAsked },
        'revocation asked',
      );
      return { holdersAsked };
    }),
    describeLock: unary(logger, gate, async ({ name }, caller) => {
      caller.checkSee(name);
      return toWireDescription(await inspector.describe(name));
    }),
    watchLock: serverStream(logger, shutdown, async (call: WatchCall, signal) => {
      gate.admit(call).checkSee(call.request.name);
      await inspector.watch(call.request.name, signal, (state) =>
        writeDrained(call, { state: toWireDescription(state) }, signal),
      );
    }),
    listLocks: unary(logger, gate, async (request, caller) => {
      const page = await inspector.list({ ...request, visible: (name) => caller.maySee(name) });
      return {
        locks: page.locks.map((lock) => ({ ...lock, heldMode: toWireMode(lock.heldMode) })),
        nextPageToken: page.nextPageToken,
      };
    }),
    checkToken: unary(logger, gate, async ({ name, fencingToken }, caller) => {
      caller.checkSee(name);
      return { held: await inspector.isHeld(name, fencingToken) };
    }),
  };
}

function toWireDescription(description: LockDescription): DescribeLockResponse {
  return {
    name: description.name,
    holders: description.holders.map(toWireInfo),
    waiters: description.waiters.map(toWireInfo),
    limit: description.limit,
    usedWeight: description.usedWeight,
  };
}

function toWireInfo(info: LockRequestInfo): WireLockRequestInfo {
  const { value } = info;
  return {
    ...info,
    mode: toWireMode(info.mode),
    value: Buffer.from(value.buffer, value.byteOffset, value.byteLength),
  };
}

type WatchCall = ServerWritableStream<WatchLockRequest, WatchLockResponse>;

/**
 * A server-streaming handler from an async function that writes until `signal` aborts: when the
 * client cancels, or the server shuts down (the call then ends with UNAVAILABLE). A failure
 * becomes the call's status, as in Acquire.
 */
export function serverStream<Request, Response>(
  logger: Logger,
  shutdown: AbortSignal,
  work: (call: ServerWritableStream<Request, Response>, signal: AbortSignal) => Promise<void>,
): (call: ServerWritableStream<Request, Response>) => void {
  return (call) => {
    const stop = new AbortController();
    call.once('cancelled', () => stop.abort());
    const unlinkShutdown = onAbort(shutdown, () => {
      stop.abort();
      call.emit('error', { code: status.UNAVAILABLE, details: 'the lockstream server is shutting down' });
    });
    work(call, stop.signal)
      .catch((error: unknown) => {
        stop.abort();
        if (!call.cancelled)
          call.emit('error', toCallStatus(error, logger.child({ method: call.getPath() })));
      })
      .finally(unlinkShutdown);
  };
}

/** A unary handler from an async function, for an admitted caller; failures become statuses as in Acquire. */
export function unary<Request, Response>(
  logger: Logger,
  gate: Gate,
  work: (request: Request, caller: Caller) => Promise<Response>,
): (call: ServerUnaryCall<Request, Response>, callback: sendUnaryData<Response>) => void {
  return (call, callback) => {
    Promise.resolve()
      .then(() => work(call.request, gate.admit(call)))
      .then(
        (response) => callback(null, response),
        (error: unknown) => {
          const status = toCallStatus(error, logger.child({ method: call.getPath() }));
          callback({ ...status, name: 'LockError', message: status.details });
        },
      );
  };
}
