/*
 * How a lock request ended, and the error each of its waiters is given for it: the caller
 * still waiting for the grant, the holder, a release, a holder's asks.
 */
import { status as Status } from '@grpc/grpc-js';
import {
  acquireFailure,
  LockClientClosedError,
  LockClientError,
  lossFailure,
  type LockLostError,
} from './errors.js';
import type { EndStatus } from './session-call.js';

/**
 * How a request ended: its status (the stream's, when the stream ended with it). `unknown`: the
 * server no longer had it after a resume (its end was lost in the break). `clientClosed`: its
 * LockClient was closed.
 */
export type RequestOutcome = EndStatus & { readonly unknown?: boolean; readonly clientClosed?: boolean };

/** The LockClient was closed (the request was given up on the stream). */
export const CLIENT_CLOSED: RequestOutcome = {
  code: Status.CANCELLED,
  details: 'the LockClient was closed',
  clientClosed: true,
};

/** Let go before a break, and gone after the resume: the server did what was asked. */
export const LET_GO: RequestOutcome = { code: Status.OK, details: '' };

/** Neither waiting nor let go, and gone after the resume: its end was lost in the break. */
export const UNKNOWN_AFTER_RESUME: RequestOutcome = {
  code: Status.NOT_FOUND,
  details: 'the server no longer has this request after its stream was resumed',
  unknown: true,
};

const UNEXPECTED_END = { code: Status.UNKNOWN, details: 'the server ended the request without a release' };

/** Why the acquire of `lockName` failed, ended with `outcome` before its grant. */
export function acquireEnded(lockName: string, outcome: RequestOutcome): LockClientError {
  if (outcome.clientClosed) return new LockClientClosedError(lockName);
  // A request the server no longer has lost its place: retryable, like a refused call.
  return acquireFailure(
    lockName,
    outcome.unknown
      ? { code: Status.UNAVAILABLE, details: `lost its place in the queue: ${outcome.details}` }
      : outcome,
  );
}

/** The loss of a lock held, not being released, whose request ended with `outcome`. */
export function holdEnded(lockName: string, outcome: RequestOutcome): LockLostError {
  return lossFailure(lockName, outcome.code === Status.OK ? UNEXPECTED_END : outcome);
}

/** Why a holder's asks not yet acknowledged failed, the request having ended with `outcome`. */
export function asksEnded(lockName: string, outcome: RequestOutcome): LockClientError {
  return outcome.code === Status.OK
    ? new LockClientError(lockName, Status.FAILED_PRECONDITION, 'the lock was released first')
    : lossFailure(lockName, outcome);
}
