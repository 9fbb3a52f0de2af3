/*
 * What a LockClient's lock streams open with: its endpoints, the RPC that carries them, and
 * the Session messages that open, resume and keep alive each stream, from the client's settings.
 */
import type { Duration } from '../gen/google/protobuf/duration.js';
import type { SessionRequest } from '../gen/lockstream/v1/lockstream.js';
import type { Endpoints } from './endpoints.js';
import { toDuration } from './wire-values.js';
import type { StreamOpening } from './resumable-stream.js';
import type { CallCarrier, CallListener, LockCall } from './session-call.js';

/** What every stream of a LockClient asks for. */
export interface StreamSettings {
  /** ms the server keeps a request after its stream breaks, for a resume; 0: none. */
  readonly resumeGraceMs: number;
  /** ms between heartbeats in both directions; 0: none. */
  readonly heartbeatIntervalMs: number;
}

/** The streams of one LockClient on one RPC (`carrier`): the Session RPC, or Acquire translated. */
export class LockStreamOpening implements StreamOpening {
  readonly endpoints: Endpoints;
  readonly heartbeatIntervalMs: number;
  readonly open: SessionRequest;
  readonly heartbeat: SessionRequest = HEARTBEAT;
  readonly #heartbeatInterval: Duration | undefined;
  readonly #carrier: CallCarrier;

  constructor(endpoints: Endpoints, settings: StreamSettings, carrier: CallCarrier) {
    this.endpoints = endpoints;
    this.#carrier = carrier;
    this.heartbeatIntervalMs = settings.heartbeatIntervalMs;
    this.#heartbeatInterval = optionalDuration(settings.heartbeatIntervalMs);
    this.open = {
      kind: {
        $case: 'open',
        value: {
          resumeGrace: optionalDuration(settings.resumeGraceMs),
          heartbeatInterval: this.#heartbeatInterval,
        },
      },
    };
  }

  call(endpoint: number, listener: CallListener): LockCall {
    return this.#carrier(this.endpoints.clients(endpoint), listener);
  }

  resume(resumeToken: string): SessionRequest {
    return { kind: { $case: 'resume', value: { resumeToken, heartbeatInterval: this.#heartbeatInterval } } };
  }
}

const HEARTBEAT: SessionRequest = { kind: { $case: 'heartbeat', value: {} } };

function optionalDuration(ms: number): Duration | undefined {
  return ms > 0 ? toDuration(ms) : undefined;
}
