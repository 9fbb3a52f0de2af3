/*
 * The resource's side over gRPC: a grpc-js server interceptor that admits a call only if its
 * `lockstream-fencing-token` is not below the resource's high-water mark.
 */
import { Metadata, status, ServerInterceptingCall, type ServerInterceptor } from '@grpc/grpc-js';
import { FencingError, MissingFencingTokenError } from './errors.js';
import { FENCING_HEADER, fenceFromValues, type Fence } from './header.js';
import { HighWaterMarks } from './marks.js';

/** How `fencingServerInterceptor` decides. */
export interface FencingServerOptions {
  /** The marks to check and raise; a new in-memory HighWaterMarks by default (see MarkStore). */
  readonly marks?: HighWaterMarks;
  /**
   * The resource a call writes to, whose mark it is checked against: by default the lock's name
   * (one lock per resource). `method` is the call's path, e.g. `/inventory.v1.Stock/Reserve`.
   */
  readonly resource?: (fence: Fence, method: string) => string;
  /** Calls that carry no token: refused with FAILED_PRECONDITION (default), or passed unchecked. */
  readonly missingToken?: 'refuse' | 'pass';
  /** Which methods are fenced, by path (e.g. reads may skip the check); all by default. */
  readonly methods?: (method: string) => boolean;
  /**
   * Told of any other failure of the check (the mark store's, or `resource` throwing): the call
   * then ends UNAVAILABLE with a fixed message, never the error's own text.
   */
  readonly onError?: (error: unknown, method: string) => void;
}

/**
 * The fence a call carries in `metadata`, or undefined without one; throws
 * MalformedFencingTokenError. For a handler that wants the lock name and token it was sent.
 */
export function fenceFromMetadata(metadata: Metadata): Fence | undefined {
  const values = metadata
    .get(FENCING_HEADER)
    .map((value) => (typeof value === 'string' ? value : value.toString()));
  return fenceFromValues(values);
}

/**
 * A grpc-js server interceptor (`new Server({ interceptors: [fencingServerInterceptor()] })`)
 * that checks each call's token against the resource's mark before the handler sees the call:
 *
 * - stale (below the mark): FAILED_PRECONDITION, naming the resource, lock, token and mark;
 * - another lock's mark on the resource: FAILED_PRECONDITION;
 * - malformed header: INVALID_ARGUMENT;
 * - no header: FAILED_PRECONDITION, or passed, as `missingToken` says;
 * - admitted: the mark rises to the token and the call goes on to its handler.
 *
 * The check admits a call when it starts. A handler that is still writing when a later holder is
 * admitted can still land its write after that holder's: where that matters, check the token in
 * the same transaction as the write (lockstream/fencing/postgres's `fenced`).
 */
export function fencingServerInterceptor(options: FencingServerOptions = {}): ServerInterceptor {
  const marks = options.marks ?? new HighWaterMarks();
  const resourceOf = options.resource ?? ((fence: Fence) => fence.name);
  const missing = options.missingToken ?? 'refuse';
  return (methodDescriptor, call) => {
    const method = methodDescriptor.path;
    if (options.methods !== undefined && !options.methods(method)) return new ServerInterceptingCall(call);
    let cancelled = false;
    const refuse = (code: status, details: string) => {
      if (!cancelled) call.sendStatus({ code, details, metadata: new Metadata() });
    };
    return new ServerInterceptingCall(call, {
      start(next) {
        next({
          onReceiveMetadata(metadata, passOn) {
            let fence: Fence | undefined;
            try {
              fence = fenceFromMetadata(metadata);
            } catch (error) {
              refuse(status.INVALID_ARGUMENT, (error as Error).message);
              return;
            }
            if (fence === undefined) {
              if (missing === 'pass') passOn(metadata);
              else refuse(status.FAILED_PRECONDITION, new MissingFencingTokenError(`call ${method}`).message);
              return;
            }
            // grpc-js holds the call's messages until passOn: the handler sees nothing meanwhile.
            const admitted = fence;
            Promise.resolve()
              .then(() => marks.admit(resourceOf(admitted, method), admitted))
              .then(
                () => {
                  if (!cancelled) passOn(metadata);
                },
                (error: unknown) => {
                  if (error instanceof FencingError) {
                    refuse(status.FAILED_PRECONDITION, error.message);
                    return;
                  }
                  options.onError?.(error, method);
                  refuse(
                    status.UNAVAILABLE,
                    'the fencing check failed (the high-water mark store is unavailable)',
                  );
                },
              );
          },
          onCancel() {
            cancelled = true;
          },
        });
      },
    });
  };
}
