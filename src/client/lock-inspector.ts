/*
 * The calls about locks rather than of a holder (describe, watch, list, check a token, revoke),
 * and their answers in the SDK's terms.
 */
import type { ServiceError } from '@grpc/grpc-js';
import type {
  CheckTokenResponse,
  DescribeLockResponse,
  ListLocksResponse,
  RevokeLockResponse,
  LockRequestInfo as WireLockRequestInfo,
  LockServiceClient,
  WatchLockResponse,
} from '../gen/lockstream/v1/lockstream.js';
import type { Endpoints } from './endpoints.js';
import { LockClientClosedError } from './errors.js';
import { checkLabel, checkLockName, checkMs } from './request-checks.js';
import { serverStream, unaryCall } from './unary-call.js';
import { fromWireMode, toDuration, type DescribedMode } from './wire-values.js';

/** One request in a lock's queue, as `describe` reports it. */
export interface LockRequestInfo {
  /** `candidate` for an election's (see `campaign`). */
  readonly mode: DescribedMode | undefined;
  readonly owner: string;
  /** The request's fencing token (a waiter's, once granted). */
  readonly token: bigint;
  readonly requestedAt: Date | undefined;
  /** The lockstream server that serves it. */
  readonly instance: string;
  /** The client's address as that server saw it. */
  readonly peer: string;
  /** What the request publishes (`setValue`, or `value` when it asked); empty if nothing. */
  readonly value: Buffer;
  /** A semaphore request's weight; 0 in the lock modes. */
  readonly weight: number;
}

export interface LockDescription {
  readonly name: string;
  readonly holders: readonly LockRequestInfo[];
  readonly waiters: readonly LockRequestInfo[];
  /** A semaphore's limit, and the part of it its holders use; both 0 for a lock. */
  readonly limit: number;
  readonly usedWeight: number;
}

export interface LockPage {
  readonly locks: ReadonlyArray<{
    readonly name: string;
    readonly holders: number;
    readonly waiters: number;
    readonly heldMode: DescribedMode | undefined;
    /** A semaphore's limit and the part of it in use; both 0 for a lock. */
    readonly limit: number;
    readonly usedWeight: number;
  }>;
  /** Pass it as `pageToken` for the next page; empty on the last one. */
  readonly nextPageToken: string;
}

/**
 * The RPCs about locks rather than of a holder: describe, watch, list, check a token, revoke.
 * Each turns a failure into a `LockClientError`; `closed` says whether the client was closed
 * (then every call rejects with FAILED_PRECONDITION). The LockClient's methods of the same
 * names call these. Each call goes to the current endpoint; UNAVAILABLE moves the client on to
 * the next, and a unary call is then tried there, once per endpoint (UNAVAILABLE means the call
 * was not done, so trying it elsewhere is safe).
 */
export class LockInspector {
  readonly #endpoints: Endpoints;
  readonly #closed: () => boolean;

  constructor(endpoints: Endpoints, closed: () => boolean) {
    this.#endpoints = endpoints;
    this.#closed = closed;
  }

  async describe(name: string): Promise<LockDescription> {
    checkLockName(name);
    const response = await this.#unary<DescribeLockResponse>(name, (grpc, done) =>
      grpc.describeLock({ name }, done),
    );
    return fromWireDescription(response);
  }

  async *watch(name: string, signal: AbortSignal | undefined): AsyncGenerator<LockDescription, void> {
    if (this.#closed()) throw new LockClientClosedError(name);
    checkLockName(name);
    // After UNAVAILABLE the caller watches again: on the next endpoint.
    yield* serverStream(
      this.#endpoints,
      name,
      signal,
      (clients) => clients.locks.watchLock({ name }),
      (response: WatchLockResponse) => (response.state ? fromWireDescription(response.state) : undefined),
    );
  }

  async list(options: { prefix?: string; pageSize?: number; pageToken?: string }): Promise<LockPage> {
    const request = {
      prefix: options.prefix ?? '',
      pageSize: options.pageSize ?? 0,
      pageToken: options.pageToken ?? '',
    };
    // About no one lock: its errors name none.
    const response = await this.#unary<ListLocksResponse>('', (grpc, done) => grpc.listLocks(request, done));
    return {
      locks: response.locks.map((lock) => ({ ...lock, heldMode: fromWireMode(lock.heldMode) })),
      nextPageToken: response.nextPageToken,
    };
  }

  async checkToken(name: string, token: bigint): Promise<boolean> {
    checkLockName(name);
    const response = await this.#unary<CheckTokenResponse>(name, (grpc, done) =>
      grpc.checkToken({ name, fencingToken: token }, done),
    );
    return response.held;
  }

  async revoke(name: string, reason: string, forceAfterMs: number | undefined): Promise<number> {
    checkLockName(name);
    checkLabel(name, 'reason', reason);
    if (forceAfterMs !== undefined) checkMs(name, 'forceAfter', forceAfterMs);
    const forceAfter = forceAfterMs === undefined ? undefined : toDuration(forceAfterMs);
    const response = await this.#unary<RevokeLockResponse>(name, (grpc, done) =>
      grpc.revokeLock({ name, reason, forceAfter }, done),
    );
    return response.holdersAsked;
  }

  #unary<T>(
    name: string,
    call: (grpc: LockServiceClient, done: (error: ServiceError | null, value?: T) => void) => unknown,
  ): Promise<T> {
    return unaryCall(this.#endpoints, { name, closed: this.#closed }, (clients, done) =>
      call(clients.locks, done),
    );
  }
}

function fromWireDescription(state: DescribeLockResponse): LockDescription {
  return {
    name: state.name,
    holders: state.holders.map(fromWireInfo),
    waiters: state.waiters.map(fromWireInfo),
    limit: state.limit,
    usedWeight: state.usedWeight,
  };
}

function fromWireInfo(info: WireLockRequestInfo): LockRequestInfo {
  return {
    mode: fromWireMode(info.mode),
    owner: info.owner,
    token: info.fencingToken,
    requestedAt: info.requestedAt,
    instance: info.instance,
    peer: info.peer,
    value: info.value,
    weight: info.weight,
  };
}
