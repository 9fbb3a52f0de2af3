import { describe, expect, it } from 'vitest';
import {
  checkedClaim,
  plainToken,
  provenToken,
  ProvenTokens,
  tokenIssuer,
} from '../../src/server/engine/resume-token.js';
import { SessionOwnership, vouchedBy } from '../../src/server/stores/zookeeper/session-ownership.js';
import {
  encodeRecord,
  newRecord,
  parseRecord,
  type SessionRecord,
} from '../../src/server/stores/zookeeper/session-record.js';

/*
 * A token issued on a store session that can move proves, against the session's published
 * record, the session, RPC and caller it was issued for: another instance checks that before
 * it takes the session over. The record holds only the public key: it checks proofs, it cannot
 * make them.
 */

const NAME = '0100000610e20000';
const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

function ownership(): SessionOwnership {
  return new SessionOwnership({
    root: '/lockstream',
    owner: 'instance-a',
    protection: { aclFor: () => undefined },
    chroot: undefined,
  });
}

function recordOf(owner: SessionOwnership): SessionRecord {
  return newRecord({ id: BigInt(`0x${NAME}`), password: new Uint8Array(16) }, owner.owner, owner.vouchKey);
}

/** Whether `token`, resumed as `kind` by `caller`, proves itself against `record`. */
function proves(
  record: SessionRecord,
  token: string,
  kind: 'acquire' | 'session',
  caller: string | undefined,
): boolean {
  const checked = checkedClaim(token, kind, caller);
  return checked !== undefined && vouchedBy(record, checked.claim, checked.proof);
}

describe('resume tokens of a store session that can move', () => {
  const issuer = ownership();
  const record = recordOf(issuer);
  const token = provenToken(NAME, 'session', 'alice', (claim) => issuer.vouch(claim));

  it('name their session first, and fit the 256 bytes a resume_token may have', () => {
    expect(tokenIssuer(token)).toBe(NAME);
    expect(Buffer.byteLength(token)).toBeLessThanOrEqual(256);
    expect(provenToken(NAME, 'session', 'alice', (claim) => issuer.vouch(claim))).not.toBe(token);
  });

  it('prove themselves for the caller and RPC they were issued to, and for no other', () => {
    expect(proves(record, token, 'session', 'alice')).toBe(true);
    expect(proves(record, token, 'session', 'bob')).toBe(false);
    expect(proves(record, token, 'acquire', 'alice')).toBe(false);
    expect(proves(record, token, 'session', undefined)).toBe(false);
    const anonymous = provenToken(NAME, 'acquire', undefined, (claim) => issuer.vouch(claim));
    expect(proves(record, anonymous, 'acquire', undefined)).toBe(true);
    expect(proves(record, anonymous, 'acquire', '')).toBe(false);
  });

  it('prove nothing once any part is changed, or against another key, or a record without one', () => {
    const [name, nonce, proof] = token.split('.') as [string, string, string];
    const flip = (text: string, at: number): string =>
      text.slice(0, at) + (text[at] === 'A' ? 'B' : 'A') + text.slice(at + 1);
    for (const forged of [
      `${name}.${flip(nonce, 0)}.${proof}`,
      `${name}.${nonce}.${flip(proof, 10)}`,
      `${name}.${nonce}.${proof.slice(0, -1)}`,
      // Another spelling of the same signature bytes (the last character's unused low bits).
      `${name}.${nonce}.${proof.slice(0, -1)}${BASE64URL[BASE64URL.indexOf(proof.at(-1)!) + 1]!}`,
      `${flip(name, 15)}.${nonce}.${proof}`,
      `${name}.${nonce}`,
      `${name}.${nonce}.${proof}.more`,
      `${name}.${'x'.repeat(32)}`,
    ]) {
      expect(proves(record, forged, 'session', 'alice'), forged).toBe(false);
    }
    expect(proves(recordOf(ownership()), token, 'session', 'alice')).toBe(false);
    const { vouchKey: _, ...older } = record;
    expect(proves(older, token, 'session', 'alice')).toBe(false);
    expect(proves({ ...record, vouchKey: 'not a key' }, token, 'session', 'alice')).toBe(false);
  });

  it('are checked against a record that keeps the key through parsing, and records without one still parse', () => {
    const parsed = parseRecord(encodeRecord(record))!;
    expect(parsed.vouchKey).toBe(issuer.vouchKey);
    expect(proves(parsed, token, 'session', 'alice')).toBe(true);
    const { vouchKey: _, ...older } = record;
    expect(parseRecord(encodeRecord(older))).toEqual(older);
  });
});

