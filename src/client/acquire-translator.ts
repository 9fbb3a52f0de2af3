/*
 * An Acquire call translated at the edge into a Session call of one request: Session requests
 * become Acquire messages on the way out, Acquire news becomes Session news on the way in.
 * A Campaign call is translated the same way (campaign-translator.ts): both are a OneRequestCall.
 */
import type { ClientDuplexStream } from '@grpc/grpc-js';
import type {
  AcquireRequest,
  AcquireResponse,
  AcquireStart,
  SessionAcquire,
  SessionOpen,
  SessionRequest,
  SessionResponse,
  SessionResume,
  SessionOpened,
} from '../gen/lockstream/v1/lockstream.js';
import { CarriedCall, type CallCarrier, type CallListener } from './session-call.js';

/**
 * The id of an Acquire stream's one request, as the Session news says it: the first a stream's
 * requests are given (an Acquire stream carries one request and is never reused).
 */
export const ACQUIRE_REQUEST_ID = 1;

/** What a Session stream asks of its one request that a one-request RPC says its own way. */
export type OwnKind = Extract<NonNullable<SessionRequest['kind']>, { $case: 'setValue' | 'downgrade' }>;

/**
 * An RPC whose stream carries one request (Acquire, Campaign), as a session of that request.
 * Out: `open` is kept, and goes out with the request's `acquire` as the RPC's `start`;
 * `resume` and `heartbeat` are the same on every such RPC; `release` is the RPC's way to let
 * go and the half-close the server then expects; `cancel` is that way too once the server can
 * resume the request (a cancelled call would look like a break and keep it for its grace),
 * else a cancelled call. In: `resumable` is the stream's `opened`, `heartbeat` is the
 * stream's, anything else is news of request 1; on a resumed call the first `queued` or grant
 * is the whole report, so `resumed` follows it. The call's status is the request's end, as a
 * Session stream's status is the end of all its requests.
 */
export abstract class OneRequestCall<Req, Res extends { kind?: unknown }> extends CarriedCall<Req, Res> {
  /** The stream's `open`: what it asks for goes out in `start`. */
  #open: SessionOpen | undefined;
  /** Whether the server can resume the request: it said `resumable`, or this call resumes it. */
  #resumable = false;
  /** A resume was sent and the server has not reported the request yet. */
  #reporting = false;

  constructor(call: ClientDuplexStream<Req, Res>, listener: CallListener) {
    super(call, listener);
    call.on('data', (message: Res) => this.news(message.kind as Res['kind']));
  }

  /** The RPC's `start`: the request's `acquire`, with what the stream's `open` asks for. */
  protected abstract start(acquire: SessionAcquire, open: SessionOpen | undefined): Req;
  protected abstract resume(resume: SessionResume): Req;
  protected abstract readonly heartbeat: Req;
  /** The RPC's way to let its request go (`release`, `resign`). */
  protected abstract readonly letGo: Req;
  /** A Session request this RPC says its own way (or cannot). */
  protected abstract own(kind: OwnKind): void;
  /** The RPC's news, told to the listener through `opened`, `report` and `tell`. */
  protected abstract news(kind: Res['kind']): void;

  write(message: SessionRequest): void {
    if (this.closed) return;
    const kind = message.kind;
    switch (kind?.$case) {
      case 'heartbeat':
        this.call.write(this.heartbeat);
        return;
      case 'open':
        this.#open = kind.value;
        return;
      case 'acquire':
        if (kind.value.requestId !== ACQUIRE_REQUEST_ID) {
          throw new Error(
            `INVARIANT: a one-request stream's request is ${ACQUIRE_REQUEST_ID}, not ${kind.value.requestId}`,
          );
        }
        this.call.write(this.start(kind.value, this.#open));
        return;
      case 'resume':
        this.#resumable = true;
        this.#reporting = true;
        this.call.write(this.resume(kind.value));
        return;
      case 'release':
        this.#letGo();
        return;
      case 'cancel':
        if (this.#resumable) this.#letGo();
        else this.cancel();
        return;
      case 'setValue':
      case 'downgrade':
        this.own(kind);
        return;
      case undefined:
        return;
    }
  }

  /** The server releases the request (or withdraws it) and ends the call with OK. */
  #letGo(): void {
    this.call.write(this.letGo);
    this.end();
  }

  /** `resumable`: the stream's `opened`. */
  protected opened(value: SessionOpened): void {
    this.#resumable = value.resumeToken !== '';
    this.listener.news(0, { $case: 'opened', value });
  }

  /** Where the request stands (`queued` or `acquired`): after a resume, the whole report. */
  protected report(kind: SessionResponse['kind']): void {
    this.listener.news(ACQUIRE_REQUEST_ID, kind);
    if (this.#reporting) {
      this.#reporting = false;
      this.listener.news(0, RESUMED);
    }
  }

  /** News of the request (undefined: a kind this client does not know, a newer server's, to be ignored). */
  protected tell(kind: SessionResponse['kind']): void {
    this.listener.news(ACQUIRE_REQUEST_ID, kind);
  }
}

/** The Acquire RPC, as a session of one request: `release` is `release`; `setValue` and `downgrade` lose their request id. */
export const acquireCall: CallCarrier = (clients, listener) =>
  new AcquireCall(clients.locks.acquire(), listener);

class AcquireCall extends OneRequestCall<AcquireRequest, AcquireResponse> {
  protected readonly heartbeat: AcquireRequest = { kind: { $case: 'heartbeat', value: {} } };
  protected readonly letGo: AcquireRequest = { kind: { $case: 'release', value: {} } };

  protected start(acquire: SessionAcquire, open: SessionOpen | undefined): AcquireRequest {
    const start: AcquireStart = {
      name: acquire.name,
      mode: acquire.mode,
      waitTimeout: acquire.waitTimeout,
      owner: acquire.owner,
      resumeGrace: open?.resumeGrace,
      heartbeatInterval: open?.heartbeatInterval,
      value: acquire.value,
      limit: acquire.limit,
      weight: acquire.weight,
      locks: acquire.locks,
    };
    return { kind: { $case: 'start', value: start } };
  }

  protected resume(resume: SessionResume): AcquireRequest {
    return { kind: { $case: 'resume', value: resume } };
  }

  protected own(kind: OwnKind): void {
    this.call.write(kind.$case === 'setValue' ? { kind } : DOWNGRADE);
  }

  protected news(kind: AcquireResponse['kind']): void {
    switch (kind?.$case) {
      case 'resumable':
        this.opened(kind.value);
        return;
      case 'heartbeat':
        this.listener.news(0, kind);
        return;
      case 'queued':
      case 'acquired':
        this.report(kind);
        return;
      case 'released':
      case 'inDoubt':
      case 'confirmed':
      case 'revokeRequested':
      case 'valueSet':
      case 'downgraded':
      case undefined:
        this.tell(kind);
        return;
    }
  }
}

const DOWNGRADE: AcquireRequest = { kind: { $case: 'downgrade', value: {} } };
const RESUMED: SessionResponse['kind'] = { $case: 'resumed', value: {} };
