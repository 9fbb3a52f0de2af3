import { ErrorCode } from './records.js';

/**
 * A ZooKeeper error code (`ErrorCode`), with the operation and path it answered; for a failed
 * multi, the index of the operation that failed (`failedOp`).
 */
export class ZooKeeperError extends Error {
  override readonly name = 'ZooKeeperError';

  constructor(
    readonly code: number,
    message: string,
    readonly failedOp?: number,
  ) {
    super(message);
  }
}

const ERROR_NAMES = new Map<number, string>(Object.entries(ErrorCode).map(([name, code]) => [code, name]));

/** `NONODE (-101)`-style name of a ZooKeeper error code, for messages. */
export function errorName(code: number): string {
  return `${ERROR_NAMES.get(code) ?? 'error'} (${code})`;
}
