/*
 * The access policy (`--auth-file`): which callers, known by token hash or certificate identity,
 * may take and see which locks; and how an `authorization` value carries a token.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { parseDocument } from 'yaml';
import { z } from 'zod';
import type { LockMode } from '../engine/index.js';

/** Locks whose names start with `prefix`, in the listed modes. */
export interface Grant {
  readonly prefix: string;
  readonly modes: ReadonlySet<LockMode>;
}

/** A caller the access policy knows, by bearer token or by client certificate identity. */
export interface Principal {
  /** How logs name the caller; the recorded owner of its requests that name none. */
  readonly name: string;
  /** May call the admin RPCs (RevokeLock) on the locks its grants cover. */
  readonly admin: boolean;
  /** May read the HTTP port (metrics, and the page with every lock) when `--http-auth` is on. */
  readonly http: boolean;
  readonly grants: readonly Grant[];
}

const MODES = ['mutex', 'read', 'write', 'semaphore', 'candidate'] as const;

const callerSchema = z
  .strictObject({
    name: z.string().min(1).max(256),
    token_sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/i, 'expected the 64 hex digits of the SHA-256 of the token')
      .optional(),
    certificate: z.string().min(1).optional(),
    admin: z.boolean().default(false),
    http: z.boolean().default(false),
    locks: z.array(z.strictObject({ prefix: z.string(), modes: z.array(z.enum(MODES)).min(1) })).default([]),
  })
  .refine((caller) => caller.token_sha256 !== undefined || caller.certificate !== undefined, {
    message: 'a caller needs token_sha256, certificate, or both',
  });

const policySchema = z.strictObject({ callers: z.array(callerSchema) });

export class AccessPolicyError extends Error {
  override readonly name = 'AccessPolicyError';
  constructor(
    readonly source: string,
    readonly problems: readonly string[],
  ) {
    super(`${source}: ${problems.join('; ')}`);
  }
}

interface TokenEntry {
  readonly digest: Buffer;
  readonly principal: Principal;
}

/**
 * Who may do what: the `--auth-file`. Callers are known by the SHA-256 of their bearer token
 * (so the file reveals no token) or by their client certificate's identity.
 */
export class AccessPolicy {
  readonly #tokens: readonly TokenEntry[];
  readonly #certificates: ReadonlyMap<string, Principal>;

  private constructor(tokens: readonly TokenEntry[], certificates: ReadonlyMap<string, Principal>) {
    this.#tokens = tokens;
    this.#certificates = certificates;
  }

  /** Parses the YAML (or JSON) text of an access policy; throws AccessPolicyError listing every problem. */
  static parse(text: string, source: string): AccessPolicy {
    const document = parseDocument(text);
    if (document.errors.length > 0) {
      throw new AccessPolicyError(
        source,
        document.errors.map((error) => error.message.split('\n')[0] ?? error.message),
      );
    }
    const parsed = policySchema.safeParse(document.toJS());
    if (!parsed.success) {
      throw new AccessPolicyError(
        source,
        parsed.error.issues.map((issue) => `${issuePath(issue.path)}: ${issue.message}`),
      );
    }
    const problems: string[] = [];
    const tokens: TokenEntry[] = [];
    const certificates = new Map<string, Principal>();
    const names = new Set<string>();
    parsed.data.callers.forEach((caller, index) => {
      const where = `callers[${index}]`;
      if (names.has(caller.name)) problems.push(`${where}.name: "${caller.name}" is used twice`);
      names.add(caller.name);
      const principal: Principal = {
        name: caller.name,
        admin: caller.admin,
        http: caller.http,
        grants: caller.locks.map((grant) => ({ prefix: grant.prefix, modes: new Set(grant.modes) })),
      };
      if (caller.token_sha256 !== undefined) {
        const digest = Buffer.from(caller.token_sha256, 'hex');
        if (tokens.some((entry) => entry.digest.equals(digest))) {
          problems.push(`${where}.token_sha256: the same token is given to two callers`);
        }
        tokens.push({ digest, principal });
      }
      if (caller.certificate !== undefined) {
        if (certificates.has(caller.certificate)) {
          problems.push(`${where}.certificate: "${caller.certificate}" is given to two callers`);
        }
        certificates.set(caller.certificate, principal);
      }
    });
    if (problems.length > 0) throw new AccessPolicyError(source, problems);
    return new AccessPolicy(tokens, certificates);
  }

  /**
   * The caller holding `token`, if any. Compares the token's digest with every known digest,
   * in constant time and without stopping at a match, so timing tells nothing about the tokens.
   */
  byToken(token: string): Principal | undefined {
    const digest = sha256(token);
    let found: Principal | undefined;
    for (const entry of this.#tokens) {
      if (timingSafeEqual(entry.digest, digest)) found = entry.principal;
    }
    return found;
  }

  /**
   * The caller an HTTP `Authorization` header names, if it may read the HTTP port: `Bearer
   * <token>`, or `Basic` with the caller's name as user and its token as password (what a
   * browser prompts for, and what Prometheus' `basic_auth` sends).
   */
  httpCaller(authorization: string | undefined): Principal | undefined {
    const credentials = authorization === undefined ? undefined : parseAuthorization(authorization);
    if (!credentials) return undefined;
    const principal = this.byToken(credentials.token);
    if (credentials.scheme === 'basic' && principal?.name !== credentials.user) return undefined;
    return principal?.http ? principal : undefined;
  }

  /** The caller whose client certificate has this identity (see `certificateIdentity`), if any. */
  byCertificate(identity: string): Principal | undefined {
    return this.#certificates.get(identity);
  }
}

/** What an `Authorization` value carries: a bearer token, or a Basic user and password (its token). */
export type AuthorizationCredentials =
  | { readonly scheme: 'bearer'; readonly token: string }
  | { readonly scheme: 'basic'; readonly user: string; readonly token: string };

const BEARER = /^Bearer ([\x21-\x7e]+)$/i;
const BASIC = /^Basic ([A-Za-z0-9+/]+=*)$/i;

/**
 * Parses `Bearer <token>` or `Basic base64(user:password)`, the one grammar of the gRPC
 * `authorization` metadata and the HTTP header; undefined for anything else.
 */
export function parseAuthorization(value: string): AuthorizationCredentials | undefined {
  const bearer = BEARER.exec(value)?.[1];
  if (bearer !== undefined) return { scheme: 'bearer', token: bearer };
  const basic = BASIC.exec(value)?.[1];
  if (basic === undefined) return undefined;
  const decoded = Buffer.from(basic, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0
    ? undefined
    : { scheme: 'basic', user: decoded.slice(0, colon), token: decoded.slice(colon + 1) };
}

/** The SHA-256 of a token, as `token_sha256` in the access policy holds it. */
export function sha256(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** Whether a grant of `principal` lets it take `name` in `mode`. */
export function mayAcquire(principal: Principal, name: string, mode: LockMode): boolean {
  return principal.grants.some((grant) => name.startsWith(grant.prefix) && grant.modes.has(mode));
}

/** Whether any grant of `principal` covers `name`: it may then see who holds and waits for it. */
export function maySee(principal: Principal, name: string): boolean {
  return principal.grants.some((grant) => name.startsWith(grant.prefix));
}

function issuePath(path: readonly PropertyKey[]): string {
  return (
    path.reduce<string>(
      (text, key) =>
        typeof key === 'number' ? `${text}[${key}]` : text ? `${text}.${String(key)}` : String(key),
      '',
    ) || '(top level)'
  );
}
