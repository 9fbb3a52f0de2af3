/*
 * The one error for expected failures (LockError) and its closed set of codes: the engine and the
 * stores throw it, and the transport turns it into a gRPC status.
 */
/** Every expected failure of a request, as a closed set of domain codes. */
export type LockErrorCode =
  | 'UNAUTHENTICATED'
  | 'PERMISSION_DENIED'
  | 'INVALID_ARGUMENT'
  | 'TIMEOUT'
  | 'CANCELLED'
  | 'LOCK_LOST'
  | 'UNAVAILABLE'
  | 'SHUTTING_DOWN'
  | 'NOT_HELD'
  | 'KEPT_FOR_GRACE'
  | 'NOT_FOUND'
  | 'RESOURCE_EXHAUSTED'
  /** The request disagrees with the requests queued for its lock (a semaphore's limit, or lock against semaphore). */
  | 'MISMATCHED_REQUEST'
  /** A write conditioned on a record's revision found another (see RecordService). */
  | 'REVISION_MISMATCH'
  /** The back end (or the client it runs on) cannot do what was asked. */
  | 'UNSUPPORTED';

/**
 * The one error class the engine and stores throw for expected outcomes. The message is meant
 * for the client (it names the lock and the reason); `cause` keeps the underlying error for logs.
 */
export class LockError extends Error {
  override readonly name = 'LockError';

  constructor(
    readonly code: LockErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export function isLockError(error: unknown, code?: LockErrorCode): error is LockError {
  return error instanceof LockError && (code === undefined || error.code === code);
}
