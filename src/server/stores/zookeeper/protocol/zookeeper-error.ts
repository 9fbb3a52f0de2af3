/* The protocol client's errors: a ZooKeeper error code with its operation and path. */
import { ErrorCode } from './records.js';

/**
 * A ZooKeeper error code (`ErrorCode`), with the operation and path it answered; for a failed
 * multi, the index of the operation that failed (`failedOp`).
 */
export class ZooKeeperError extends Error {
  override readonly name: string = 'ZooKeeperError';

  constructor(
    readonly code: number,
    message: string,
    readonly failedOp?: number,
  ) {
    super(message);
  }
}

/**
 * The server does not know `operation`: it is older than the version that brought it (`since`),
 * as ZooKeeper 3.5 is for addWatch. Such a server answers UNIMPLEMENTED and closes the
 * connection (3.5's UnimplementedRequestProcessor); the session lives on, and the connection
 * dials again with it. A caller can fall back to what older servers offer.
 */
export class UnsupportedOperationError extends ZooKeeperError {
  override readonly name: string = 'UnsupportedOperationError';

  constructor(
    readonly operation: string,
    readonly since: string,
    what: string,
  ) {
    super(
      ErrorCode.unimplemented,
      `${what}: this ZooKeeper server does not implement ${operation} (ZooKeeper ${since} or newer does)`,
    );
  }
}

const ERROR_NAMES = new Map<number, string>(Object.entries(ErrorCode).map(([name, code]) => [code, name]));

/** `NONODE (-101)`-style name of a ZooKeeper error code, for messages. */
export function errorName(code: number): string {
  return `${ERROR_NAMES.get(code) ?? 'error'} (${code})`;
}
