import { lockNameProblem } from '../../common/lock-name-rule.js';
import { LockError } from '../lock-error.js';

/**
 * Checks a client-supplied lock name; throws `LockError('INVALID_ARGUMENT')` saying what is
 * wrong (see lockNameProblem).
 */
export function validateLockName(name: string): void {
  const problem = lockNameProblem(name);
  if (problem !== undefined) throw invalidName(problem);
}

function invalidName(reason: string): LockError {
  return new LockError('INVALID_ARGUMENT', `invalid lock name: ${reason}`);
}

/**
 * Maps a lock name to one znode name that cannot escape its parent: every character other than
 * ASCII letters, digits, `-` and `_` becomes %XX of its UTF-8 bytes, so `/`, `.`, `..`, spaces
 * and any Unicode are inert. Reversible with `decodeLockName`; distinct names never collide.
 */
export function encodeLockName(name: string): string {
  return encodeURIComponent(name).replace(
    /[.!~*'()]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

export function decodeLockName(encoded: string): string {
  return decodeURIComponent(encoded);
}
