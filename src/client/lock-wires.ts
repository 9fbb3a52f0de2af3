import type { ClientDuplexStream } from '@grpc/grpc-js';
import type { Duration } from '../gen/google/protobuf/duration.js';
import type {
  AcquireRequest,
  AcquireResponse,
  SessionRequest,
  SessionResponse,
} from '../gen/lockstream/v1/lockstream.js';
import type { Endpoints } from './endpoints.js';
import { toDuration, wireRequest } from './lock.js';
import type { LockWire } from './lock-channel.js';
import type { LockHandle, RequestMessage } from './lock-handle.js';
import type { ResumableStream } from './resumable-stream.js';

/** What every stream of a LockClient asks for. */
export interface StreamSettings {
  /** ms the server keeps a request after its stream breaks, for a resume; 0: none. */
  readonly resumeGraceMs: number;
  /** ms between heartbeats in both directions; 0: none. */
  readonly heartbeatIntervalMs: number;
}

type Kind = SessionResponse['kind'];

/** What both wires keep: the client's endpoints, and the settings each new stream asks for. */
abstract class StreamSettingsWire {
  readonly heartbeatIntervalMs: number;
  readonly endpoints: Endpoints;
  protected readonly resumeGrace: Duration | undefined;
  protected readonly heartbeatInterval: Duration | undefined;

  constructor(endpoints: Endpoints, settings: StreamSettings) {
    this.endpoints = endpoints;
    this.heartbeatIntervalMs = settings.heartbeatIntervalMs;
    this.resumeGrace = optionalDuration(settings.resumeGraceMs);
    this.heartbeatInterval = optionalDuration(settings.heartbeatIntervalMs);
  }
}

/** The Session RPC: `open` first, then any number of requests, each named by its `request_id`. */
export class SessionWire extends StreamSettingsWire implements LockWire<SessionRequest, SessionResponse> {
  readonly heartbeat: SessionRequest = { kind: { $case: 'heartbeat', value: {} } };

  call(endpoint: number): ClientDuplexStream<SessionRequest, SessionResponse> {
    return this.endpoints.grpc(endpoint).session();
  }

  open(): SessionRequest {
    return {
      kind: {
        $case: 'open',
        value: { resumeGrace: this.resumeGrace, heartbeatInterval: this.heartbeatInterval },
      },
    };
  }

  resume(resumeToken: string): SessionRequest {
    return { kind: { $case: 'resume', value: { resumeToken, heartbeatInterval: this.heartbeatInterval } } };
  }

  send(
    stream: ResumableStream<SessionRequest, SessionResponse>,
    lock: LockHandle,
    message: RequestMessage,
  ): void {
    const requestId = lock.id;
    switch (message.kind) {
      case 'acquire':
        stream.write({
          kind: { $case: 'acquire', value: wireRequest(lock.request, requestId, undefined, undefined) },
        });
        return;
      case 'release':
        stream.write({ kind: { $case: 'release', value: { requestId } } });
        return;
      case 'cancel':
        stream.write({ kind: { $case: 'cancel', value: { requestId } } });
        return;
      case 'value':
        stream.write({ kind: { $case: 'setValue', value: { requestId, value: message.value } } });
        return;
      case 'downgrade':
        stream.write({ kind: { $case: 'downgrade', value: { requestId } } });
        return;
    }
  }

  requestIdOf(message: SessionResponse): number {
    return message.requestId;
  }

  kindOf(message: SessionResponse): Kind {
    return message.kind;
  }

  endsResumeReport(kind: Kind): boolean {
    return kind?.$case === 'resumed';
  }
}

/**
 * The Acquire RPC: a stream of one request, which `start` both opens and queues; its end is the
 * request's end. In the Session RPC's terms: `resumable` is `opened`, and a resumed stream's
 * report is its first `queued` or `acquired`.
 */
export class AcquireWire extends StreamSettingsWire implements LockWire<AcquireRequest, AcquireResponse> {
  readonly heartbeat: AcquireRequest = { kind: { $case: 'heartbeat', value: {} } };

  call(endpoint: number): ClientDuplexStream<AcquireRequest, AcquireResponse> {
    return this.endpoints.grpc(endpoint).acquire();
  }

  open(): undefined {
    // `start`, the request's own message, opens the stream.
    return undefined;
  }

  resume(resumeToken: string): AcquireRequest {
    return { kind: { $case: 'resume', value: { resumeToken, heartbeatInterval: this.heartbeatInterval } } };
  }

  send(
    stream: ResumableStream<AcquireRequest, AcquireResponse>,
    lock: LockHandle,
    message: RequestMessage,
  ): void {
    switch (message.kind) {
      case 'acquire':
        stream.write({
          kind: {
            $case: 'start',
            value: wireRequest(lock.request, 0, this.resumeGrace, this.heartbeatInterval),
          },
        });
        return;
      case 'cancel':
        // A cancelled call would look like a break and keep a resumable request for its grace:
        // `release` withdraws it at once.
        if (stream.resumable) this.#release(stream);
        else stream.cancel();
        return;
      case 'release':
        this.#release(stream);
        return;
      case 'value':
        stream.write({ kind: { $case: 'setValue', value: { value: message.value } } });
        return;
      case 'downgrade':
        stream.write(DOWNGRADE);
        return;
    }
  }

  /** The server releases the lock (or withdraws the request) and ends the call with OK. */
  #release(stream: ResumableStream<AcquireRequest, AcquireResponse>): void {
    stream.write(RELEASE);
    stream.halfClose();
  }

  requestIdOf(message: AcquireResponse): number {
    const kind = message.kind?.$case;
    return kind === 'resumable' || kind === 'heartbeat' ? 0 : 1;
  }

  kindOf(message: AcquireResponse): Kind {
    const kind = message.kind;
    return kind?.$case === 'resumable' ? { $case: 'opened', value: kind.value } : kind;
  }

  endsResumeReport(kind: Kind): boolean {
    return kind?.$case === 'queued' || kind?.$case === 'acquired';
  }
}

const RELEASE: AcquireRequest = { kind: { $case: 'release', value: {} } };
const DOWNGRADE: AcquireRequest = { kind: { $case: 'downgrade', value: {} } };

function optionalDuration(ms: number): Duration | undefined {
  return ms > 0 ? toDuration(ms) : undefined;
}
