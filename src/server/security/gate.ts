/*
 * Admitting calls (Gate): who is calling, by bearer token or client certificate, and what the
 * access policy lets them do, checked before a call touches a lock.
 */
import type { Metadata, ServerUnaryCall } from '@grpc/grpc-js';
import { LockError } from '../lock-error.js';
import type { LockMode } from '../engine/index.js';
import {
  mayAcquire,
  maySee,
  parseAuthorization,
  type AccessPolicy,
  type Principal,
} from './access-policy.js';
import { certificateIdentity } from './certificate-identity.js';

type AuthContext = ReturnType<ServerUnaryCall<unknown, unknown>['getAuthContext']>;

/** What a call offers to prove who is calling. */
export interface CallCredentials {
  readonly metadata: Metadata;
  getAuthContext(): AuthContext;
}

/** Who is calling, and the checks every RPC makes before it touches a lock. */
export interface Caller {
  /** The caller's name (access-policy name or certificate identity); undefined when anonymous. */
  readonly name: string | undefined;
  /** Whether the caller may take `name` in `mode`. */
  mayAcquire(name: string, mode: LockMode): boolean;
  /** Throws PERMISSION_DENIED unless the caller may take `name` in `mode`. */
  checkAcquire(name: string, mode: LockMode): void;
  /** Whether the caller may see who holds and waits for `name`. */
  maySee(name: string): boolean;
  /** Throws PERMISSION_DENIED unless the caller may see `name`. */
  checkSee(name: string): void;
  /** Throws PERMISSION_DENIED unless the caller may revoke `name` (an admin whose grants cover it). */
  checkRevoke(name: string): void;
}

/**
 * Admits calls: without an access policy everyone may do everything (the certificate identity,
 * if mTLS gave one, still names the caller); with one, a call must carry a known bearer token
 * or a known client certificate (UNAUTHENTICATED otherwise), and may use only what its grants
 * allow (PERMISSION_DENIED). Nothing is looked up in the store before that, so a denial says
 * nothing about whether a lock exists.
 */
export class Gate {
  readonly #policy: AccessPolicy | undefined;

  constructor(policy: AccessPolicy | undefined) {
    this.#policy = policy;
  }

  /** The caller behind `call`, or an UNAUTHENTICATED LockError. */
  admit(call: CallCredentials): Caller {
    const certificate = call.getAuthContext().sslPeerCertificate;
    const identity = certificate ? certificateIdentity(certificate) : undefined;
    if (!this.#policy) return identity === undefined ? ANONYMOUS : unrestricted(identity);
    const authorization = call.metadata.get('authorization');
    if (authorization.length > 1) {
      throw new LockError('UNAUTHENTICATED', 'more than one `authorization` header; send one bearer token');
    }
    if (authorization.length === 1) {
      const credentials = parseAuthorization(String(authorization[0]));
      if (credentials?.scheme !== 'bearer') {
        throw new LockError('UNAUTHENTICATED', '`authorization` must be `Bearer <token>`');
      }
      const principal = this.#policy.byToken(credentials.token);
      if (!principal) throw new LockError('UNAUTHENTICATED', 'the bearer token is not known to this server');
      return restricted(principal);
    }
    if (identity === undefined) {
      throw new LockError(
        'UNAUTHENTICATED',
        'no credentials: send `authorization: Bearer <token>` or a client certificate the access policy names',
      );
    }
    const principal = this.#policy.byCertificate(identity);
    if (!principal) {
      throw new LockError(
        'UNAUTHENTICATED',
        `client certificate ${JSON.stringify(identity)} is not named in the access policy`,
      );
    }
    return restricted(principal);
  }
}

/** Every caller of a server without a policy or client certificates: one object for all calls. */
const ANONYMOUS: Caller = unrestricted(undefined);

function unrestricted(name: string | undefined): Caller {
  return {
    name,
    mayAcquire: () => true,
    checkAcquire: () => {},
    maySee: () => true,
    checkSee: () => {},
    checkRevoke: () => {},
  };
}

function restricted(principal: Principal): Caller {
  const denied = (what: string): LockError =>
    new LockError('PERMISSION_DENIED', `caller ${JSON.stringify(principal.name)} may not ${what}`);
  return {
    name: principal.name,
    mayAcquire: (name, mode) => mayAcquire(principal, name, mode),
    checkAcquire: (name, mode) => {
      if (!mayAcquire(principal, name, mode))
        throw denied(`take lock ${JSON.stringify(name)} in ${mode} mode`);
    },
    maySee: (name) => maySee(principal, name),
    checkSee: (name) => {
      if (!maySee(principal, name)) throw denied(`see lock ${JSON.stringify(name)}`);
    },
    checkRevoke: (name) => {
      if (!principal.admin || !maySee(principal, name)) throw denied(`revoke lock ${JSON.stringify(name)}`);
    },
  };
}
