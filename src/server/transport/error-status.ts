/*
 * Errors turned into gRPC statuses: a LockError keeps its code and message, anything else is logged
 * and reported as INTERNAL.
 */
import { status, type StatusObject } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { LockError, type LockErrorCode } from '../lock-error.js';

const STATUS_BY_CODE: Record<LockErrorCode, status> = {
  UNAUTHENTICATED: status.UNAUTHENTICATED,
  PERMISSION_DENIED: status.PERMISSION_DENIED,
  INVALID_ARGUMENT: status.INVALID_ARGUMENT,
  TIMEOUT: status.DEADLINE_EXCEEDED,
  CANCELLED: status.CANCELLED,
  LOCK_LOST: status.ABORTED,
  UNAVAILABLE: status.UNAVAILABLE,
  SHUTTING_DOWN: status.UNAVAILABLE,
  NOT_HELD: status.FAILED_PRECONDITION,
  KEPT_FOR_GRACE: status.FAILED_PRECONDITION,
  NOT_FOUND: status.NOT_FOUND,
  RESOURCE_EXHAUSTED: status.RESOURCE_EXHAUSTED,
  MISMATCHED_REQUEST: status.FAILED_PRECONDITION,
  REVISION_MISMATCH: status.ABORTED,
  UNSUPPORTED: status.UNIMPLEMENTED,
};

export type CallStatus = Pick<StatusObject, 'code' | 'details'>;

/**
 * The one place where errors become gRPC statuses. Expected failures (`LockError`) keep their
 * message, which is written for the client; anything else is a fault: logged in full, and
 * reported as INTERNAL with a fixed message that reveals nothing of the server.
 */
export function toCallStatus(error: unknown, logger: Logger): CallStatus {
  if (error instanceof LockError) {
    return { code: STATUS_BY_CODE[error.code], details: error.message };
  }
  logger.error({ err: error }, 'unexpected failure in a call');
  return { code: status.INTERNAL, details: 'internal error; see the lockstream server log' };
}
