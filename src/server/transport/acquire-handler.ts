import { Metadata, status as grpcStatus, type ServerDuplexStream } from '@grpc/grpc-js';
import { REQUEST_STATE_KEY } from '../../common/limits.js';
import type { Logger } from 'pino';
import { onAbort, whenAborted, writeDrained } from '../../common/abort.js';
import { lazyChild } from '../../common/lazy-logger.js';
import { disposable } from '../../common/disposable.js';
import type { AcquireRequest, AcquireResponse } from '../../gen/lockstream/v1/lockstream.js';
import { STREAM_ENDED, UNKNOWN_RESUME_TOKEN, type Claim, type ClaimRegistry } from '../engine/claims.js';
import type { Gate } from '../security/gate.js';
import { heldRequests, type Lease, type RevokeRequest } from '../engine/lock-request.js';
import { isLockError, LockError } from '../lock-error.js';
import type { HoldOutcome, Metrics } from '../observability/metrics.js';
import {
  acquiredMessage,
  msToDuration,
  toStreamOpening,
  validateValue,
  type StreamOpening,
} from './acquire-request.js';
import { lossReport } from '../engine/lease.js';
import { toCallStatus } from './error-status.js';
import { startHeartbeat, type StreamHeartbeat } from './stream-heartbeat.js';

type AcquireCall = ServerDuplexStream<AcquireRequest, AcquireResponse>;

/** How the client's side of the stream ended after its first message. */
type ClientEnd = 'release' | 'half-close' | LockError;

export interface AcquireHandlerOptions {
  readonly claims: ClaimRegistry;
  readonly logger: Logger;
  /** Aborts (reason: a `SHUTTING_DOWN` error) when the server shuts down. */
  readonly shutdown: AbortSignal;
  readonly metrics: Metrics;
  /** Admits the caller, and says which locks and modes it may take. */
  readonly gate: Gate;
  /** Told about each call's work, until its lock is released or its claim detached. */
  readonly track: (work: Promise<void>) => void;
}

/**
 * The Acquire RPC: read `start` (or `resume`), queue through a claim, report `queued` and
 * `acquired`, and hold the lock for as long as the stream: `release` or half-close deletes the
 * node and ends the call with OK; shutdown deletes it too. An abnormal end (cancel, broken
 * connection, missed heartbeats) detaches the claim, which keeps the request for its resume
 * grace (none by default: then it is released at once).
 */
export function createAcquireHandler(options: AcquireHandlerOptions): (call: AcquireCall) => void {
  let lastCallId = 0;
  return (call) => {
    lastCallId += 1;
    const logger = lazyChild(options.logger, { callId: lastCallId, peer: call.getPeer() });
    options.track(new AcquireStream(call, options, logger).served);
  };
}

/**
 * One Acquire stream, from its first message to its status, in three steps: open (admit the
 * caller, read `start` or `resume`, get the claim), wait for the grant, hold until the client
 * lets go. Whatever ends it early goes through `#fail`; `#finish` then releases, detaches or
 * ends the claim, as the way the stream ended says.
 */
class AcquireStream {
  /** Resolves once the call has ended and its claim has been dealt with. */
  readonly served: Promise<void>;
  readonly #call: AcquireCall;
  readonly #options: AcquireHandlerOptions;
  #logger: Logger;
  /** An abnormal end: the client cancelled, its connection broke, it went silent, or another stream took over. */
  readonly #interruption: StreamInterruption;
  readonly #client: ClientSide;
  #claim: Claim | undefined;
  #released = false;
  /** Set while this stream waits. */
  #stopWaiting: (() => void) | undefined;
  /** Set while it holds; called with how the hold ended. */
  #endHold: ((outcome: HoldOutcome) => void) | undefined;
  /** Set once `acquired` is sent: from then on `set_value` is accepted. */
  #held: Lease | undefined;
  /** The holder's requests (`set_value`, `downgrade`), applied one after the other; a release waits for them. */
  #holderRequests: Promise<void> = Promise.resolve();

