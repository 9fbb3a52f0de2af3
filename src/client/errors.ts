/*
 * The errors the SDK rejects with, and which one a failed acquire or a lost lock gets for the
 * status it ended with.
 */
import { status as Status, type StatusObject } from '@grpc/grpc-js';

/**
 * A lock call failed with a gRPC status. `code` is the status (e.g. `Status.INVALID_ARGUMENT`),
 * `details` the server's message, which names the lock and the problem.
 */
export class LockClientError extends Error {
  override name = 'LockClientError';
  /** The gRPC status code. */
  readonly code: Status;
  /** The server's message (or the client's, for failures seen only on this side). */
  readonly details: string;
  /** The lock the call was about; '' for a call about no one lock (ListLocks). */
  readonly lockName: string;

  constructor(lockName: string, code: Status, details: string, options?: { cause?: unknown }) {
    // The server's messages already name the lock; say it only where they do not.
    const about =
      lockName === '' || details.includes(`"${lockName}"`)
        ? details
        : `lock ${quotedName(lockName)}: ${details}`;
    super(`${Status[code] ?? code}: ${about}`, options);
    this.code = code;
    this.details = details;
    this.lockName = lockName;
  }
}

/** Characters of a lock name a message shows; a longer one is cut short (names may be 512 bytes). */
const NAME_SHOWN_MAX = 64;

/** A lock name as a message quotes it: control characters escaped, a long name cut short. */
function quotedName(name: string): string {
  const characters = [...name];
  const escape = (text: string): string =>
    text.replace(/\p{Cc}/gu, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  if (characters.length <= NAME_SHOWN_MAX) return `"${escape(name)}"`;
  return `"${escape(characters.slice(0, NAME_SHOWN_MAX).join(''))}…" (${Buffer.byteLength(name)} bytes)`;
}

/**
 * The lock was not granted within `waitTimeout` (for `tryAcquire` or a `waitTimeout` of 0: it was
 * not free). Nothing is left queued on the caller's behalf.
 */
export class LockTimeoutError extends LockClientError {
  override name = 'LockTimeoutError';
}

/**
 * A held lock was lost before it was released: the server reported it (its coordination session
 * expired) or the stream broke (server gone, connection dead). Someone else may hold the lock now:
 * stop the work it protects.
 */
export class LockLostError extends LockClientError {
  override name = 'LockLostError';
}

/**
 * The term named (by `proclaim`, `resign`, or a Leadership's `proclaim`) is not the current
 * leader's: it ended, belongs to another election, or was never granted. Nothing changed. Its
 * `code` is FAILED_PRECONDITION, as for any request about something the caller does not hold.
 */
export class NotLeaderError extends LockClientError {
  override name = 'NotLeaderError';
  /** The term that was named. */
  readonly term: bigint;

  constructor(electionName: string, term: bigint, details: string, options?: { cause?: unknown }) {
    super(electionName, Status.FAILED_PRECONDITION, details, options);
    this.term = term;
  }
}

/**
 * A guarded record's write (put, delete) named a fencing token that is not a current holder's
 * for the lock: its hold ended (released, lost, revoked), it is another lock's, never granted,
 * or a READ hold's. Nothing was written. Its `code` is FAILED_PRECONDITION.
 */
export class TokenNotHeldError extends LockClientError {
  override name = 'TokenNotHeldError';
  /** The token that was named. */
  readonly token: bigint;

  constructor(lockName: string, token: bigint, details: string, options?: { cause?: unknown }) {
    super(lockName, Status.FAILED_PRECONDITION, details, options);
    this.token = token;
  }
}

/**
 * A guarded record's write conditioned on a revision (`expectedRevision`) found the record at
 * another: someone wrote it since it was read. Nothing was written. Its `code` is ABORTED.
 */
export class RevisionConflictError extends LockClientError {
  override name = 'RevisionConflictError';
}

/**
 * The LockClient was closed: the call was made after `close()`, or the request was still
 * waiting for its lock when `close()` was called (it is withdrawn, nothing is left queued). Its
 * `code` is CANCELLED, as in the Go and Python clients (the client cancelled it). A lock held
 * when the client is closed is lost instead (`LockLostError`).
 */
export class LockClientClosedError extends LockClientError {
  override name = 'LockClientClosedError';

  constructor(lockName: string) {
    super(lockName, Status.CANCELLED, 'the LockClient was closed');
  }
}

/** The error for a call that ended with `status` before the lock was granted. */
export function acquireFailure(
  lockName: string,
  status: Pick<StatusObject, 'code' | 'details'>,
): LockClientError {
  if (status.code === Status.DEADLINE_EXCEEDED) {
    return new LockTimeoutError(lockName, status.code, status.details);
  }
  return new LockClientError(lockName, status.code, status.details);
}

/** The error for a held lock whose stream ended with `status` without our release. */
export function lossFailure(lockName: string, status: Pick<StatusObject, 'code' | 'details'>): LockLostError {
  const details =
    status.code === Status.ABORTED
      ? status.details
      : `the stream holding it ended (${status.details || Status[status.code]}); the lock must be assumed lost`;
  return new LockLostError(lockName, status.code, details);
}