describe('resume tokens of a session that cannot move', () => {
  it('are the instance id and a random secret, and prove nothing', () => {
    const token = plainToken('a1b2c3d4-0000-4000-8000-000000000000');
    expect(token).toMatch(/^a1b2c3d4-0000-4000-8000-000000000000\.[A-Za-z0-9_-]{32}$/);
    expect(checkedClaim(token, 'acquire', undefined)).toBeUndefined();
  });
});

describe('proven tokens made a turn ahead', () => {
  const issuer = ownership();
  const record = recordOf(issuer);
  /** The loop's next turn, when the tokens taken in this one have been made again. */
  const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(() => setImmediate(resolve)));
  /** The check phase of the taking turn: where its store requests and messages are written. */
  const thisTurnsWrites = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

  /** A pool whose signatures are counted. */
  function counted(): { tokens: ProvenTokens; signed: () => number; vouch: (claim: string) => string } {
    let signed = 0;
    return {
      tokens: new ProvenTokens(),
      signed: () => signed,
      vouch: (claim) => {
        signed += 1;
        return issuer.vouch(claim);
      },
    };
  }

  it('are the tokens provenToken makes: each proves its claim, and none is given out twice', async () => {
    const { tokens, vouch } = counted();
    const given = new Set<string>();
    for (let turn = 0; turn < 20; turn++) {
      for (const [kind, caller] of [
        ['session', 'alice'],
        ['acquire', undefined],
        ['acquire', ''],
      ] as const) {
        const token = tokens.take(NAME, kind, caller, vouch);
        expect(proves(record, token, kind, caller), `${kind} ${caller}`).toBe(true);
        expect(proves(record, token, kind, caller === 'alice' ? 'bob' : 'alice')).toBe(false);
        expect(given.has(token)).toBe(false);
        given.add(token);
      }
      await nextTurn();
    }
  });

  it('sign off the taking turn once a claim is asked for again, and not for a claim asked once', async () => {
    const { tokens, signed, vouch } = counted();
    tokens.take(NAME, 'acquire', 'once', vouch);
    await nextTurn();
    expect(signed()).toBe(1);
    tokens.take(NAME, 'acquire', 'often', vouch);
    tokens.take(NAME, 'acquire', 'often', vouch);
    expect(signed()).toBe(3);
    // Not ahead of what the taking turn writes at its end: nothing is signed there.
    await thisTurnsWrites();
    expect(signed()).toBe(3);
    await nextTurn();
    // Made ahead in the turn after: the next take signs nothing.
    expect(signed()).toBe(4);
    tokens.take(NAME, 'acquire', 'often', vouch);
    expect(signed()).toBe(4);
    await nextTurn();
    expect(signed()).toBe(5);
  });

  it('give a new issuer none of the tokens made for the old one', async () => {
    const { tokens, vouch } = counted();
    const NEXT = '0100000610e20001';
    tokens.take(NAME, 'session', 'alice', vouch);
    tokens.take(NAME, 'session', 'alice', vouch);
    await nextTurn();
    const token = tokens.take(NEXT, 'session', 'alice', vouch);
    expect(tokenIssuer(token)).toBe(NEXT);
    const checked = checkedClaim(token, 'session', 'alice')!;
    expect(checked.claim).toContain(NEXT);
  });
});
