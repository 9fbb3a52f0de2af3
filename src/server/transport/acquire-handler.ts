import type { ServerDuplexStream } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { linkSignals, whenAborted } from '../../common/abort.js';
import type { AcquireRequest, AcquireResponse } from '../../gen/lockstream/v1/lockstream.js';
import type { Lease, LockEngine } from '../engine/lock-engine.js';
import { LockError } from '../engine/lock-error.js';
import { toAcquireRequest } from './acquire-request.js';
import { toCallStatus } from './error-status.js';

type AcquireCall = ServerDuplexStream<AcquireRequest, AcquireResponse>;
type Messages = AsyncIterator<AcquireRequest>;

/** How the client's side of the stream ended after `start`. */
type ClientEnd = 'release' | 'half-close' | LockError;

export interface AcquireHandlerOptions {
  readonly engine: LockEngine;
  readonly logger: Logger;
  /** Aborts (reason: a `SHUTTING_DOWN` error) when the server shuts down. */
  readonly shutdown: AbortSignal;
  /** Told about each call's work, until its lock is released. */
  readonly track: (work: Promise<void>) => void;
}

/**
 * The Acquire RPC: read `start`, queue through the engine, report `queued` and `acquired`, and
 * hold the lock for exactly as long as the stream: `release` or half-close deletes the node
 * and ends the call with OK; cancel, disconnect or shutdown delete it too.
 */
export function createAcquireHandler(options: AcquireHandlerOptions): (call: AcquireCall) => void {
  let lastCallId = 0;
  return (call) => {
    lastCallId += 1;
    const logger = options.logger.child({ callId: lastCallId, peer: call.getPeer() });
    options.track(serveAcquire(call, options, logger));
  };
}

async function serveAcquire(
  call: AcquireCall,
  { engine, shutdown }: AcquireHandlerOptions,
  logger: Logger,
): Promise<void> {
  const cancelled = new AbortController();
  call.once('cancelled', () => {
    cancelled.abort(new LockError('CANCELLED', 'the client cancelled the call'));
  });
  using signal = linkSignals(cancelled.signal, shutdown);
  // Reading stops early on purpose; without destroyOnReturn: false that would destroy the call.
  const messages: Messages = call.iterator({ destroyOnReturn: false });
  let lease: Lease | undefined;
  let released = false;
  try {
    const first = await nextMessage(messages, signal);
    if (first?.kind?.$case !== 'start') {
      throw new LockError(
        'INVALID_ARGUMENT',
        first ? 'the first message must be `start`' : 'the stream ended before a `start` message',
      );
    }
    const request = toAcquireRequest(first.kind.value, call.getPeer());
    logger = logger.child({ lock: request.name, mode: request.mode });

    const clientEnd = readUntilEnd(messages);
    const withdrawn = new AbortController();
    void clientEnd.then((end) => withdrawn.abort(withdrawal(end, request.name)));
    const reportQueued = latestOnly(call);
    {
      using acquireSignal = linkSignals(signal, withdrawn.signal);
      lease = await engine.acquire(request, {
        signal: acquireSignal,
        onQueued: (ahead) => reportQueued({ kind: { $case: 'queued', value: { ahead } } }),
      });
    }
    await send(call, { kind: { $case: 'acquired', value: { fencingToken: lease.fencingToken } } }, signal);
    logger.debug({ token: lease.fencingToken.toString() }, 'granted');

    // Tell the holder whenever the store cannot vouch for its lock, and when it can again.
    using _confirmation = subscription(
      lease.onConfirmedChange((confirmed) => {
        call.write({
          kind: confirmed ? { $case: 'confirmed', value: {} } : { $case: 'inDoubt', value: {} },
        });
        logger.debug(confirmed ? 'confirmed' : 'in doubt');
      }),
    );
    using lost = whenAborted(lease.lost);
    using aborted = whenAborted(signal);
    const end = await Promise.race([clientEnd, lost.then(() => 'lost' as const), aborted]);
    if (end === 'lost') throw lockLost(lease);
    if (end === undefined) throw signal.reason;
    await lease.release();
    released = true;
    if (end instanceof LockError) throw end;
    await send(call, { kind: { $case: 'released', value: {} } }, signal);
    logger.debug('released');
    call.end();
  } catch (error) {
    if (!cancelled.signal.aborted) {
      const failure = lease?.lost.aborted && !released ? lockLost(lease) : error;
      call.emit('error', toCallStatus(failure, logger));
    }
  } finally {
    if (lease && !released) {
      await lease.release().catch((error: unknown) => {
        if (!(error instanceof LockError && error.code === 'LOCK_LOST')) {
          logger.warn({ err: error }, 'could not release a lock after its call ended');
        }
      });
    }
  }
}

/** The next client message, `null` at half-close; rejects with the reason if `signal` aborts. */
async function nextMessage(messages: Messages, signal: AbortSignal): Promise<AcquireRequest | null> {
  using aborted = whenAborted(signal);
  const next = await Promise.race([messages.next(), aborted]);
  if (next === undefined) throw signal.reason;
  return next.done ? null : next.value;
}

/** Reads the rest of the stream after `start` and says how the client ended it. */
async function readUntilEnd(messages: Messages): Promise<ClientEnd> {
  try {
    for (;;) {
      const next = await messages.next();
      if (next.done) return 'half-close';
      if (next.value.kind?.$case === 'release') return 'release';
      return new LockError('INVALID_ARGUMENT', '`start` may be sent only once per stream');
    }
  } catch {
    // The stream broke (cancel, reset): the call's cancellation signal reports that.
    return new Promise<never>(() => {});
  }
}

function withdrawal(end: ClientEnd, name: string): LockError {
  if (end instanceof LockError) return end;
  const how = end === 'release' ? 'sent `release`' : 'half-closed the stream';
  return new LockError('CANCELLED', `lock "${name}" was not acquired: the client ${how} while waiting`);
}

function lockLost(lease: Lease): LockError {
  const reason: unknown = lease.lost.reason;
  const why = reason instanceof Error ? reason.message : 'the coordination session ended';
  return new LockError('LOCK_LOST', `lock "${lease.name}" was lost: ${why}; stop the work it protects`, {
    cause: reason,
  });
}

/** An unsubscribe function as a Disposable, for `using`. */
function subscription(unsubscribe: () => void): Disposable {
  return { [Symbol.dispose]: unsubscribe };
}

/** Writes a message, waiting for 'drain' when the stream's buffer is full. */
async function send(call: AcquireCall, message: AcquireResponse, signal: AbortSignal): Promise<void> {
  if (call.write(message)) return;
  using aborted = whenAborted(signal);
  const drained = new Promise<void>((resolve) => call.once('drain', resolve));
  await Promise.race([drained, aborted]);
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
