/*
 * The lockstream-fencing-token header: the one text form of a lock's fencing token that calls
 * carry to the resources they write to, made and parsed here and nowhere else.
 */
import { MalformedFencingTokenError } from './errors.js';

/** The header (gRPC metadata key, HTTP header name) that carries a fenced call's token. */
export const FENCING_HEADER = 'lockstream-fencing-token';

/** Tokens are the server's `uint64`s: at most 2^64 - 1. */
const MAX_TOKEN = (1n << 64n) - 1n;

/** A lock's name and fencing token, as a fenced call carries them. */
export interface Fence {
  readonly name: string;
  readonly token: bigint;
}

/**
 * What the helpers take: a held `Lock` (its `name` and `token`), a `Leadership` (its `name` and
 * `term`), or any `{ name, token }`, such as one entry of a multi-lock's `tokens`.
 */
export type FencingHolder =
  | {
      readonly name: string;
      readonly token: bigint;
      readonly tokens?: ReadonlyArray<{ readonly name: string; readonly token: bigint }>;
    }
  | { readonly name: string; readonly term: bigint };

/**
 * The name and token of `holder`. Throws a TypeError for a multi-lock (`acquireAll`): its `name`
 * is every name joined, so pass the one of its `tokens` that guards the resource.
 */
export function fenceOf(holder: FencingHolder): Fence {
  const token = 'token' in holder ? holder.token : holder.term;
  if ('tokens' in holder && holder.tokens !== undefined && holder.tokens.length > 1) {
    throw new TypeError(
      `lock ${JSON.stringify(holder.name)} is a multi-lock with ${holder.tokens.length} tokens: ` +
        'fence each resource with the entry of lock.tokens for the lock that guards it',
    );
  }
  if (typeof holder.name !== 'string' || holder.name === '') {
    throw new TypeError('a fenced lock needs a non-empty name');
  }
  if (typeof token !== 'bigint' || token < 0n || token > MAX_TOKEN) {
    throw new TypeError(`fencing token ${String(token)} is not a uint64 bigint`);
  }
  return { name: holder.name, token };
}

/**
 * The header value for `holder`: `<lock name, percent-encoded as encodeURIComponent does>:<token
 * in decimal>`, e.g. `orders%2F42:7205759403792793601`. Every character of the value is
 * printable ASCII, as gRPC metadata and HTTP headers want.
 */
export function formatFencingToken(holder: FencingHolder): string {
  const { name, token } = fenceOf(holder);
  let encoded: string;
  try {
    encoded = encodeURIComponent(name);
  } catch {
    throw new TypeError(`lock name ${JSON.stringify(name)} is not valid Unicode (a lone surrogate)`);
  }
  return `${encoded}:${token}`;
}

/**
 * The lock name and token in a header value. Split at the last ':' (encoders that leave ':'
 * alone, such as Go's url.PathEscape, work too); the name is percent-decoded as UTF-8, with '+'
 * a plus sign. Throws MalformedFencingTokenError saying exactly what is wrong.
 */
export function parseFencingToken(value: string): Fence {
  const fail = (reason: string): never => {
    throw new MalformedFencingTokenError(value, reason);
  };
  const colon = value.lastIndexOf(':');
  if (colon === -1)
    fail("no ':' between the lock name and the token (<percent-encoded name>:<decimal token>)");
  const encoded = value.slice(0, colon);
  const digits = value.slice(colon + 1);
  if (encoded === '') fail("the lock name before the last ':' is empty");
  const raw = /[^\x21-\x7e]/.exec(encoded);
  if (raw !== null) {
    const code = raw[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0');
    fail(`the lock name has U+${code} unencoded (percent-encode the name as UTF-8)`);
  }
  let name = '';
  try {
    name = decodeURIComponent(encoded);
  } catch {
    fail(`the lock name ${JSON.stringify(encoded)} is not percent-encoded UTF-8`);
  }
  if (digits === '') fail("the token after the last ':' is empty");
  if (!/^[0-9]+$/.test(digits)) fail(`the token ${JSON.stringify(digits)} is not a decimal integer`);
  // Leading zeros are harmless; 21 or more significant digits are above 2^64 - 1 anyway.
  const significant = digits.replace(/^0+(?=.)/, '');
  const token = significant.length > 20 ? MAX_TOKEN + 1n : BigInt(significant);
  if (token > MAX_TOKEN) fail(`the token ${digits} is above 2^64 - 1`);
  return { name, token };
}

/**
 * The fence carried by a call whose `lockstream-fencing-token` header has `values` (none: no
 * fence, `undefined`). More than one value is malformed: a call writes under one lock.
 */
export function fenceFromValues(values: readonly string[]): Fence | undefined {
  if (values.length === 0) return undefined;
  if (values.length > 1) {
    throw new MalformedFencingTokenError(
      values.join(', '),
      `${values.length} values; a call carries exactly one`,
    );
  }
  return parseFencingToken(values[0]!);
}
