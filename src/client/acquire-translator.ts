/*
 * An Acquire call translated at the edge into a Session call of one request: Session requests
 * become Acquire messages on the way out, Acquire news becomes Session news on the way in.
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
} from '../gen/lockstream/v1/lockstream.js';
import { CarriedCall, type CallCarrier, type CallListener } from './session-call.js';

/**
 * The id of an Acquire stream's one request, as the Session news says it: the first a stream's
 * requests are given (an Acquire stream carries one request and is never reused).
 */
export const ACQUIRE_REQUEST_ID = 1;

/**
 * The Acquire RPC, as a session of one request. Out: `open` is kept, and goes out with the
 * request's `acquire` as `start`; `resume` and `heartbeat` are the same on both; `release` is
 * `release` and the half-close the server then expects; `cancel` is a `release` once the
 * server can resume the request (a cancelled call would look like a break and keep it for its
 * grace), else a cancelled call; `setValue` and `downgrade` lose their request id. In:
 * `resumable` is the stream's `opened`, `heartbeat` is the stream's, anything else is news of
 * request 1; on a resumed call the first `queued` or `acquired` is the whole report, so
 * `resumed` follows it. The call's status is the request's end, as a Session stream's status is
 * the end of all its requests.
 */
export const acquireCall: CallCarrier = (clients, listener) =>
  new AcquireCall(clients.locks.acquire(), listener);

class AcquireCall extends CarriedCall<AcquireRequest, AcquireResponse> {
  /** The stream's `open`: what it asks for goes out in `start`. */
  #open: SessionOpen | undefined;
  /** Whether the server can resume the request: it said `resumable`, or this call resumes it. */
  #resumable = false;
  /** A resume was sent and the server has not reported the request yet. */
  #reporting = false;

  constructor(call: ClientDuplexStream<AcquireRequest, AcquireResponse>, listener: CallListener) {
    super(call, listener);
    call.on('data', (message: AcquireResponse) => this.#news(message.kind));
  }

  write(message: SessionRequest): void {
    if (this.closed) return;
    const kind = message.kind;
    switch (kind?.$case) {
      case 'heartbeat':
        this.call.write(HEARTBEAT);
        return;
      case 'open':
        this.#open = kind.value;
        return;
      case 'acquire':
        this.call.write({ kind: { $case: 'start', value: start(kind.value, this.#open) } });
        return;
      case 'resume':
        this.#resumable = true;
        this.#reporting = true;
        this.call.write({ kind });
        return;
      case 'release':
        this.#release();
        return;
      case 'cancel':
        if (this.#resumable) this.#release();
        else this.cancel();
        return;
      case 'setValue':
        this.call.write({ kind });
        return;
      case 'downgrade':
        this.call.write(DOWNGRADE);
        return;
      case undefined:
        return;
    }
  }

  /** The server releases the lock (or withdraws the request) and ends the call with OK. */
  #release(): void {
    this.call.write(RELEASE);
    this.end();
  }

  #news(kind: AcquireResponse['kind']): void {
    const listener = this.listener;
    switch (kind?.$case) {
      case 'resumable':
        this.#resumable = kind.value.resumeToken !== '';
        listener.news(0, { $case: 'opened', value: kind.value });
        return;
      case 'heartbeat':
        listener.news(0, kind);
        return;
      case 'queued':
      case 'acquired':
        listener.news(ACQUIRE_REQUEST_ID, kind);
        if (this.#reporting) {
          this.#reporting = false;
          listener.news(0, RESUMED);
        }
        return;
      case 'released':
      case 'inDoubt':
      case 'confirmed':
      case 'revokeRequested':
      case 'valueSet':
      case 'downgraded':
      case undefined:
        // Undefined: a kind this client does not know (a newer server's), passed on to be ignored.
        listener.news(ACQUIRE_REQUEST_ID, kind);
        return;
    }
  }
}

/** `start`: the request's `acquire`, with what the stream's `open` asks for. */
function start(acquire: SessionAcquire, open: SessionOpen | undefined): AcquireStart {
  if (acquire.requestId !== ACQUIRE_REQUEST_ID) {
    throw new Error(
      `INVARIANT: an Acquire stream's request is ${ACQUIRE_REQUEST_ID}, not ${acquire.requestId}`,
    );
  }
  return {
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
}

const HEARTBEAT: AcquireRequest = { kind: { $case: 'heartbeat', value: {} } };
const RELEASE: AcquireRequest = { kind: { $case: 'release', value: {} } };
const DOWNGRADE: AcquireRequest = { kind: { $case: 'downgrade', value: {} } };
const RESUMED: SessionResponse['kind'] = { $case: 'resumed', value: {} };
