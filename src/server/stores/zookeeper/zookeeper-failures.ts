/* How ZooKeeper's return codes become the store's errors, and which ones mean a lost connection. */
import { LockError } from '../../lock-error.js';
import { ErrorCode } from './protocol/records.js';
import { errorName } from './protocol/zookeeper-error.js';

/** Attempts per operation across connection losses (each one waits for the reconnection). */
export const MAX_ATTEMPTS = 5;

/** The request may or may not have been applied: the connection went before its reply came. */
export function isConnectionLoss(rc: number): boolean {
  return rc === ErrorCode.connectionLoss || rc === ErrorCode.operationTimeout;
}

export function unavailable(operation: string, rc: number): LockError {
  return new LockError('UNAVAILABLE', `ZooKeeper ${operation} failed (${errorName(rc)})`);
}

/** A create under `path` that failed with `rc`: refused by the tree's ACL, or ZooKeeper unavailable. */
export function createFailure(path: string, rc: number): LockError {
  return rc === ErrorCode.noAuth || rc === ErrorCode.invalidAcl
    ? protectionFailure(path, rc)
    : unavailable(`create under ${path}`, rc);
}

export function protectionFailure(path: string, rc: number): LockError {
  return new LockError(
    'UNAVAILABLE',
    rc === ErrorCode.noAuth
      ? `ZooKeeper node ${path} belongs to other credentials (NOAUTH): check the digest credentials, or pick another --root`
      : `ZooKeeper setACL on ${path} failed (code ${rc})`,
  );
}

/** For what needs ZooKeeper's multi on a link without it (the addon). */
export function multiUnsupported(what: string): LockError {
  return new LockError(
    'UNSUPPORTED',
    `this needs ZooKeeper multi (${what}), which the zookeeper addon client does not offer: run lockstream with --zookeeper-client protocol, the default`,
  );
}
