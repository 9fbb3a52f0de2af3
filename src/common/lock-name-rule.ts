/*
 * The rule for a valid lock name, shared by the server and the SDK: what is wrong with a name, in
 * the words both report.
 */
import { LOCK_NAME_MAX_BYTES } from './limits.js';

// C0 and C1 controls and DEL, lone surrogates, and U+FFFD (what invalid UTF-8 decodes to).
const FORBIDDEN = /[\p{Cc}\p{Cs}\uFFFD]/u;

/**
 * What is wrong with a lock name, or undefined if nothing: any UTF-8 string of 1 to LOCK_NAME_MAX_BYTES
 * without control characters is a valid name. The server's rule, which the SDK checks before it
 * sends, in the same words.
 */
export function lockNameProblem(name: string): string | undefined {
  const bytes = Buffer.byteLength(name, 'utf8');
  if (bytes === 0) return 'name is empty';
  if (bytes > LOCK_NAME_MAX_BYTES)
    return `name is ${bytes} bytes of UTF-8; the limit is ${LOCK_NAME_MAX_BYTES}`;
  const bad = FORBIDDEN.exec(name);
  if (!bad) return undefined;
  const codePoint = bad[0].codePointAt(0) ?? 0;
  const hex = codePoint.toString(16).toUpperCase().padStart(4, '0');
  const what =
    codePoint === 0xfffd
      ? 'invalid UTF-8 (U+FFFD)'
      : codePoint >= 0xd800 && codePoint <= 0xdfff
        ? `lone surrogate U+${hex}`
        : `control character U+${hex}`;
  return `name contains ${what} at index ${bad.index}`;
}
