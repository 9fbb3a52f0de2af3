import { describe, expect, it } from 'vitest';
import {
  FENCING_HEADER,
  FencingLockMismatchError,
  HighWaterMarks,
  MalformedFencingTokenError,
  StaleTokenError,
  fenceOf,
  fencingHeaders,
  fencingMetadata,
  formatFencingToken,
  parseFencingToken,
} from '../../src/fencing/index.js';
import { fenceFromMetadata } from '../../src/fencing/grpc-server.js';
import { Metadata } from '@grpc/grpc-js';
import { readFileSync } from 'node:fs';

/** The pure parts of lockstream/fencing: the header's text form and the high-water mark rule. */

const MAX = (1n << 64n) - 1n;

/** The values every client makes of the same names and tokens (the Go and Python clients test these too). */
const shared = JSON.parse(
  readFileSync(new URL('../fixtures/fencing-headers.json', import.meta.url), 'utf8'),
) as {
  header: string;
  cases: Array<{ name: string; token: string; value: string }>;
};

describe('the lockstream-fencing-token header', () => {
  it.each([
    ['orders/42', 7n, 'orders%2F42:7'],
    ['a:b:c', 12n, 'a%3Ab%3Ac:12'],
    ['größe/Ω', 1n, 'gr%C3%B6%C3%9Fe%2F%CE%A9:1'],
    ['🔒 lock', MAX, `%F0%9F%94%92%20lock:${MAX}`],
    ['100%', 0n, '100%25:0'],
  ])('formats %j with token %s as %s and parses it back', (name, token, value) => {
    expect(formatFencingToken({ name, token })).toBe(value);
    expect(parseFencingToken(value)).toEqual({ name, token });
  });

  it.each(shared.cases)(
    'makes and parses the shared value of $name (test/fixtures/fencing-headers.json)',
    (c) => {
      expect(shared.header).toBe(FENCING_HEADER);
      expect(formatFencingToken({ name: c.name, token: BigInt(c.token) })).toBe(c.value);
      expect(parseFencingToken(c.value)).toEqual({ name: c.name, token: BigInt(c.token) });
    },
  );

  it('splits at the last colon, so encoders that leave ":" alone work too', () => {
    expect(parseFencingToken('jobs:nightly:report:99')).toEqual({ name: 'jobs:nightly:report', token: 99n });
    expect(parseFencingToken('a+b:5')).toEqual({ name: 'a+b', token: 5n });
    expect(parseFencingToken('orders/42:007')).toEqual({ name: 'orders/42', token: 7n });
  });

  it.each([
    ['', "no ':' between the lock name and the token"],
    ['orders%2F42', "no ':' between the lock name and the token"],
    [':5', "the lock name before the last ':' is empty"],
    ['orders:', "the token after the last ':' is empty"],
    ['orders:-5', 'the token "-5" is not a decimal integer'],
    ['orders:0x10', 'the token "0x10" is not a decimal integer'],
    ['orders: 5', 'the token " 5" is not a decimal integer'],
    ['orders:1.5', 'the token "1.5" is not a decimal integer'],
    [`orders:${MAX + 1n}`, `the token ${MAX + 1n} is above 2^64 - 1`],
    ['orders:123456789012345678901234567890', 'the token 123456789012345678901234567890 is above 2^64 - 1'],
    ['bad%zzname:5', 'the lock name "bad%zzname" is not percent-encoded UTF-8'],
    ['%C3:5', 'the lock name "%C3" is not percent-encoded UTF-8'],
    ['two words:5', 'the lock name has U+0020 unencoded (percent-encode the name as UTF-8)'],
    ['größe:5', 'the lock name has U+00F6 unencoded (percent-encode the name as UTF-8)'],
  ])('refuses %j: %s', (value, reason) => {
    let caught: unknown;
    try {
      parseFencingToken(value);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(MalformedFencingTokenError);
    const error = caught as MalformedFencingTokenError;
    expect(error.code).toBe('MALFORMED');
    expect(error.value).toBe(value);
    expect(error.reason).toContain(reason);
    expect(error.message).toBe(
      `malformed lockstream-fencing-token ${JSON.stringify(value)}: ${error.reason}`,
    );
  });

  it('takes a Leadership (name and term) as well as a Lock (name and token)', () => {
    expect(formatFencingToken({ name: 'services/api/leader', term: 31n })).toBe('services%2Fapi%2Fleader:31');
    expect(fenceOf({ name: 'x', token: 3n, tokens: [{ name: 'x', token: 3n }] })).toEqual({
      name: 'x',
      token: 3n,
    });
  });

  it('refuses a multi-lock, a token outside uint64 and a name that is not Unicode, before any call', () => {
    const multi = {
      name: 'accounts/17 + accounts/42',
      token: 5n,
      tokens: [
        { name: 'accounts/17', token: 5n },
        { name: 'accounts/42', token: 6n },
      ],
    };
    expect(() => formatFencingToken(multi)).toThrow(/multi-lock with 2 tokens: fence each resource/);
    expect(formatFencingToken(multi.tokens[1]!)).toBe('accounts%2F42:6');
    expect(() => formatFencingToken({ name: 'x', token: -1n })).toThrow(TypeError);
    expect(() => formatFencingToken({ name: 'x', token: MAX + 1n })).toThrow(TypeError);
    expect(() => formatFencingToken({ name: '', token: 1n })).toThrow(TypeError);
    expect(() => formatFencingToken({ name: 'bad\ud800', token: 1n })).toThrow(/lone surrogate/);
  });

  it('is the same value in gRPC metadata and in HTTP headers', () => {
    const lock = { name: 'orders/42', token: 9n };
    const metadata = fencingMetadata(lock);
    expect(metadata.get(FENCING_HEADER)).toEqual(['orders%2F42:9']);
    expect(fenceFromMetadata(metadata)).toEqual(lock);
    expect(fencingHeaders(lock)).toEqual({ 'lockstream-fencing-token': 'orders%2F42:9' });
    // Setting it again replaces it: one call, one lock.
    fencingMetadata({ name: 'orders/42', token: 10n }, metadata);
    expect(metadata.get(FENCING_HEADER)).toEqual(['orders%2F42:10']);
  });

  it('reads no fence from metadata without the header, and refuses two values', () => {
    expect(fenceFromMetadata(new Metadata())).toBeUndefined();
    const twice = new Metadata();
    twice.add(FENCING_HEADER, 'a:1');
    twice.add(FENCING_HEADER, 'a:2');
    expect(() => fenceFromMetadata(twice)).toThrow(
      'malformed lockstream-fencing-token "a:1, a:2": 2 values; a call carries exactly one',
    );
  });
});

describe('HighWaterMarks', () => {
  it('admits equal and higher tokens, raising the mark, and refuses lower ones with the mark', async () => {
    const marks = new HighWaterMarks();
    await marks.admit('orders', { name: 'orders', token: 5n });
    await marks.admit('orders', { name: 'orders', token: 5n });
    await marks.admit('orders', { name: 'orders', token: 8n });
    expect(await marks.mark('orders')).toEqual({ lockName: 'orders', token: 8n });
    const refused = marks.admit('orders', { name: 'orders', token: 7n });
    await expect(refused).rejects.toBeInstanceOf(StaleTokenError);
    await expect(refused).rejects.toMatchObject({
      resource: 'orders',
      lockName: 'orders',
      token: 7n,
      mark: 8n,
    });
    await expect(refused).rejects.toThrow(
      'stale fencing token for resource "orders": lock "orders" token 7 is below the resource\'s high-water mark 8',
    );
    expect(await marks.mark('orders')).toEqual({ lockName: 'orders', token: 8n });
  });

  it('keeps one mark per resource, and refuses another lock on a fenced resource', async () => {
    const marks = new HighWaterMarks();
    await marks.admit('ledger', { name: 'ledger-lock', token: 100n });
    await marks.admit('cache', { name: 'cache-lock', token: 3n });
    const other = marks.admit('ledger', { name: 'other-lock', token: 200n });
    await expect(other).rejects.toBeInstanceOf(FencingLockMismatchError);
    await expect(other).rejects.toThrow(
      'resource "ledger" is fenced by lock "ledger-lock" (high-water mark 100), not by lock "other-lock" (token 200)',
    );
    expect(await marks.mark('ledger')).toEqual({ lockName: 'ledger-lock', token: 100n });
    expect(await marks.mark('cache')).toEqual({ lockName: 'cache-lock', token: 3n });
    expect(await marks.mark('never')).toBeUndefined();
  });
});
