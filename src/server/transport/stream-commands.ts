/*
 * A client's message carried out on its lock stream: the StreamCommand its Wire read it into,
 * done on the stream (opening or resuming its session) or on its session (a request queued once
 * it is within the server's size limit, the caller may take its locks and the session has room
 * for it; released, cancelled, given a value, downgraded).
 */
import type { AcquireRequest, LockSession, RequestNews } from '../engine/index.js';
import { LockError } from '../lock-error.js';
import type { Caller } from '../security/gate.js';
import type { AcquireCommand, StreamCommand, WireStream } from './wire.js';

/** What carrying out a command needs of its stream (a LockStream), beyond what its Wire sees. */
export interface CommandedStream<Req, Res> extends WireStream<Req, Res> {
  /** The admitted caller; undefined only if admission failed (the stream is then over). */
  readonly caller: Caller | undefined;
  /** The stream's session, once it is open. */
  readonly session: LockSession | undefined;
  /** Opens a session for the stream, and tells the client so. */
  open(graceMs: number, heartbeatIntervalMs: number | undefined): LockSession;
  /** Resumes the session of `resumeToken` on the stream. */
  resume(resumeToken: string, heartbeatIntervalMs: number | undefined): void;
  /** Tells the client the news of request `id` (a refusal: `ended`, with its error). */
  tell(id: number, request: AcquireRequest | undefined, news: RequestNews): void | Promise<void>;
}

/** Does what a client's message asks (its Wire read it into `command`); throwing ends the call. */
export function carryOut<Req, Res>(stream: CommandedStream<Req, Res>, command: StreamCommand): void {
  switch (command.kind) {
    case 'open':
      stream.open(command.graceMs, command.heartbeatIntervalMs);
      return;
    case 'resume':
      stream.resume(command.resumeToken, command.heartbeatIntervalMs);
      return;
    case 'acquire':
      acquire(stream, command);
      return;
    case 'refused':
      void stream.tell(command.id, undefined, { kind: 'ended', error: command.error });
      return;
    case 'release':
      stream.session!.release(command.id);
      return;
    case 'cancel':
      stream.session!.cancel(command.id);
      return;
    case 'set-value':
      stream.session!.setValue(command.id, command.value, command.early);
      return;
    case 'downgrade':
      stream.session!.downgrade(command.id, command.early);
      return;
    case 'heartbeat':
      return;
  }
}

/**
 * Queues the request `command` carries once it is within the server's size limit and the
 * caller may take its locks (and, on a Session stream, the session has room for it). An
 * Acquire stream's `start` opens its session only then, and is refused by ending the call; a
 * Session stream's `acquire` is refused alone, and the session goes on.
 */
function acquire<Req, Res>(
  stream: CommandedStream<Req, Res>,
  { id, asked, message, what, opens, maxRequests }: AcquireCommand,
): void {
  try {
    stream.options.requestSize.check(message, what);
    const request = admitted(stream.caller, asked);
    if (opens) {
      // The stream's log lines name its request from now on (see Wire.logBindings).
      stream.loggedRequest = request;
      stream.open(opens.graceMs, opens.heartbeatIntervalMs).acquire(id, request);
      return;
    }
    const session = stream.session!;
    if (maxRequests !== undefined && session.size >= maxRequests) {
      throw new LockError(
        'RESOURCE_EXHAUSTED',
        `lock "${asked.name}": this session has ${session.size} requests; the server allows ${maxRequests}`,
      );
    }
    session.acquire(id, request);
  } catch (error) {
    // An Acquire stream's `start` is refused by ending the call (see LockStream#onData).
    if (opens) throw error;
    void stream.tell(id, undefined, { kind: 'ended', error });
  }
}

/** The caller's request, checked against the access policy; a caller naming no owner is recorded as itself. */
function admitted(caller: Caller | undefined, asked: AcquireRequest): AcquireRequest {
  for (const target of asked.locks ?? [asked]) caller?.checkAcquire(target.name, target.mode);
  return asked.owner === '' && caller?.name ? { ...asked, owner: caller.name } : asked;
}
