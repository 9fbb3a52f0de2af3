import type { sendUnaryData, ServerUnaryCall } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type {
  DescribeLockResponse,
  LockRequestInfo as WireLockRequestInfo,
  LockServiceServer,
} from '../../gen/lockstream/v1/lockstream.js';
import type { LockEngine } from '../engine/lock-engine.js';
import type { LockInspector, LockRequestInfo } from '../engine/lock-inspector.js';
import { durationToMs, toWireMode, validateLabel } from './acquire-request.js';
import { toCallStatus } from './error-status.js';

type UnaryRpcs = Pick<LockServiceServer, 'describeLock' | 'listLocks' | 'checkToken' | 'revokeLock'>;

/** The unary RPCs: DescribeLock, ListLocks, CheckToken (the inspector) and RevokeLock (the engine). */
export function createUnaryHandlers(
  { inspector, engine }: { inspector: LockInspector; engine: LockEngine },
  logger: Logger,
): UnaryRpcs {
  return {
    revokeLock: unary(logger, async ({ name, reason, forceAfter }) => {
      validateLabel('reason', reason);
      const forceAfterMs = forceAfter === undefined ? undefined : durationToMs(forceAfter, 'force_after');
      return { holdersAsked: await engine.revoke(name, reason, forceAfterMs) };
    }),
    describeLock: unary(logger, async ({ name }): Promise<DescribeLockResponse> => {
      const description = await inspector.describe(name);
      return {
        name: description.name,
        holders: description.holders.map(toWireInfo),
        waiters: description.waiters.map(toWireInfo),
      };
    }),
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