  constructor(call: AcquireCall, options: AcquireHandlerOptions, logger: Logger) {
    this.#call = call;
    this.#options = options;
    this.#logger = logger;
    this.#interruption = new StreamInterruption(options.shutdown);
    // grpc-js reports 'cancelled' when any call's stream closes, after a status too.
    call.once('cancelled', () => this.#interruption.break(CLIENT_CANCELLED));
    this.#client = followClient(call, (request) => this.#fromHolder(request));
    this.served = this.#serve();
  }

  async #serve(): Promise<void> {
    using _stream = disposable(this.#options.metrics.streamOpened());
    using _interruption = this.#interruption;
    try {
      const { claim, opening } = await this.#open();
      using heartbeats = heartbeat(this.#call, opening.heartbeatIntervalMs, this.#interruption);
      this.#client.heard = heartbeats.heard;
      const lease = await this.#waitForGrant(claim, opening);
      await this.#hold(lease);
    } catch (error) {
      this.#fail(error);
    } finally {
      await this.#finish();
    }
  }

  /** Admits the caller and makes (or resumes) the claim its first message asks for. */
  async #open(): Promise<{ claim: Claim; opening: StreamOpening }> {
    const { gate, claims } = this.#options;
    const caller = gate.admit(this.#call);
    const first = await untilAborted(this.#client.first, this.#interruption.signal);
    const opening = toStreamOpening(first, this.#call.getPeer());
    if (opening.kind === 'start') {
      const { request: asked } = opening;
      for (const target of asked.locks ?? [asked]) caller.checkAcquire(target.name, target.mode);
      // An authenticated caller that names no owner is recorded as itself.
      const request = asked.owner === '' && caller.name ? { ...asked, owner: caller.name } : asked;
      this.#claim = claims.open(request, opening.resumeGraceMs, this.#logger);
    } else {
      const resumed = claims.resume(opening.resumeToken);
      // Someone else's token gets the answer an unknown one does: it reveals no lock.
      if (!caller.mayAcquire(resumed.request.name, resumed.request.mode)) {
        throw new LockError('NOT_FOUND', UNKNOWN_RESUME_TOKEN);
      }
      this.#claim = resumed;
    }
    const { request } = this.#claim;
    this.#logger = this.#logger.child({ lock: request.name, mode: request.mode, owner: request.owner });
    return { claim: this.#claim, opening };
  }

  /** Attaches to the claim, tells the client where its request stands, and resolves with the lock. */
  async #waitForGrant(claim: Claim, opening: StreamOpening): Promise<Lease> {
    const call = this.#call;
    const { request } = claim;
    const { metrics } = this.#options;
    // A claim granted before this stream attached (a resume) was counted by the stream it had then.
    const grantedBefore = claim.lease !== undefined;
    if (!grantedBefore) this.#stopWaiting = metrics.waiting(request.mode);
    const reportQueued = latestOnly(call);
    const attached = claim.attach({
      queued: (ahead) => reportQueued({ kind: { $case: 'queued', value: { ahead } } }),
      confirmedChange: (confirmed) => {
        call.write({ kind: confirmed ? { $case: 'confirmed', value: {} } : { $case: 'inDoubt', value: {} } });
        this.#logger.debug(confirmed ? 'confirmed' : 'in doubt');
      },
      replaced: () =>
        this.#interruption.replace(
          new LockError('LOCK_LOST', `lock "${request.name}" was resumed on another stream`),
        ),
    });
    // Before the grant, a clean end withdraws the request; after it, `#hold` releases the lock.
    void this.#client.end.then((end) => {
      if (!attached() || claim.lease !== undefined) return;
      if (end === 'half-close' && claim.graceMs > 0) this.#interruption.break(keptForGrace(claim));
      else claim.withdraw(withdrawal(end, request.name));
    });
    if (claim.resumeToken !== undefined) {
      const resumeGrace = msToDuration(claim.graceMs);
      call.write({ kind: { $case: 'resumable', value: { resumeToken: claim.resumeToken, resumeGrace } } });
    }
    // A resumed stream is told where its request stands, counted after it came (the last count
    // may predate a change the client saw acknowledged); the last count if the store is out of reach.
    if (opening.kind === 'resume' && claim.lease === undefined) {
      const counted = await claim.recount();
      if (!counted && claim.lease === undefined && claim.ahead !== undefined && attached())
        reportQueued({ kind: { $case: 'queued', value: { ahead: claim.ahead } } });
    }
    const { signal } = this.#interruption;
    const lease = await untilAborted(claim.granted, signal);
    if (lease.lost.aborted) throw lockLost(lease);
    this.#stopWaiting?.();
    this.#stopWaiting = undefined;
    const held = heldRequests(request, lease);
    this.#endHold = grantedBefore
      ? metrics.holding(request.mode, held)
      : metrics.granted(request.mode, claim.waitedMs, held);
    await send(call, { kind: { $case: 'acquired', value: acquiredMessage(lease) } }, signal);
    this.#held = lease;
    if (!lease.confirmed && !lease.lost.aborted) call.write({ kind: { $case: 'inDoubt', value: {} } });
    this.#logger.debug(
      { token: lease.fencingToken.toString(), resumed: opening.kind === 'resume' },
      'granted',
    );
    return lease;
  }

