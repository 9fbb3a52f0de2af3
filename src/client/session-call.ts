/*
 * One gRPC call as the SDK's lock streams see it, whichever RPC carries it: Session requests
 * out, Session news in; here also the Session RPC's own call, which needs no translation.
 */
import type { ClientDuplexStream, Metadata, status as Status } from '@grpc/grpc-js';
import type { SessionRequest, SessionResponse } from '../gen/lockstream/v1/lockstream.js';
import type { EndpointClients } from './endpoints.js';

/** How a stream or a request ended: a gRPC status (the client's own, for a stream it gave up). */
export interface EndStatus {
  readonly code: Status;
  readonly details: string;
}

/** How a call ended, with the server's trailers. */
export type CallStatus = EndStatus & { readonly metadata?: Metadata };

/** What a call tells the stream it serves. */
export interface CallListener {
  /**
   * The server said `kind` about request `requestId` (0: about the stream itself), in the
   * Session RPC's terms.
   */
  news(requestId: number, kind: SessionResponse['kind']): void;
  /** The call was half-closed or cancelled: nothing more is written on it. */
  closed(): void;
  /** The call ended with `status`. */
  status(status: CallStatus): void;
}

/** A call that takes Session requests; once closed, whatever is written is dropped. */
export interface LockCall {
  write(message: SessionRequest): void;
  /** Half-closes the call; its status still comes (it settles what the call carried). */
  end(): void;
  /** Cancels the call; its status still comes. */
  cancel(): void;
}

/** Starts a call on an endpoint's `clients` that reports to `listener`: the RPC the streams are carried on. */
export type CallCarrier = (clients: EndpointClients, listener: CallListener) => LockCall;

/** The Session RPC: its messages are the SDK's own. */
export const sessionCall: CallCarrier = (clients, listener) =>
  new SessionCall(clients.locks.session(), listener);

/**
 * What every call does alike, whichever RPC it is: reports its status, and is closed once, by a
 * half-close or a cancel, telling its listener so; after that whatever is written is dropped.
 */
export abstract class CarriedCall<Req, Res> implements LockCall {
  protected readonly call: ClientDuplexStream<Req, Res>;
  protected readonly listener: CallListener;
  protected closed = false;

  constructor(call: ClientDuplexStream<Req, Res>, listener: CallListener) {
    this.call = call;
    this.listener = listener;
    call.on('status', (status: CallStatus) => listener.status(status));
    // Every failure also arrives as the status; without a listener grpc-js would throw it.
    call.on('error', ignore);
  }

  abstract write(message: SessionRequest): void;

  end(): void {
    if (this.closed) return;
    this.closed = true;
    this.listener.closed();
    this.call.end();
  }

  cancel(): void {
    this.closed = true;
    this.listener.closed();
    this.call.cancel();
  }
}

class SessionCall extends CarriedCall<SessionRequest, SessionResponse> {
  constructor(call: ClientDuplexStream<SessionRequest, SessionResponse>, listener: CallListener) {
    super(call, listener);
    call.on('data', (message: SessionResponse) => listener.news(message.requestId, message.kind));
  }

  write(message: SessionRequest): void {
    if (!this.closed) this.call.write(message);
  }
}

export function ignore(): void {}
