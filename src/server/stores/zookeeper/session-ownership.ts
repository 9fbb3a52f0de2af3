/* How a store proves it owns a published session: publishing, claiming and checking its record,
 * and signing and checking the proofs in resume tokens. */
import { createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import { LockError } from '../../lock-error.js';
import { ancestors } from '../node-paths.js';
import { ErrorCode, type Acl } from './protocol/records.js';
import { errorName } from './protocol/zookeeper-error.js';
import {
  encodeRecord,
  newRecord,
  parseRecord,
  recordName,
  recordPath,
  type SessionRecord,
} from './session-record.js';
import { missingChroot } from './chroot.js';
import { isConnectionLoss, protectionFailure, unavailable } from './zookeeper-failures.js';
import type { LinkOp, ZooKeeperLink } from './zookeeper-link.js';

/** The record of a session, at the data version this store owns it at. */
export interface OwnedRecord {
  readonly name: string;
  readonly path: string;
  readonly version: number;
}

/** What a publish, claim or check of a session's record found. */
export type Ownership =
  | { readonly kind: 'owned'; readonly record: OwnedRecord }
  /** Another instance owns the session now (`by`: its label, as far as the record tells). */
  | { readonly kind: 'takenOver'; readonly by: string }
  /** The connection went before the answer: to be asked again once it is back. */
  | { readonly kind: 'unanswered' }
  /**
   * The record is gone: the session is over (a record goes only with its session, or by hand),
   * and nobody can take it over any more.
   */
  | { readonly kind: 'over' }
  | { readonly kind: 'failed'; readonly error: LockError };

const EMPTY = new Uint8Array(0);
/** Who took a session over, when its record cannot tell. */
export const SOMEONE = 'another lockstream instance';

/** The ACL a node gets (TreeProtection's: digest-only when the tree is protected). */
export interface AclSource {
  aclFor(path: string): readonly Acl[] | undefined;
}

/**
 * How a store proves it owns its session (see SessionTakeover): it publishes the session's
 * record when the session is new, claims it when it attaches to another's, checks it after every
 * reconnection (a paused owner that wakes must not move a taken session back to itself), and
 * puts a check of it in front of every write.
 */
export class SessionOwnership {
  /** lockstream's root path: records live in `<root>/sessions`. */
  readonly root: string;
  /** This store's label in the records it writes (its instance id). */
  readonly owner: string;
  readonly #protection: AclSource;
  /** Set once the records' folder and its ancestors are known to exist. */
  #folderMade = false;
  /**
   * Signs the claims of the resume tokens issued on the sessions this store publishes; its
   * public half goes in their records (see SessionRecord.vouchKey). Never leaves the process.
   */
  readonly #vouchKeys = generateKeyPairSync('ed25519');

  /** The connect string's chroot, to name it when the tree under it is missing. */
  readonly #chroot: string | undefined;

  constructor(options: { root: string; owner: string; protection: AclSource; chroot: string | undefined }) {
    this.root = options.root;
    this.owner = options.owner;
    this.#protection = options.protection;
    this.#chroot = options.chroot;
  }

  /** A write's ops behind a check of the record at the owned version: all of them or none. */
  fenced(record: OwnedRecord, ops: readonly LinkOp[]): LinkOp[] {
    return [{ op: 'check', path: record.path, version: record.version }, ...ops];
  }

  /**
   * Publishes the new session of `link`: an ephemeral record readable only by lockstream's own
   * credentials when the tree is protected. Its folder is made in the same round trip.
   */
  async publish(link: ZooKeeperLink): Promise<Ownership> {
    const name = recordName(link.credentials.id);
    const path = recordPath(this.root, name);
    const folders = this.#folderMade ? [] : ancestors(path);
    const data = encodeRecord(newRecord(link.credentials, this.owner, this.vouchKey));
    const replies = await Promise.all([
      ...folders.map((folder) => link.create(folder, EMPTY, 'persistent', this.#protection.aclFor(folder))),
      link.create(path, data, 'ephemeral', this.#protection.aclFor(path)),
    ]);
    for (const [i, folder] of folders.entries()) {
      const { rc } = replies[i]!;
      if (rc === ErrorCode.ok || rc === ErrorCode.nodeExists) continue;
      if (isConnectionLoss(rc)) return { kind: 'unanswered' };
      return { kind: 'failed', error: publishFailure(folder, rc, i === 0 ? this.#chroot : undefined) };
    }
    this.#folderMade = true;
    const { rc } = replies[folders.length]!;
    if (rc === ErrorCode.ok) return { kind: 'owned', record: { name, path, version: 0 } };
    if (isConnectionLoss(rc)) return { kind: 'unanswered' };
    // Made by an earlier try whose reply was lost (a record is named after its session): ours
    // unless someone has taken the session over since.
    if (rc === ErrorCode.nodeExists) return this.check(link, { name, path, version: 0 });
    return { kind: 'failed', error: publishFailure(path, rc, undefined) };
  }

  /** Whether the session still owns `record` at its version (after a reconnection). */
  async check(link: ZooKeeperLink, record: OwnedRecord): Promise<Ownership> {
    const reply = await link.getData(record.path, false);
    if (isConnectionLoss(reply.rc)) return { kind: 'unanswered' };
    if (reply.rc === ErrorCode.noNode) return { kind: 'over' };
    if (reply.rc === ErrorCode.ok && reply.value?.version === record.version)
      return { kind: 'owned', record };
    // Bumped by a taker (or unreadable): not ours any more, and nothing here may act on it.
    return { kind: 'takenOver', by: (reply.value && parseRecord(reply.value.data)?.owner) ?? SOMEONE };
  }

  /** The public key of `vouch` as the records of this store's sessions carry it (SessionRecord.vouchKey). */
  get vouchKey(): string {
    return this.#vouchKeys.publicKey.export({ format: 'jwk' }).x!;
  }

  /** As SessionTakeover.vouch: the signature of `claim`, base64url (86 characters). */
  vouch(claim: string): string {
    return sign(null, Buffer.from(claim, 'utf8'), this.#vouchKeys.privateKey).toString('base64url');
  }

  /** A claim of the session published as `name`, whose record was read at `version`. */
  claim(name: string, record: SessionRecord, version: number): SessionClaim {
    return new SessionClaim(recordPath(this.root, name), name, record, version, this.owner);
  }
}

/**
 * Whether `proof` is the signature of `claim` by the key in `record` (see
 * SessionOwnership.vouch); false for a record without a key, and for anything malformed.
 */
export function vouchedBy(record: SessionRecord, claim: string, proof: string): boolean {
  if (record.vouchKey === undefined) return false;
  let key: KeyObject;
  try {
    key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: record.vouchKey }, format: 'jwk' });
  } catch {
    return false;
  }
  const signature = Buffer.from(proof, 'base64url');
  // Only the one spelling vouch() wrote: no other token passes as the one issued.
  if (signature.length !== 64 || signature.toString('base64url') !== proof) return false;
  // A signature check, not a comparison with a secret: its timing tells nothing worth knowing.
  return verify(null, Buffer.from(claim, 'utf8'), key, signature);
}

/**
 * Taking a published session over, once attached to it: the record is rewritten with this
 * store as owner if its version is still the one read (a multi of check and setData), which
 * bumps the version and so fences the previous owner out. A claim is tried again at each
 * connection until it is answered.
 */
export class SessionClaim {
  readonly path: string;
  readonly name: string;
  readonly #data: Uint8Array;
  #version: number;
  /** Whether another taker has already beaten this claim once (see attempt). */
  #contended = false;

  constructor(path: string, name: string, record: SessionRecord, version: number, owner: string) {
    this.path = path;
    this.name = name;
    this.#version = version;
    this.#data = encodeRecord({ ...record, owner, since: new Date().toISOString() });
  }

  async attempt(link: ZooKeeperLink): Promise<Ownership> {
    for (;;) {
      const version = this.#version;
      const reply = await link.multi!([
        { op: 'check', path: this.path, version },
        { op: 'setData', path: this.path, data: this.#data, version },
      ]);
      const set = reply.value?.[1];
      if (reply.rc === ErrorCode.ok && set?.op === 'setData')
        return { kind: 'owned', record: { name: this.name, path: this.path, version: set.version } };
      if (isConnectionLoss(reply.rc)) return { kind: 'unanswered' };
      if (reply.rc !== ErrorCode.badVersion && reply.rc !== ErrorCode.noNode)
        return { kind: 'failed', error: unavailable('multi', reply.rc) };
      const read = await link.getData(this.path, false);
      if (isConnectionLoss(read.rc)) return { kind: 'unanswered' };
      if (read.rc === ErrorCode.noNode) return { kind: 'over' };
      if (read.rc !== ErrorCode.ok || read.value === null)
        return { kind: 'failed', error: unavailable('getData', read.rc) };
      // An earlier try went through and its reply was lost.
      if (Buffer.from(read.value.data).equals(this.#data))
        return { kind: 'owned', record: { name: this.name, path: this.path, version: read.value.version } };
      // Another instance claimed it in between: once, claim it from that one (the caller's
      // client resumed here, not there); a second time, give up.
      if (this.#contended) {
        return {
          kind: 'failed',
          error: new LockError(
            'UNAVAILABLE',
            `ZooKeeper session ${this.name} is being taken over by other instances at the same time`,
          ),
        };
      }
      this.#contended = true;
      this.#version = read.value.version;
    }
  }
}

/** Why publishing failed; `chroot` is set when the topmost folder could not be made under it. */
function publishFailure(path: string, rc: number, chroot: string | undefined): LockError {
  if (rc === ErrorCode.noAuth || rc === ErrorCode.invalidAcl) return protectionFailure(path, rc);
  if (chroot !== undefined && rc === ErrorCode.noNode) return missingChroot(chroot);
  return new LockError(
    'UNAVAILABLE',
    `could not publish the ZooKeeper session at ${path} (${errorName(rc)})`,
  );
}
