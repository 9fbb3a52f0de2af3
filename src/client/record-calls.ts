/*
 * The RecordService's calls (guarded records): reads by anyone, writes as a lock's holder
 * (HolderRecords, bound to a name and a fencing token), and their failures in the SDK's terms.
 */
import { randomBytes } from 'node:crypto';
import { status as Status, type ServiceError } from '@grpc/grpc-js';
import type {
  DeleteRecordResponse,
  GetRecordResponse,
  PutRecordResponse,
  RecordServiceClient,
} from '../gen/lockstream/v1/records.js';
import { recordKeyProblem } from '../common/lock-name-rule.js';
import { RECORD_VALUE_MAX_BYTES } from '../common/limits.js';
import type { Endpoints } from './endpoints.js';
import { LockClientError, RevisionConflictError, TokenNotHeldError } from './errors.js';
import { checkLockName, checkTerm, invalidArgument } from './request-checks.js';
import { unaryCall } from './unary-call.js';

/** A guarded record as read: its value and revision (revisions start at 1 and only grow). */
export interface GuardedRecord {
  readonly value: Uint8Array;
  readonly revision: bigint;
}

/** A write's condition: the revision the record must be at (0n: it must not exist). */
export interface RecordWriteOptions {
  readonly expectedRevision?: bigint | undefined;
}

/**
 * The RecordService's calls. Each fails over between endpoints as the other unary calls do
 * (see unaryCall); a write carries a request id of its own, so that sending it again after
 * UNAVAILABLE makes it at most once. A write whose first try ended UNAVAILABLE and whose next
 * was refused may still have been made by the first: it rejects with UNAVAILABLE, outcome
 * unknown, rather than with the refusal.
 */
export class RecordCalls {
  readonly #endpoints: Endpoints;
  readonly #closed: () => boolean;

  constructor(endpoints: Endpoints, closed: () => boolean) {
    this.#endpoints = endpoints;
    this.#closed = closed;
  }

  async get(name: string, key: string): Promise<GuardedRecord | undefined> {
    checkRecordKey(name, key);
    const response = await this.#unary<GetRecordResponse>(name, undefined, (records, done) =>
      records.getRecord({ name, key }, done),
    );
    return response.found ? { value: response.value, revision: response.revision } : undefined;
  }

  async put(
    name: string,
    key: string,
    value: Uint8Array | string,
    token: bigint,
    options: RecordWriteOptions = {},
  ): Promise<bigint> {
    checkRecordKey(name, key);
    checkTerm(name, 'token', token);
    const bytes = typeof value === 'string' ? Buffer.from(value, 'utf8') : value;
    if (bytes.byteLength > RECORD_VALUE_MAX_BYTES)
      throw invalidArgument(
        name,
        `record value is ${bytes.byteLength} bytes; the limit is ${RECORD_VALUE_MAX_BYTES}`,
      );
    const { expectedRevision } = options;
    if (expectedRevision !== undefined) checkTerm(name, 'expectedRevision', expectedRevision);
    const requestId = randomBytes(16);
    const response = await this.#unary<PutRecordResponse>(name, token, (records, done) =>
      records.putRecord(
        { name, key, value: Buffer.from(bytes), fencingToken: token, expectedRevision, requestId },
        done,
      ),
    );
    return response.revision;
  }

  async delete(name: string, key: string, token: bigint, options: RecordWriteOptions = {}): Promise<boolean> {
    checkRecordKey(name, key);
    checkTerm(name, 'token', token);
    const { expectedRevision } = options;
    if (expectedRevision !== undefined) checkTerm(name, 'expectedRevision', expectedRevision);
    const response = await this.#unary<DeleteRecordResponse>(name, token, (records, done) =>
      records.deleteRecord({ name, key, fencingToken: token, expectedRevision }, done),
    );
    return response.deleted;
  }

  /** A unary call about `name`'s records; with `token`, a write as that token's holder. */
  #unary<T>(
    name: string,
    token: bigint | undefined,
    call: (records: RecordServiceClient, done: (error: ServiceError | null, value?: T) => void) => unknown,
  ): Promise<T> {
    let unavailableBefore = false;
    const failure = (refusal: ServiceError): LockClientError => {
      const { code, details } = refusal;
      if (token !== undefined && unavailableBefore && code !== Status.UNAVAILABLE)
        return new LockClientError(
          name,
          Status.UNAVAILABLE,
          `the write's outcome is unknown: a try ended UNAVAILABLE, and the next was refused (${Status[code]}: ${details})`,
          { cause: refusal },
        );
      if (token !== undefined && code === Status.FAILED_PRECONDITION)
        return new TokenNotHeldError(name, token, details, { cause: refusal });
      if (code === Status.ABORTED) return new RevisionConflictError(name, code, details, { cause: refusal });
      return new LockClientError(name, code, details, { cause: refusal });
    };
    return unaryCall(this.#endpoints, { name, closed: this.#closed, failure }, (clients, done) =>
      call(clients.records, (error, value) => {
        if (error?.code === Status.UNAVAILABLE) unavailableBefore = true;
        done(error, value);
      }),
    );
  }
}

