/*
 * The SDK's entry point, LockClient: what a caller does with locks and elections, each call
 * handed to the part that does it (acquires and campaigns to AcquireAttempts, inspection to
 * LockInspector, the other election calls to ElectionCalls, streams to LockStreams).
 */
import { ElectionServiceClient } from '../gen/lockstream/v1/election.js';
import { LockServiceClient } from '../gen/lockstream/v1/lockstream.js';
import { RecordServiceClient } from '../gen/lockstream/v1/records.js';
import { AcquireAttempts } from './acquire-attempts.js';
import { lockRequest, multiLockRequest, type AcquireOptions, type LockRequest } from './acquire-options.js';
import { candidateRequest, type CampaignOptions } from './campaign-options.js';
import { ElectionCalls } from './election-calls.js';
import type { ElectionEvent, ElectionLeader, Leadership } from './election.js';
import { endpointList } from './endpoint-list.js';
import { Endpoints } from './endpoints.js';
import { LockTimeoutError } from './errors.js';
import { LeadershipHandle } from './leadership-handle.js';
import type { Lock, LockSpec } from './lock.js';
import {
  connectionSettings,
  nonNegative,
  streamSettings,
  type LockClientOptions,
} from './lock-client-options.js';
import { LockInspector, type LockDescription, type LockPage } from './lock-inspector.js';
import { LockStreams } from './lock-streams.js';
import { HolderRecords, RecordCalls, type GuardedRecord } from './record-calls.js';

export type { AcquireOptions } from './acquire-options.js';
export type { CampaignOptions } from './campaign-options.js';
export type { GuardedRecord, HolderRecords, RecordWriteOptions } from './record-calls.js';
export type { LockDescription, LockPage, LockRequestInfo } from './lock-inspector.js';
export type { LockClientOptions } from './lock-client-options.js';

/**
 * A client for a lockstream server. One client holds one channel (one HTTP/2 connection) per
 * endpoint, over which any number of locks and elections can be held at once; it talks to one
 * endpoint at a time. Close it when done (`using` works too).
 *
 * ```ts
 * const locks = new LockClient('127.0.0.1:50051');
 * await using lock = await locks.acquire('billing/invoice-42', { mode: 'write', waitTimeout: 5_000 });
 * await chargeCustomer({ fencingToken: lock.token, signal: lock.lost });
 * ```
 */
export class LockClient implements Disposable {
  readonly #endpoints: Endpoints;
  readonly #inspector: LockInspector;
  readonly #elections: ElectionCalls;
  readonly #records: RecordCalls;
  readonly #streams: LockStreams;
  readonly #attempts: AcquireAttempts;
  #closed = false;

