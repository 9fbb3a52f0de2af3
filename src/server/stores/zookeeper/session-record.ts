/* A published session's record: where it lives, what it holds, and its encoding. */
import { LockError } from '../../lock-error.js';
import { joinPath } from '../node-paths.js';

/**
 * Where a published session's record lives and what it says. Each session of a publishing
 * store has an ephemeral record `<root>/sessions/<name>` (name: the session id as 16 hex
 * digits) holding what it takes to attach to the session, and who owns it now. The record's
 * data version is the ownership: a taker bumps it, and every write of an owner checks it.
 */
export interface SessionRecord {
  /** The session id, in hex. */
  readonly session: string;
  /** The session password, in base64: whoever reads it can attach to the session. */
  readonly password: string;
  /** The owner's label (its instance id), for logs. */
  readonly owner: string;
  /** When the owner published or took the session, ISO 8601. */
  readonly since: string;
  /**
   * The public key (Ed25519, raw, base64url) that checks the proofs in the resume tokens
   * issued on the session (see SessionTakeover.vouch): set by the store that published it,
   * kept by takers. Absent in records of older versions, whose tokens then prove nothing.
   */
  readonly vouchKey?: string;
}

/** The folder of the records, under lockstream's root. */
export function recordsDir(root: string): string {
  return joinPath(root, 'sessions');
}

/** The name a session is published under: its id as 16 hex digits. */
export function recordName(sessionId: bigint): string {
  return sessionId.toString(16).padStart(16, '0');
}

/** The path of the record published as `name`; INVALID_ARGUMENT unless `name` is such a name. */
export function recordPath(root: string, name: string): string {
  if (!/^[0-9a-f]{16}$/.test(name)) {
    throw new LockError(
      'INVALID_ARGUMENT',
      `"${name.slice(0, 40)}" is not the name of a published ZooKeeper session (16 lowercase hex digits)`,
    );
  }
  return joinPath(recordsDir(root), name);
}

export function newRecord(
  credentials: { readonly id: bigint; readonly password: Uint8Array },
  owner: string,
  vouchKey: string,
): SessionRecord {
  return {
    session: credentials.id.toString(16),
    password: Buffer.from(credentials.password).toString('base64'),
    owner,
    since: new Date().toISOString(),
    vouchKey,
  };
}

export function encodeRecord(record: SessionRecord): Uint8Array {
  return Buffer.from(JSON.stringify(record), 'utf8');
}

/** The record in `data`; undefined when it is not one (then nobody can attach through it). */
export function parseRecord(data: Uint8Array): SessionRecord | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(data).toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const { session, password, owner, since, vouchKey } = parsed as Record<string, unknown>;
  if (typeof session !== 'string' || !/^[0-9a-f]{1,16}$/.test(session)) return undefined;
  if (typeof password !== 'string' || typeof owner !== 'string' || typeof since !== 'string')
    return undefined;
  return { session, password, owner, since, ...(typeof vouchKey === 'string' ? { vouchKey } : {}) };
}

/** The id and password to attach to the session of `record`. */
export function recordCredentials(record: SessionRecord): {
  readonly id: bigint;
  readonly password: Uint8Array;
} {
  return { id: BigInt(`0x${record.session}`), password: Buffer.from(record.password, 'base64') };
}
