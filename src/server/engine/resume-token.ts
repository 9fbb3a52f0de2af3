/*
 * A resume token is `<issuer>.<secret>`. The issuer names where the session lives: this
 * server's instance id where sessions cannot move, else the name its store session is
 * published under (see SessionTakeover). That name is no secret (every token issued on the
 * store session carries it, and ZooKeeper's session ids are sequential), and a token naming
 * another instance's store session makes an instance take that whole session over. So such a
 * token's secret is `<nonce>.<proof>`: the issuing store's proof (SessionTakeover.vouch) of
 * what the token was issued for, which any instance checks against the store session's record
 * before it takes anything over (see checkedClaim).
 */
import crypto, { randomFillSync } from 'node:crypto';
import type { SessionKind } from './lock-session.js';

/** The part of `token` before its first dot: the instance or store session that issued it. */
export function tokenIssuer(token: string): string {
  return token.slice(0, Math.max(0, token.indexOf('.')));
}

/**
 * What a proof in a token vouches for: the store session it was issued on, the token's nonce,
 * the RPC that opened the session, and the caller it belongs to (none: anonymous).
 */
export function tokenClaim(
  issuer: string,
  nonce: string,
  kind: SessionKind,
  callerName: string | undefined,
): string {
  return JSON.stringify(['lockstream resume token', issuer, nonce, kind, callerName ?? null]);
}

/** A token for a session on a store session that can move, with `vouch`'s proof of its claim. */
export function provenToken(
  issuer: string,
  kind: SessionKind,
  callerName: string | undefined,
  vouch: (claim: string) => string,
): string {
  const nonce = randomToken(NONCE_BYTES);
  return `${issuer}.${nonce}.${vouch(tokenClaim(issuer, nonce, kind, callerName))}`;
}

/**
 * Proven tokens made a turn ahead (ProvenTokens.take): the same tokens provenToken makes, each
 * given out once, only signed earlier. Signing a claim costs about 60 to 100 µs, which an
 * Acquire stream would otherwise spend between reading its `start` and sending its create.
 */
export class ProvenTokens {
  /**
   * Tokens made ahead, by issuer, RPC and caller (at most MADE_AHEAD each); a key with an
   * empty list was asked for once, and is made ahead for only once asked again, so that a
   * caller seen once costs no second signature.
   */
  readonly #ready = new Map<string, string[]>();
  #refills: Array<() => void> | undefined;

  /** A token as provenToken makes it: one made ahead for the same claim if there is one. */
  take(
    issuer: string,
    kind: SessionKind,
    callerName: string | undefined,
    vouch: (claim: string) => string,
  ): string {
    const key = `${kind} ${issuer} ${callerName === undefined ? '-' : `=${callerName}`}`;
    const ready = this.#ready.get(key);
    if (ready === undefined) {
      if (this.#ready.size >= CLAIMS_MADE_AHEAD) this.#ready.delete(this.#ready.keys().next().value!);
      this.#ready.set(key, []);
      return provenToken(issuer, kind, callerName, vouch);
    }
    const token = ready.pop() ?? provenToken(issuer, kind, callerName, vouch);
    this.#refill(() => {
      // Gone from the map: evicted, or the store session's name changed (a new issuer).
      if (this.#ready.get(key) !== ready || ready.length >= MADE_AHEAD) return;
      ready.push(provenToken(issuer, kind, callerName, vouch));
    });
    return token;
  }

  /**
   * Runs `make` in the loop's next turn, once the turn that asked has sent what it had to (its
   * create, its answer). Not in this turn's check phase: the store's requests and the streams'
   * messages of this turn are written there too (setImmediate), queued after the token was
   * taken, and a signature ahead of them would delay them all.
   */
  #refill(make: () => void): void {
    if (this.#refills) {
      this.#refills.push(make);
      return;
    }
    const refills = (this.#refills = [make]);
    setImmediate(() =>
      setImmediate(() => {
        this.#refills = undefined;
        for (const refill of refills) {
          try {
            refill();
          } catch {
            // A store that cannot vouch now signs when a token is taken, and fails the open then.
          }
        }
      }),
    );
  }
}

/** Tokens made ahead per claim: a stream opened per lock takes one a cycle. */
const MADE_AHEAD = 2;
/** Claims (issuer, RPC, caller) whose tokens are made ahead, the most recently new kept. */
const CLAIMS_MADE_AHEAD = 64;

/** A token for a session that cannot leave this server: only its secret makes it someone's. */
export function plainToken(issuer: string): string {
  return `${issuer}.${randomToken(SECRET_BYTES)}`;
}

/**
 * The claim a token must prove to be resumed as `kind` by `callerName` on another instance,
 * and the proof it carries; undefined when it carries none (it cannot be one issued for that).
 */
export function checkedClaim(
  token: string,
  kind: SessionKind,
  callerName: string | undefined,
): { readonly claim: string; readonly proof: string } | undefined {
  const [issuer, nonce, proof, extra] = token.split('.');
  if (!issuer || !nonce || !proof || extra !== undefined) return undefined;
  return { claim: tokenClaim(issuer, nonce, kind, callerName), proof };
}

/** Random bytes of a nonce: tokens never repeat, so neither do the claims they prove. */
const NONCE_BYTES = 16;
/** Random bytes of a token's secret where nothing else makes it hard to guess. */
const SECRET_BYTES = 24;

/** Random bytes for resume tokens, drawn from the system in batches rather than per token. */
const pool = Buffer.alloc(SECRET_BYTES * 256);
let poolOffset = pool.length;

/** `bytes` random bytes (at most SECRET_BYTES), base64url. */
function randomToken(bytes: number): string {
  if (poolOffset + bytes > pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const token = pool.toString('base64url', poolOffset, poolOffset + bytes);
  poolOffset += bytes;
  return token;
}

/** A resume token's key: what nodes and the registry keep instead of the token itself. */
export function resumeKey(token: string): string {
  return sha256(token).slice(0, 24);
}

/**
 * SHA-256 as base64url: the one-shot `crypto.hash` (Node 20.12 and later; a third of a Hash
 * object's cost, one per session opened), else a Hash object.
 */
const sha256: (text: string) => string =
  typeof crypto.hash === 'function'
    ? (text) => crypto.hash('sha256', text, 'base64url')
    : (text) => crypto.createHash('sha256').update(text).digest('base64url');