/**
 * The records a lock's holder writes, bound to the lock's name and its fencing token (an
 * election's leader: its term). Every write is refused with TokenNotHeldError once the hold has
 * ended, whether or not this client has heard of it yet.
 */
export class HolderRecords {
  readonly name: string;
  readonly token: bigint;
  readonly #calls: RecordCalls;

  constructor(calls: RecordCalls, name: string, token: bigint) {
    checkLockName(name);
    checkTerm(name, 'token', token);
    this.#calls = calls;
    this.name = name;
    this.token = token;
  }

  /** The record `key`, or undefined when there is none. */
  get(key: string): Promise<GuardedRecord | undefined> {
    return this.#calls.get(this.name, key);
  }

  /**
   * Writes `value` (a string as UTF-8) under `key`, only while this token holds the lock, and
   * resolves with the record's new revision. With `expectedRevision`, only if the record is at
   * that revision (0n: only a new record), else RevisionConflictError.
   */
  put(key: string, value: Uint8Array | string, options: RecordWriteOptions = {}): Promise<bigint> {
    return this.#calls.put(this.name, key, value, this.token, options);
  }

  /** Deletes the record `key` (false if there was none), with the same checks as `put`. */
  delete(key: string, options: RecordWriteOptions = {}): Promise<boolean> {
    return this.#calls.delete(this.name, key, this.token, options);
  }

  /**
   * Reads the record `key`, writes what `change` makes of it (undefined: there is none), and
   * resolves with the record as written: a read-modify-write that loses no update. The write
   * is conditioned on the revision read, so a write by anyone in between (another holder of a
   * semaphore, say) makes it read and change again; and it is made only while this token
   * holds the lock, so a holder that lost the lock changes nothing (TokenNotHeldError).
   */
  async update(
    key: string,
    change: (current: GuardedRecord | undefined) => Uint8Array | string,
  ): Promise<GuardedRecord> {
    for (;;) {
      const current = await this.get(key);
      const next = change(current);
      const value = typeof next === 'string' ? Buffer.from(next, 'utf8') : next;
      try {
        const revision = await this.put(key, value, { expectedRevision: current?.revision ?? 0n });
        return { value, revision };
      } catch (error) {
        if (!(error instanceof RevisionConflictError)) throw error;
      }
    }
  }
}

function checkRecordKey(name: string, key: unknown): asserts key is string {
  checkLockName(name);
  if (typeof key !== 'string') throw invalidArgument(name, `record key must be a string, not ${typeof key}`);
  const problem = recordKeyProblem(key);
  if (problem !== undefined) throw invalidArgument(name, `invalid record key: ${problem}`);
}
