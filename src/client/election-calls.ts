/*
 * The ElectionService's calls other than Campaign (Observe, Leader, Proclaim, Resign), and their
 * answers in the SDK's terms.
 */
import { status as Status, type ServiceError } from '@grpc/grpc-js';
import type {
  ElectionServiceClient,
  ElectionTerm,
  LeaderResponse,
  ObserveResponse,
  ProclaimResponse,
  ResignResponse,
} from '../gen/lockstream/v1/election.js';
import { publishedValue } from './acquire-options.js';
import type { ElectionEvent, ElectionLeader } from './election.js';
import type { Endpoints } from './endpoints.js';
import { LockClientClosedError, LockClientError, NotLeaderError } from './errors.js';
import { checkLockName, checkTerm } from './request-checks.js';
import { serverStream, unaryCall } from './unary-call.js';

/**
 * The ElectionService's calls about an election rather than of a candidate: observe, leader,
 * proclaim and resign. Each turns a failure into a `LockClientError` (a term that is not the
 * current leader's: `NotLeaderError`); `closed` says whether the client was closed (then every
 * call rejects with LockClientClosedError). Unary calls fail over between endpoints as the lock
 * inspection calls do (see unaryCall); an observer is one stream, on the current endpoint.
 */
export class ElectionCalls {
  readonly #endpoints: Endpoints;
  readonly #closed: () => boolean;

  constructor(endpoints: Endpoints, closed: () => boolean) {
    this.#endpoints = endpoints;
    this.#closed = closed;
  }

  async *observe(
    name: string,
    fromTerm: bigint | undefined,
    signal: AbortSignal | undefined,
  ): AsyncGenerator<ElectionEvent, void> {
    if (this.#closed()) throw new LockClientClosedError(name);
    checkLockName(name);
    if (fromTerm !== undefined) checkTerm(name, 'fromTerm', fromTerm);
    // After UNAVAILABLE the caller observes again (from the last term it saw): on the next endpoint.
    yield* serverStream(
      this.#endpoints,
      name,
      signal,
      (clients) => clients.elections.observe({ name, fromTerm }),
      (response: ObserveResponse) => fromWireEvent(response.kind),
    );
  }

  async leader(name: string): Promise<ElectionLeader | undefined> {
    checkLockName(name);
    let response: LeaderResponse;
    try {
      response = await this.#unary<LeaderResponse>(name, (elections, done) =>
        elections.leader({ name }, done),
      );
    } catch (error) {
      // Nobody leads (or nobody ever campaigned): not an error.
      if (error instanceof LockClientError && error.code === Status.NOT_FOUND) return undefined;
      throw error;
    }
    return response.leader && fromWireTerm(response.leader);
  }

  async proclaim(name: string, term: bigint, value: Uint8Array | string): Promise<void> {
    checkLockName(name);
    checkTerm(name, 'term', term);
    const bytes = publishedValue(name, value);
    await this.#unary<ProclaimResponse>(
      name,
      (elections, done) => elections.proclaim({ name, term, value: bytes }, done),
      term,
    );
  }

  async resign(name: string, term: bigint): Promise<void> {
    checkLockName(name);
    checkTerm(name, 'term', term);
    await this.#unary<ResignResponse>(
      name,
      (elections, done) => elections.resign({ name, term }, done),
      term,
    );
  }

  /** A unary call about `name`; with `term`, FAILED_PRECONDITION says the term is not the leader's. */
  #unary<T>(
    name: string,
    call: (
      elections: ElectionServiceClient,
      done: (error: ServiceError | null, value?: T) => void,
    ) => unknown,
    term?: bigint,
  ): Promise<T> {
    const failure = (refusal: ServiceError): LockClientError =>
      term !== undefined && refusal.code === Status.FAILED_PRECONDITION
        ? new NotLeaderError(name, term, refusal.details, { cause: refusal })
        : new LockClientError(name, refusal.code, refusal.details, { cause: refusal });
    return unaryCall(this.#endpoints, { name, closed: this.#closed, failure }, (clients, done) =>
      call(clients.elections, done),
    );
  }
}

/** A term from the wire. */
function fromWireTerm(term: ElectionTerm): ElectionLeader {
  return { term: term.term, value: term.value, owner: term.owner, electedAt: term.electedAt };
}

/** An event from the wire; undefined for a kind this client does not know (a newer server's). */
function fromWireEvent(kind: ObserveResponse['kind']): ElectionEvent | undefined {
  switch (kind?.$case) {
    case 'term':
      return { kind: 'term', ...fromWireTerm(kind.value) };
    case 'proclaimed':
      return { kind: 'proclaimed', term: kind.value.term, value: kind.value.value };
    case 'vacant':
      return { kind: 'vacant', afterTerm: kind.value.afterTerm };
    case 'historyGone':
      return { kind: 'history-gone', firstTerm: kind.value.firstTerm };
    case 'skipped':
      return { kind: 'skipped', firstTerm: kind.value.firstTerm };
    case undefined:
      return undefined;
  }
}
