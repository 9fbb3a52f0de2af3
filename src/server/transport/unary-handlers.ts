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
import type { LockEngine } from '../engine/lock-engine.js';
import type { LockDescription, LockInspector, LockRequestInfo } from '../engine/lock-inspector.js';
import { durationToMs, toWireMode, validateLabel } from './acquire-request.js';
import { toCallStatus } from './error-status.js';

type UnaryRpcs = Pick<
  LockServiceServer,
  'describeLock' | 'listLocks' | 'checkToken' | 'revokeLock' | 'watchLock'
>;

/** The unary RPCs: DescribeLock, ListLocks, CheckToken (the inspector) and RevokeLock (the engine). */
export function createUnaryHandlers(
  { inspector, engine, shutdown }: { inspector: LockInspector; engine: LockEngine; shutdown: AbortSignal },
  logger: Logger,
): UnaryRpcs {
  return {
    revokeLock: unary(logger, async ({ name, reason, forceAfter }) => {
      validateLabel('reason', reason);
      const forceAfterMs = forceAfter === undefined ? undefined : durationToMs(forceAfter, 'force_after');
      return { holdersAsked: await engine.revoke(name, reason, forceAfterMs) };
    }),
    describeLock: unary(logger, async ({ name }) => toWireDescription(await inspector.describe(name))),
    watchLock: (call: ServerWritableStream<WatchLockRequest, WatchLockResponse>) => {
      const stop = new AbortController();
      call.once('cancelled', () => stop.abort());
      const unlinkShutdown = onAbort(shutdown, () => {
        stop.abort();
        call.emit('error', { code: status.UNAVAILABLE, details: 'the lockstream server is shutting down' });
      });
      inspector
        .watch(call.request.name, stop.signal, (state) =>
          writeDrained(call, { state: toWireDescription(state) }, stop.signal),
        )
        .catch((error: unknown) => {
          stop.abort();
          if (!call.cancelled)
            call.emit('error', toCallStatus(error, logger.child({ method: call.getPath() })));
        })
        .finally(unlinkShutdown);
    },
    listLocks: unary(logger, async (request) => {
      const page = await inspector.list(request);
      return {
        locks: page.locks.map((lock) => ({ ...lock, heldMode: toWireMode(lock.heldMode) })),
        nextPageToken: page.nextPageToken,
      };
    }),
    checkToken: unary(logger, async ({ name, fencingToken }) => ({
      held: await inspector.isHeld(name, fencingToken),
    })),
  };
}

function toWireDescription(description: LockDescription): DescribeLockResponse {
  return {
    name: description.name,
    holders: description.holders.map(toWireInfo),
    waiters: description.waiters.map(toWireInfo),
  };
}

function toWireInfo(info: LockRequestInfo): WireLockRequestInfo {
  return { ...info, mode: toWireMode(info.mode) };
}

/** A unary handler from an async function; failures become statuses as in Acquire. */
function unary<Request, Response>(
  logger: Logger,
  work: (request: Request) => Promise<Response>,
): (call: ServerUnaryCall<Request, Response>, callback: sendUnaryData<Response>) => void {
  return (call, callback) => {
    work(call.request).then(
      (response) => callback(null, response),
      (error: unknown) => {
        const status = toCallStatus(error, logger.child({ method: call.getPath() }));
        callback({ ...status, name: 'LockError', message: status.details });
      },
    );
  };
}
