/*
 * A Campaign call translated at the edge into a Session call of one request, as an Acquire call
 * is (acquire-translator.ts): a candidate is a lock request whose grant is its election.
 */
import type { ClientDuplexStream } from '@grpc/grpc-js';
import type { CampaignRequest, CampaignResponse, CampaignStart } from '../gen/lockstream/v1/election.js';
import type {
  SessionAcquire,
  SessionOpen,
  SessionRequest,
  SessionResponse,
} from '../gen/lockstream/v1/lockstream.js';
import { ACQUIRE_REQUEST_ID } from './acquire-translator.js';
import { CarriedCall, type CallCarrier, type CallListener } from './session-call.js';

/**
 * The Campaign RPC, as a session of one request (request 1, as on an Acquire stream). Out:
 * `open` is kept, and goes out with the request's `acquire` as `start` (its name, value, owner
 * and wait; the candidate mode is the RPC's own); `resume` and `heartbeat` are the same on both;
 * `release` is `resign` and the half-close the server then expects; `cancel` is a `resign` once
 * the server can resume the candidate (a cancelled call would look like a break and keep it for
 * its grace), else a cancelled call. A candidate neither sets a value nor downgrades (Proclaim
 * is a call of its own). In: `resumable` is the stream's `opened`, `heartbeat` is the stream's;
 * `elected` is `acquired` with the term as the fencing token, `resigned` is `released`,
 * `resign_requested` is `revoke_requested`, and `queued`, `in_doubt` and `confirmed` are the
 * same, all news of request 1; on a resumed call the first `queued` or `elected` is the whole
 * report, so `resumed` follows it. The call's status is the request's end.
 */
export const campaignCall: CallCarrier = (clients, listener) =>
  new CampaignCall(clients.elections.campaign(), listener);

class CampaignCall extends CarriedCall<CampaignRequest, CampaignResponse> {
  /** The stream's `open`: what it asks for goes out in `start`. */
  #open: SessionOpen | undefined;
  /** Whether the server can resume the candidate: it said `resumable`, or this call resumes it. */
  #resumable = false;
  /** A resume was sent and the server has not reported the candidate yet. */
  #reporting = false;

  constructor(call: ClientDuplexStream<CampaignRequest, CampaignResponse>, listener: CallListener) {
    super(call, listener);
    call.on('data', (message: CampaignResponse) => this.#news(message.kind));
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
        this.#resign();
        return;
      case 'cancel':
        if (this.#resumable) this.#resign();
        else this.cancel();
        return;
      case 'setValue':
      case 'downgrade':
        throw new Error(`INVARIANT: a candidate cannot ${kind.$case}: it is not a lock holder`);
      case undefined:
        return;
    }
  }

  /** The server ends the term (or withdraws the candidate) and ends the call. */
  #resign(): void {
    this.call.write(RESIGN);
    this.end();
  }

  #news(kind: CampaignResponse['kind']): void {
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
        this.#report(kind);
        return;
      case 'elected':
        this.#report({ $case: 'acquired', value: { fencingToken: kind.value.term, tokens: [] } });
        return;
      case 'resigned':
        listener.news(ACQUIRE_REQUEST_ID, { $case: 'released', value: {} });
        return;
      case 'resignRequested':
        listener.news(ACQUIRE_REQUEST_ID, { $case: 'revokeRequested', value: kind.value });
        return;
      case 'inDoubt':
      case 'confirmed':
      case undefined:
        // Undefined: a kind this client does not know (a newer server's), passed on to be ignored.
        listener.news(ACQUIRE_REQUEST_ID, kind);
        return;
    }
  }

  /** Where the candidate stands (`queued` or `acquired`): after a resume, the whole report. */
  #report(kind: SessionResponse['kind']): void {
    this.listener.news(ACQUIRE_REQUEST_ID, kind);
    if (this.#reporting) {
      this.#reporting = false;
      this.listener.news(0, RESUMED);
    }
  }
}

/** `start`: the request's `acquire`, as a candidate, with what the stream's `open` asks for. */
function start(acquire: SessionAcquire, open: SessionOpen | undefined): CampaignStart {
  if (acquire.requestId !== ACQUIRE_REQUEST_ID) {
    throw new Error(
      `INVARIANT: a Campaign stream's request is ${ACQUIRE_REQUEST_ID}, not ${acquire.requestId}`,
    );
  }
  return {
    name: acquire.name,
    value: acquire.value,
    owner: acquire.owner,
    waitTimeout: acquire.waitTimeout,
    resumeGrace: open?.resumeGrace,
    heartbeatInterval: open?.heartbeatInterval,
  };
}

const HEARTBEAT: CampaignRequest = { kind: { $case: 'heartbeat', value: {} } };
const RESIGN: CampaignRequest = { kind: { $case: 'resign', value: {} } };
const RESUMED: SessionResponse['kind'] = { $case: 'resumed', value: {} };