  /**
   * `address` is `host:port`, or any gRPC target (`dns:///locks.internal:50051`: a name with
   * several addresses is spread over by gRPC's own resolver, on one channel). A list of
   * `host:port` names several lockstream instances on one back end: the client talks to the
   * first, and when a stream breaks or an endpoint is unreachable it moves on to the next, round
   * the list, resuming its session there within the grace (see `resumeGraceMs`). The list must
   * be non-empty, well formed and without duplicates: else LockClientError (INVALID_ARGUMENT).
   */
  constructor(address: string | readonly string[], options: LockClientOptions = {}) {
    const { credentials, channelOptions } = connectionSettings(options);
    this.#endpoints = new Endpoints(endpointList(address), (endpoint) => {
      const locks = new LockServiceClient(endpoint, credentials, channelOptions);
      // One channel per endpoint: the other services' clients ride the LockService's, with the
      // same options (interceptors, such as the bearer token's, are each client's own).
      const channelOverride = locks.getChannel();
      return {
        locks,
        elections: new ElectionServiceClient(endpoint, credentials, { ...channelOptions, channelOverride }),
        records: new RecordServiceClient(endpoint, credentials, { ...channelOptions, channelOverride }),
      };
    });
    const closed = (): boolean => this.#closed;
    this.#inspector = new LockInspector(this.#endpoints, closed);
    this.#elections = new ElectionCalls(this.#endpoints, closed);
    this.#records = new RecordCalls(this.#endpoints, closed);
    const unavailableRetries = options.unavailableRetries ?? 2;
    const settings = streamSettings(options);
    const sessionIdleMs =
      options.streamPerLock === true ? undefined : nonNegative('sessionIdleMs', options.sessionIdleMs ?? 250);
    this.#streams = new LockStreams(this.#endpoints, settings, sessionIdleMs);
    this.#attempts = new AcquireAttempts(this.#streams, this.#endpoints, unavailableRetries, closed);
  }

  /**
   * Waits for the lock and resolves once it is held.
   *
   * Rejects with `LockTimeoutError` when `waitTimeout` passes first; with the signal's reason when
   * `signal` aborts first; with `LockClientError` (its `code` a gRPC status) for anything else,
   * e.g. INVALID_ARGUMENT for a malformed name (checked before sending: such a request never
   * reaches the server). After a rejection nothing is left queued.
   */
  acquire(name: string, options: AcquireOptions = {}): Promise<Lock> {
    let request: LockRequest;
    try {
      request = lockRequest(name, options);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#attempts.acquire(request, options.signal);
  }

  /**
   * Takes several locks at once, all or none (2 to 16 distinct names, each a name or a
   * `{ name, mode, limit, weight }`): resolves with one Lock for the whole set, with a token per
   * lock in `tokens`. Multi-locks never deadlock each other, whatever their order or overlap,
   * and no part of a set is ever held alone. One `waitTimeout`, one release, one `lost`.
   * Rejects as `acquire` does; `UNIMPLEMENTED` from a server on the ZooKeeper addon client.
   */
  async acquireAll(
    locks: ReadonlyArray<string | LockSpec>,
    options: Omit<AcquireOptions, 'mode' | 'limit' | 'weight'> = {},
  ): Promise<Lock> {
    const specs = locks.map((lock) => (typeof lock === 'string' ? { name: lock } : lock));
    return this.#attempts.acquire(multiLockRequest(specs, options), options.signal);
  }

  /**
   * Takes the lock if it is free now, without queuing. Resolves with the held lock, or with
   * `null` when someone holds it in a conflicting mode or is queued ahead.
   */
  async tryAcquire(
    name: string,
    options: Omit<AcquireOptions, 'waitTimeout' | 'onQueued'> = {},
  ): Promise<Lock | null> {
    try {
      return await this.acquire(name, { ...options, waitTimeout: 0 });
    } catch (error) {
      if (error instanceof LockTimeoutError) return null;
      throw error;
    }
  }

  /**
   * Acquires the lock, runs `fn`, and always releases the lock, resolving with what `fn` returns.
   * `fn` gets `lock.lost` as its signal: pass it on to the work, which should stop when it
   * aborts. If the lock was lost while `fn` ran, rejects with `LockLostError` even when `fn`
   * succeeded, since the work was not protected all along.
   */
  async withLock<T>(
    name: string,
    options: AcquireOptions,
    fn: (signal: AbortSignal, lock: Lock) => Promise<T> | T,
  ): Promise<T> {
    const lock = await this.acquire(name, options);
    let result: T;
    try {
      result = await fn(lock.lost, lock);
    } catch (error) {
      await lock[Symbol.asyncDispose]();
      throw error;
    }
    await lock.release();
    return result;
  }

  /** Who holds `name` and who waits for it, in queue order (across every server on the back end). */
  describe(name: string): Promise<LockDescription> {
    return this.#inspector.describe(name);
  }

  /**
   * The state of `name` as `describe` reports it, now and after every change (WatchLock;
   * changes close together may come as one state), for `for await`. It ends cleanly when
   * `signal` aborts or the loop is left; it throws `LockClientError` if the watch fails (the
   * server shuts down: UNAVAILABLE).
   */
  watch(name: string, options: { signal?: AbortSignal } = {}): AsyncGenerator<LockDescription, void> {
    return this.#inspector.watch(name, options.signal);
  }

  /** A page of the locks that have holders or waiters, by name prefix. */
  list(options: { prefix?: string; pageSize?: number; pageToken?: string } = {}): Promise<LockPage> {
    return this.#inspector.list(options);
  }

  /** Whether `token` is held for `name` right now: for resources that check their callers. */
  checkToken(name: string, token: bigint): Promise<boolean> {
    return this.#inspector.checkToken(name, token);
  }

  /**
   * The guarded records of lock `name` as the holder whose fencing token is `token` writes them
   * (a Lock's `token`; a Leadership's `term`): small values under the lock's name that outlive
   * their writer, which only a current holder can write. Throws LockClientError
   * (INVALID_ARGUMENT) for a malformed name or token.
   *
   * ```ts
   * await using lock = await locks.acquire('jobs/nightly-export');
   * const records = locks.records(lock.name, lock.token);
   * const done = await records.get('last-batch');
   * await records.put('last-batch', String(Number(done ? Buffer.from(done.value) : 0) + 1));
   * ```
   */
  records(name: string, token: bigint): HolderRecords {
    return new HolderRecords(this.#records, name, token);
  }

  /** The guarded record `key` of lock `name` (anyone who may see the lock reads it); undefined: none. */
  getRecord(name: string, key: string): Promise<GuardedRecord | undefined> {
    return this.#records.get(name, key);
  }

  /**
   * Asks every holder of `name` to release it; with `forceAfter` (ms), takes it away from a
   * holder that has not by then. Resolves with how many holders were asked.
   */
  revoke(
    name: string,
    options: { reason?: string | undefined; forceAfter?: number | undefined } = {},
  ): Promise<number> {
    return this.#inspector.revoke(name, options.reason ?? '', options.forceAfter);
  }

  /**
   * Campaigns in election `name` with `value` (what observers and `leader()` show of this
   * candidate once it leads, e.g. its address; a string as UTF-8, at most 1024 bytes), and
   * resolves once it is elected, with its Leadership and term. Candidates are elected one at a
   * time, in the order they joined.
   *
   * Each campaign has a Campaign stream of its own (whatever `streamPerLock` says), held as an
   * Acquire stream holds a lock: resumed after a break within `resumeGraceMs` (the leadership is
   * in doubt meanwhile, then confirmed with the same term), kept alive by heartbeats, and failed
   * over between endpoints. Rejects as `acquire` does: `LockTimeoutError` when `waitTimeout`
   * passes first, the signal's reason when `signal` aborts first, `LockClientError` otherwise
   * (FAILED_PRECONDITION when `name` is a lock's, UNIMPLEMENTED from a server whose back end
   * keeps no election history). After a rejection nothing is left queued.
   */
  campaign(name: string, value: Uint8Array | string, options: CampaignOptions = {}): Promise<Leadership> {
    let request: LockRequest;
    try {
      request = candidateRequest(name, value, options);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#attempts
      .campaign(request, options.signal)
      .then((candidate) => new LeadershipHandle(candidate, this.#elections));
  }

  /**
   * The events of election `name`, for `for await`: without `fromTerm`, its current state first
   * (the current term, or `vacant`, also for an election nobody campaigned in), then every term
   * in order as it begins, the values its leader proclaims, and `vacant` when nobody leads. With
   * `fromTerm`, every term from that one on first (`history-gone` first if the history no longer
   * reaches back so far), then live. An observer that fell so far behind that terms it was not
   * told left the history is told `skipped`. It ends cleanly when `signal` aborts or the loop is
   * left; it throws `LockClientError` if the stream fails (the server shuts down: UNAVAILABLE;
   * observe again from the last term seen to miss nothing).
   */
  observe(
    name: string,
    options: { fromTerm?: bigint | undefined; signal?: AbortSignal | undefined } = {},
  ): AsyncGenerator<ElectionEvent, void> {
    return this.#elections.observe(name, options.fromTerm, options.signal);
  }

  /** Who leads election `name` now (every server on the back end says the same); undefined: nobody. */
  leader(name: string): Promise<ElectionLeader | undefined> {
    return this.#elections.leader(name);
  }

  /**
   * Replaces the value of the leader of `name` whose term is `term` (from any client: the
   * leader's own can use `leadership.proclaim`). Observers are told, and `leader()` shows it from
   * the moment it resolves. Rejects with `NotLeaderError` (FAILED_PRECONDITION) when `term` is
   * not the current leader's: nothing changed then.
   */
  proclaim(name: string, term: bigint, value: Uint8Array | string): Promise<void> {
    return this.#elections.proclaim(name, term, value);
  }

  /**
   * Ends the term `term` of election `name`, from any client: its leader is deposed (its `lost`
   * aborts, with ABORTED) before the next candidate is elected. Rejects with `NotLeaderError`
   * (FAILED_PRECONDITION) when `term` is not the current leader's: nothing changed then.
   */
  resign(name: string, term: bigint): Promise<void> {
    return this.#elections.resign(name, term);
  }

  /**
   * Closes the channels. Locks and leaderships still held over them are released by the server
   * (their `lost` fires); acquires and campaigns still waiting and later calls reject with
   * `LockClientClosedError` (FAILED_PRECONDITION).
   */
  close(): void {
    this.#closed = true;
    this.#streams.close();
    this.#endpoints.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}
