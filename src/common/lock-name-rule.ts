/*
 * The rule for a valid lock name (and a guarded record's key, which follows it), shared by the
 * server and the SDK: what is wrong with one, in the words both report.
 */
import { LOCK_NAME_MAX_BYTES, RECORD_KEY_MAX_BYTES } from './limits.js';

// C0 and C1 controls and DEL, lone surrogates, and U+FFFD (what invalid UTF-8 decodes to).
const FORBIDDEN = /[\p{Cc}\p{Cs}\uFFFD]/u;

/**
 * What is wrong with a lock name, or undefined if nothing: any UTF-8 string of 1 to LOCK_NAME_MAX_BYTES
 * without control characters is a valid name. The server's rule, which the SDK checks before it
 * sends, in the same words.
 */
export function lockNameProblem(name: string): string | undefined {
  return textProblem('name', name, LOCK_NAME_MAX_BYTES);
}

/** What is wrong with a guarded record's key, or undefined: a lock name's rule, to RECORD_KEY_MAX_BYTES. */
export function recordKeyProblem(key: string): string | undefined {
  return textProblem('key', key, RECORD_KEY_MAX_BYTES);
}

function textProblem(what: string, text: string, maxBytes: number): string | undefined {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes === 0) return `${what} is empty`;
  if (bytes > maxBytes) return `${what} is ${bytes} bytes of UTF-8; the limit is ${maxBytes}`;
  const bad = FORBIDDEN.exec(text);
  if (!bad) return undefined;
  const codePoint = bad[0].codePointAt(0) ?? 0;
  const hex = codePoint.toString(16).toUpperCase().padStart(4, '0');
  const found =
    codePoint === 0xfffd
      ? 'invalid UTF-8 (U+FFFD)'
      : codePoint >= 0xd800 && codePoint <= 0xdfff
        ? `lone surrogate U+${hex}`
        : `control character U+${hex}`;
  return `${what} contains ${found} at index ${bad.index}`;
}
