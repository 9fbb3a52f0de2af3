import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../support/random.js';
import { isLockError, type LockError } from '../../src/server/lock-error.js';
import { decodeLockName, encodeLockName, validateLockName } from '../../src/server/engine/lock-nodes.js';

/** The error validateLockName throws for `name`, asserting that it is an INVALID_ARGUMENT LockError. */
function rejection(name: string): LockError {
  try {
    validateLockName(name);
  } catch (error) {
    expect(isLockError(error, 'INVALID_ARGUMENT')).toBe(true);
    return error as LockError;
  }
  throw new Error(`validateLockName accepted ${JSON.stringify(name)}`);
}

/** Random valid Unicode strings, heavy on the characters that need escaping. */
function randomName(random: () => number): string {
  const specials = [
    '/',
    '.',
    '..',
    '%',
    '%2F',
    ' ',
    '~',
    '*',
    "'",
    '(',
    ')',
    '!',
    '-',
    '_',
    '+',
    '?',
    '#',
    '&',
    '=',
    '\\',
    ':',
  ];
  const length = 1 + Math.floor(random() * 20);
  let name = '';
  for (let i = 0; i < length; i += 1) {
    const pick = random();
    let codePoint: number;
    if (pick < 0.3) {
      name += specials[Math.floor(random() * specials.length)]!;
      continue;
    } else if (pick < 0.6) codePoint = 0x20 + Math.floor(random() * (0x7f - 0x20));
    else if (pick < 0.7) codePoint = 0xa0 + Math.floor(random() * 0x60);
    else if (pick < 0.85) codePoint = 0x100 + Math.floor(random() * (0xd800 - 0x100));
    else if (pick < 0.9) codePoint = 0xe000 + Math.floor(random() * (0xfffd - 0xe000));
    else codePoint = 0x10000 + Math.floor(random() * (0x110000 - 0x10000));
    name += String.fromCodePoint(codePoint);
  }
  return name;
}

describe('validateLockName', () => {
  it('accepts ordinary names of 1 to 512 bytes', () => {
    for (const name of [
      'a',
      'jobs/nightly',
      'orders:42',
      '../etc/passwd',
      '.',
      ' spaced name ',
      'x'.repeat(512),
    ]) {
      expect(() => validateLockName(name), name).not.toThrow();
    }
  });

  it('accepts emoji and other multibyte names, up to exactly 512 bytes', () => {
    expect(() => validateLockName('🔒 lock ✓ Schlüssel 鍵')).not.toThrow();
    const emoji = '😀'.repeat(128); // 4 bytes each
    expect(Buffer.byteLength(emoji)).toBe(512);
    expect(() => validateLockName(emoji)).not.toThrow();
    const euros = `${'€'.repeat(170)}ab`; // 3 bytes each
    expect(Buffer.byteLength(euros)).toBe(512);
    expect(() => validateLockName(euros)).not.toThrow();
  });

  it('rejects the empty name', () => {
    expect(rejection('').message).toBe('invalid lock name: name is empty');
  });

  it('rejects 513 bytes, counting UTF-8 bytes rather than characters', () => {
    expect(rejection('x'.repeat(513)).message).toBe(
      'invalid lock name: name is 513 bytes of UTF-8; the limit is 512',
    );
    // 129 characters, 513 bytes.
    expect(rejection(`${'😀'.repeat(128)}a`).message).toBe(
      'invalid lock name: name is 513 bytes of UTF-8; the limit is 512',
    );
    expect(rejection('€'.repeat(171)).message).toBe(
      'invalid lock name: name is 513 bytes of UTF-8; the limit is 512',
    );
  });

  it('rejects C0 controls, DEL and C1 controls, naming the code point and where it is', () => {
    const cases: Array<[string, string]> = [
      ['\u0000', 'control character U+0000 at index 0'],
      ['a\tb', 'control character U+0009 at index 1'],
      ['ab\n', 'control character U+000A at index 2'],
      ['x\u001f', 'control character U+001F at index 1'],
      ['del\u007f', 'control character U+007F at index 3'],
      ['c1\u0080', 'control character U+0080 at index 2'],
      ['\u0085nel', 'control character U+0085 at index 0'],
      ['end\u009f', 'control character U+009F at index 3'],
    ];
    for (const [name, what] of cases) {
      expect(rejection(name).message, JSON.stringify(name)).toBe(`invalid lock name: name contains ${what}`);
    }
  });

  it('rejects U+FFFD, which is what invalid UTF-8 decodes to, saying so', () => {
    expect(rejection('bad\uFFFDname').message).toBe(
      'invalid lock name: name contains invalid UTF-8 (U+FFFD) at index 3',
    );
  });

  it('rejects lone surrogates, naming the code unit and where it is', () => {
    expect(rejection('a\uD800').message).toMatch(/U\+D800 at index 1$/);
    expect(rejection('\uDC00z').message).toMatch(/U\+DC00 at index 0$/);
    // A surrogate pair is one valid character, not two lone halves.
    expect(() => validateLockName('\uD83D\uDE00')).not.toThrow();
  });

  it('calls a lone surrogate a lone surrogate, not a control character', () => {
    expect(rejection('a\uD800').message).toBe(
      'invalid lock name: name contains lone surrogate U+D800 at index 1',
    );
  });

  it('checks the length before the characters', () => {
    expect(rejection(`\u0000${'x'.repeat(600)}`).message).toMatch(/bytes of UTF-8/);
  });
});