  /** Holds the lock until the client lets go (release, half-close) or the lock is lost; then releases it. */
  async #hold(lease: Lease): Promise<void> {
    const call = this.#call;
    const { signal } = this.#interruption;
    // Revocation requests (RevokeLock, from any instance) reach the holder on its stream.
    const sendRevokeRequested = ({ reason, forceAt }: RevokeRequest): void => {
      call.write({ kind: { $case: 'revokeRequested', value: { reason, forceAt } } });
      this.#logger.info({ token: lease.fencingToken.toString(), reason, forceAt }, 'revocation requested');
    };
    if (lease.revokeRequest) sendRevokeRequested(lease.revokeRequest);
    using _revocations = disposable(lease.onRevokeRequested(sendRevokeRequested));
    // A lost lock is freed for others once this stream's status has gone to HTTP/2 (see
    // `onLost`): grpc-js reports 'cancelled' right after it hands the status over.
    using _telling = disposable(
      lease.onLost(() =>
        call.cancelled ? undefined : new Promise<void>((resolve) => call.once('cancelled', () => resolve())),
      ),
    );
    using lost = whenAborted(lease.lost);
    using aborted = whenAborted(signal);
    const end = await Promise.race([this.#client.end, lost.then(() => 'lost' as const), aborted]);
    if (end === 'lost') throw lockLost(lease);
    if (end === undefined) throw signal.reason;
    if (end === 'half-close' && this.#claim!.graceMs > 0) {
      const kept = keptForGrace(this.#claim!);
      this.#interruption.break(kept);
      throw kept;
    }
    // What the client published before it let go is published (and acknowledged) first.
    await this.#holderRequests;
    await lease.release();
    this.#released = true;
    this.#endHold?.('released');
    if (end instanceof LockError) throw end;
    await send(call, { kind: { $case: 'released', value: {} } }, signal);
    this.#logger.debug({ token: lease.fencingToken.toString() }, 'released');
    call.end();
  }

  /**
   * A holder's request: `set_value` (publishes the value, then says `value_set`) or `downgrade`
   * (then `downgraded`), each once the ones sent before it are done. Before `acquired`, or
   * malformed, it ends the call (see ClientSide.end); one that fails for another reason than
   * the lock's loss (which ends the hold anyway) ends it too.
   */
  #fromHolder(request: HolderRequest): ClientEnd | undefined {
    const lease = this.#held;
    if (!lease) {
      return new LockError(
        'NOT_HELD',
        request.$case === 'setValue'
          ? 'set_value was sent before `acquired`: only a holder publishes a value (send it in `start` to publish it from the start)'
          : 'downgrade was sent before `acquired`: only a WRITE holder can downgrade',
      );
    }
    let apply: () => Promise<AcquireResponse['kind']>;
    if (request.$case === 'setValue') {
      const { value } = request.value;
      try {
        validateValue('set_value.value', value);
      } catch (error) {
        return error as LockError;
      }
      apply = () => lease.setValue(value).then(() => ({ $case: 'valueSet', value: {} }));
    } else {
      apply = () => lease.downgrade().then(() => ({ $case: 'downgraded', value: {} }));
    }
    this.#holderRequests = this.#holderRequests.then(async () => {
      try {
        this.#call.write({ kind: await apply() });
      } catch (error) {
        if (!isLockError(error, 'LOCK_LOST')) this.#client.fail(error);
      }
    });
    return undefined;
  }

  /** Ends the call with the status `error` calls for, unless the client is gone and would not hear it. */
  #fail(error: unknown): void {
    const interruption = this.#interruption;
    const claim = this.#claim;
    if (
      this.#stopWaiting &&
      claim &&
      claim.lease === undefined &&
      !interruption.broken &&
      !interruption.replaced
    ) {
      this.#options.metrics.notGranted(claim.request.mode, error);
    }
    this.#endHold?.(interruption.replaced ? 'replaced' : interruption.broken ? 'detached' : 'lost');
    if (isLockError(interruption.brokenBy, 'CANCELLED')) return;
    const lease = claim?.lease;
    const failure = lease?.lost.aborted && !this.#released ? lockLost(lease) : error;
    const status = toCallStatus(failure, this.#logger);
    this.#logger.debug({ status: grpcStatus[status.code], details: status.details }, 'ended');
    // A client cannot tell this server's UNAVAILABLE from a broken connection's; say when the
    // request is gone for good, so it does not try to resume it.
    const detaching = interruption.broken && !this.#options.shutdown.aborted;
    const metadata = new Metadata();
    if (!detaching && !interruption.replaced) metadata.set(REQUEST_STATE_KEY, 'ended');
    this.#call.emit('error', { ...status, metadata });
  }

  /** A broken stream leaves its claim for the resume grace; any other end ends the claim. */
  async #finish(): Promise<void> {
    this.#stopWaiting?.();
    const claim = this.#claim;
    const interruption = this.#interruption;
    if (!claim || interruption.replaced) return;
    if (interruption.broken && !this.#options.shutdown.aborted) claim.detach();
    else await claim.end(STREAM_ENDED);
  }
}

