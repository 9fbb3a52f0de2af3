/*
 * Why a resource refused a fenced call: the one error class of lockstream/fencing and its kinds.
 */

/** What went wrong: a header that does not parse, no header, an old token, another lock's token. */
export type FencingErrorCode = 'MALFORMED' | 'MISSING' | 'STALE' | 'LOCK_MISMATCH';

/** The base of every error lockstream/fencing throws on purpose; `code` says which kind. */
export class FencingError extends Error {
  override name = 'FencingError';
  constructor(
    readonly code: FencingErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** A `lockstream-fencing-token` value that does not parse; `value` is the text as received. */
export class MalformedFencingTokenError extends FencingError {
  override name = 'MalformedFencingTokenError';
  constructor(
    readonly value: string,
    readonly reason: string,
  ) {
    super('MALFORMED', `malformed lockstream-fencing-token ${JSON.stringify(value)}: ${reason}`);
  }
}

/** A call without a `lockstream-fencing-token` to a resource that wants one. */
export class MissingFencingTokenError extends FencingError {
  override name = 'MissingFencingTokenError';
  constructor(what: string) {
    super('MISSING', `${what} carries no lockstream-fencing-token; this resource takes fenced calls only`);
  }
}

/**
 * The token is below the resource's high-water mark: a later holder of the lock has written
 * already, so this holder has lost the lock (whether it knows yet or not). Nothing was written.
 */
export class StaleTokenError extends FencingError {
  override name = 'StaleTokenError';
  constructor(
    readonly resource: string,
    readonly lockName: string,
    readonly token: bigint,
    readonly mark: bigint,
  ) {
    super(
      'STALE',
      `stale fencing token for resource ${JSON.stringify(resource)}: lock ${JSON.stringify(lockName)} ` +
        `token ${token} is below the resource's high-water mark ${mark}`,
    );
  }
}

/**
 * The resource's mark was set by another lock. Two locks guarding one resource exclude nobody,
 * so this is a configuration error, not a race: every writer of a resource must use one lock.
 * (To move a resource to another lock on purpose, delete its mark.)
 */
export class FencingLockMismatchError extends FencingError {
  override name = 'FencingLockMismatchError';
  constructor(
    readonly resource: string,
    readonly lockName: string,
    readonly token: bigint,
    readonly markLockName: string,
    readonly mark: bigint,
  ) {
    super(
      'LOCK_MISMATCH',
      `resource ${JSON.stringify(resource)} is fenced by lock ${JSON.stringify(markLockName)} ` +
        `(high-water mark ${mark}), not by lock ${JSON.stringify(lockName)} (token ${token})`,
    );
  }
}
