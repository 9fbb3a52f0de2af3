import { LOCK_NAME_MAX_BYTES } from '../../common/limits.js';
import { LockError } from '../lock-error.js';

// C0 and C1 controls and DEL, lone surrogates, and U+FFFD (what invalid UTF-8 decodes to).
const FORBIDDEN = /[\p{Cc}\p{Cs}\uFFFD]/u;

/**
 * Checks a client-supplied lock name; throws `LockError('INVALID_ARGUMENT')` saying what is
 * wrong. Any UTF-8 string of 1 to 512 bytes without control characters is a valid name.
 */
export function validateLockName(name: string): void {
  const bytes = Buffer.byteLength(name, 'utf8');
  if (bytes === 0) throw invalidName('name is empty');
  if (bytes > LOCK_NAME_MAX_BYTES) {
    throw invalidName(`name is ${bytes} bytes of UTF-8; the limit is ${LOCK_NAME_MAX_BYTES}`);
  }
  const bad = FORBIDDEN.exec(name);
  if (bad) {
    const codePoint = bad[0].codePointAt(0) ?? 0;
    const hex = codePoint.toString(16).toUpperCase().padStart(4, '0');
    const what =
      codePoint === 0xfffd
        ? 'invalid UTF-8 (U+FFFD)'
        : codePoint >= 0xd800 && codePoint <= 0xdfff
          ? `lone surrogate U+${hex}`
          : `control character U+${hex}`;
    throw invalidName(`name contains ${what} at index ${bad.index}`);
  }
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