/**
 * Heartbeats at the interval the client asked for (none without one): a `heartbeat` message
 * every interval, and the stream is broken when the client has said nothing for three intervals.
 * `heard()` is called for every client message.
 */
function heartbeat(
  call: AcquireCall,
  intervalMs: number | undefined,
  interruption: StreamInterruption,
): StreamHeartbeat {
  const write = latestOnly(call);
  return startHeartbeat(
    intervalMs,
    () => write({ kind: { $case: 'heartbeat', value: {} } }),
    (reason) => interruption.break(reason),
  );
}

/**
 * What ends a stream's say over its claim before a clean end, as one signal (one per stream, as
 * signals are costly): the stream broke (cancel, dead connection, silence), another stream
 * resumed the claim, or the server shuts down. Both `broken` and `replaced` are remembered;
 * the signal carries the first reason.
 */
class StreamInterruption implements Disposable {
  readonly #controller = new AbortController();
  readonly #unlinkShutdown: () => void;
  #brokenBy: LockError | undefined;
  #replaced = false;

  constructor(shutdown: AbortSignal) {
    if (shutdown.aborted) this.#controller.abort(shutdown.reason);
    this.#unlinkShutdown = shutdown.aborted
      ? () => {}
      : onAbort(shutdown, () => this.#controller.abort(shutdown.reason));
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Why the stream broke, if it did. */
  get brokenBy(): LockError | undefined {
    return this.#brokenBy;
  }

  get broken(): boolean {
    return this.#brokenBy !== undefined;
  }

  get replaced(): boolean {
    return this.#replaced;
  }

  break(reason: LockError): void {
    this.#brokenBy ??= reason;
    this.#controller.abort(reason);
  }

  replace(reason: LockError): void {
    this.#replaced = true;
    this.#controller.abort(reason);
  }

  [Symbol.dispose](): void {
    this.#unlinkShutdown();
  }
}

/** Resolves as `promise` does, or rejects with the signal's reason if it aborts first. */
async function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  using aborted = whenAborted(signal);
  const result = await Promise.race([promise, aborted.then(() => undefined)]);
  signal.throwIfAborted();
  return result as T;
}

/** The client's side of a stream: its first message, then how it ends. */
interface ClientSide {
  /** The first message; `null` if the client half-closed first. */
  readonly first: Promise<AcquireRequest | null>;
  /** How the client ended its side after the first message; pending while the stream is open or if it broke. */
  readonly end: Promise<ClientEnd>;
  /** Called for every message after the first (heartbeats included). */
  heard: () => void;
  /** Ends the client's side as if it had sent something wrong: the call ends with `error`. */
  fail(error: unknown): void;
}

/**
 * Follows what the client sends, consuming each message as it arrives (so a flood of heartbeats
 * piles nothing up). Not an async iterator on purpose: one that sees the call's 'error' event
 * (how grpc-js is given a status) destroys the stream before the status and the messages
 * written just before it go out.
 */
/** What a holder may ask on its stream besides `release`. */
type HolderRequest = Extract<NonNullable<AcquireRequest['kind']>, { $case: 'setValue' | 'downgrade' }>;

function followClient(
  call: AcquireCall,
  fromHolder: (request: HolderRequest) => ClientEnd | undefined,
): ClientSide {
  let settleFirst!: (message: AcquireRequest | null) => void;
  let settleEnd!: (end: ClientEnd) => void;
  const side: ClientSide = {
    first: new Promise((resolve) => (settleFirst = resolve)),
    end: new Promise((resolve) => (settleEnd = resolve)),
    heard: () => {},
    fail: (error) =>
      settleEnd(error instanceof LockError ? error : new LockError('UNAVAILABLE', String(error))),
  };
  let seenFirst = false;
  call.on('data', (message: AcquireRequest) => {
    if (!seenFirst) {
      seenFirst = true;
      settleFirst(message);
      return;
    }
    side.heard();
    const kind = message.kind;
    if (kind?.$case === 'release') settleEnd('release');
    else if (kind?.$case === 'setValue' || kind?.$case === 'downgrade') {
      const refused = fromHolder(kind);
      if (refused) settleEnd(refused);
    } else if (kind?.$case !== 'heartbeat') {
      settleEnd(new LockError('INVALID_ARGUMENT', '`start` or `resume` may be sent only once per stream'));
    }
  });
  // A cancel ends the readable side too: this may be one. Nothing here depends on which (see
  // `keptForGrace`); a cancel is also reported as 'cancelled'.
  call.on('end', () => {
    settleFirst(null);
    settleEnd('half-close');
  });
  return side;
}

/** A shared reason: 'cancelled' comes with every stream's end, and most are not cancellations. */
const CLIENT_CANCELLED = new LockError('CANCELLED', 'the client cancelled the call');

function withdrawal(end: ClientEnd, name: string): LockError {
  if (end instanceof LockError) return end;
  const how = end === 'release' ? 'sent `release`' : 'half-closed the stream';
  return new LockError('CANCELLED', `lock "${name}" was not acquired: the client ${how} while waiting`);
}

/**
 * A request with a resume grace is released only by `release`. A bare half-close cannot be
 * told from a cancel by the frames alone: a gRPC client that cancels may end its side of the
 * stream and send the reset later (grpc-js does, after its pending write completes), or never
 * (when it closes its connection at once). So it is an abnormal end, the same whichever it was:
 * the request is kept for its grace, and a client still listening is told why.
 */
function keptForGrace(claim: Claim): LockError {
  return new LockError(
    'KEPT_FOR_GRACE',
    `lock "${claim.request.name}": the stream was half-closed without \`release\`; the request is kept for its resume grace (${claim.graceMs} ms) as after a cancel: resume it and send \`release\` to let go`,
  );
}

function lockLost(lease: Lease): LockError {
  return lossReport(lease.name, lease.lossReason);
}

/** Writes a message, waiting for 'drain' when the stream's buffer is full. */
async function send(call: AcquireCall, message: AcquireResponse, signal: AbortSignal): Promise<void> {
  await writeDrained(call, message, signal);
  signal.throwIfAborted();
}

/**
 * A writer for messages where only the newest matters (queue positions): while the stream is
 * backed up, newer messages replace the one waiting to be written instead of piling up.
 */
function latestOnly(call: AcquireCall): (message: AcquireResponse) => void {
  let waiting: AcquireResponse | undefined;
  let backedUp = false;
  const write = (message: AcquireResponse): void => {
    if (backedUp) {
      waiting = message;
      return;
    }
    if (call.write(message)) return;
    backedUp = true;
    call.once('drain', () => {
      backedUp = false;
      const next = waiting;
      waiting = undefined;
      if (next) write(next);
    });
  };
  return write;
}
