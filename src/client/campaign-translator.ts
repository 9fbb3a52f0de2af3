/*
 * A Campaign call translated at the edge into a Session call of one request, as an Acquire call
 * is (acquire-translator.ts): a candidate is a lock request whose grant is its election.
 */
import type { CampaignRequest, CampaignResponse } from '../gen/lockstream/v1/election.js';
import type { SessionAcquire, SessionOpen, SessionResume } from '../gen/lockstream/v1/lockstream.js';
import { OneRequestCall, type OwnKind } from './acquire-translator.js';
import type { CallCarrier } from './session-call.js';

/**
 * The Campaign RPC, as a session of one request (request 1, as on an Acquire stream; see
 * OneRequestCall). Out: `start` carries the request's name, value, owner and wait (the
 * candidate mode is the RPC's own); `release` is `resign`. A candidate neither sets a value
 * nor downgrades (Proclaim is a call of its own). In: `elected` is `acquired` with the term as
 * the fencing token, `resigned` is `released`, `resign_requested` is `revoke_requested`, and
 * `queued`, `in_doubt` and `confirmed` are the same.
 */
export const campaignCall: CallCarrier = (clients, listener) =>
  new CampaignCall(clients.elections.campaign(), listener);

class CampaignCall extends OneRequestCall<CampaignRequest, CampaignResponse> {
  protected readonly heartbeat: CampaignRequest = { kind: { $case: 'heartbeat', value: {} } };
  protected readonly letGo: CampaignRequest = { kind: { $case: 'resign', value: {} } };

  protected start(acquire: SessionAcquire, open: SessionOpen | undefined): CampaignRequest {
    const start = {
      name: acquire.name,
      value: acquire.value,
      owner: acquire.owner,
      waitTimeout: acquire.waitTimeout,
      resumeGrace: open?.resumeGrace,
      heartbeatInterval: open?.heartbeatInterval,
    };
    return { kind: { $case: 'start', value: start } };
  }

  protected resume(resume: SessionResume): CampaignRequest {
    return { kind: { $case: 'resume', value: resume } };
  }

  protected own(kind: OwnKind): never {
    throw new Error(`INVARIANT: a candidate cannot ${kind.$case}: it is not a lock holder`);
  }

  protected news(kind: CampaignResponse['kind']): void {
    switch (kind?.$case) {
      case 'resumable':
        this.opened(kind.value);
        return;
      case 'heartbeat':
        this.listener.news(0, kind);
        return;
      case 'queued':
        this.report(kind);
        return;
      case 'elected':
        this.report({ $case: 'acquired', value: { fencingToken: kind.value.term, tokens: [] } });
        return;
      case 'resigned':
        this.tell({ $case: 'released', value: {} });
        return;
      case 'resignRequested':
        this.tell({ $case: 'revokeRequested', value: kind.value });
        return;
      case 'inDoubt':
      case 'confirmed':
      case undefined:
        this.tell(kind);
        return;
    }
  }
}