describe('encodeLockName', () => {
  const SAFE = /^[A-Za-z0-9_%-]+$/;

  it('keeps ASCII letters, digits, - and _ as they are', () => {
    expect(encodeLockName('Jobs-nightly_42')).toBe('Jobs-nightly_42');
  });

  it('escapes everything else, including the characters encodeURIComponent keeps', () => {
    expect(encodeLockName('a/b')).toBe('a%2Fb');
    expect(encodeLockName(".!~*'()")).toBe('%2E%21%7E%2A%27%28%29');
    expect(encodeLockName('é')).toBe('%C3%A9');
    expect(encodeLockName('a b')).toBe('a%20b');
  });

  it('never produces "." or "..", which ZooKeeper would read as path steps', () => {
    expect(encodeLockName('.')).toBe('%2E');
    expect(encodeLockName('..')).toBe('%2E%2E');
    expect(encodeLockName('../x')).toBe('%2E%2E%2Fx');
  });

  it('produces only letters, digits, -, _ and %, and round-trips, for many random names', () => {
    const random = mulberry32(0x10c4);
    for (let i = 0; i < 2000; i += 1) {
      const name = randomName(random);
      validateLockName(name);
      const encoded = encodeLockName(name);
      expect(encoded, JSON.stringify(name)).toMatch(SAFE);
      expect(encoded).not.toBe('.');
      expect(encoded).not.toBe('..');
      expect(decodeLockName(encoded)).toBe(name);
    }
  });

  it('round-trips the longest valid names', () => {
    for (const name of ['😀'.repeat(128), `${'€'.repeat(170)}ab`, '/'.repeat(512), '.'.repeat(512)]) {
      const encoded = encodeLockName(name);
      expect(encoded).toMatch(SAFE);
      expect(decodeLockName(encoded)).toBe(name);
    }
  });

  it('gives distinct names distinct encodings', () => {
    const pairs: Array<[string, string]> = [
      ['a/b', 'a%2Fb'],
      ['a%2Fb', 'a%252Fb'],
      ['.', '%2E'],
      ['A', 'a'],
      ['a b', 'a+b'],
      ['a b', 'a%20b'],
      ['é', 'e\u0301'],
    ];
    for (const [x, y] of pairs) expect(encodeLockName(x), `${x} vs ${y}`).not.toBe(encodeLockName(y));

    const random = mulberry32(0xd15c);
    const byEncoding = new Map<string, string>();
    for (let i = 0; i < 5000; i += 1) {
      const name = randomName(random);
      const encoded = encodeLockName(name);
      const earlier = byEncoding.get(encoded);
      if (earlier !== undefined) expect(earlier).toBe(name);
      byEncoding.set(encoded, name);
    }
  });
});
