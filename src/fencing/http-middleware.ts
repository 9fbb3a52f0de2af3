/*
 * The resource's side over HTTP: a Connect/Express-style middleware `(req, res, next)` that
 * admits a request only if its `lockstream-fencing-token` is not below the resource's mark.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  FencingError,
  MissingFencingTokenError,
  StaleTokenError,
  FencingLockMismatchError,
} from './errors.js';
import { FENCING_HEADER, fenceFromValues, type Fence } from './header.js';
import { HighWaterMarks } from './marks.js';

/** How `fencingMiddleware` decides. */
export interface FencingMiddlewareOptions {
  /** The marks to check and raise; a new in-memory HighWaterMarks by default (see MarkStore). */
  readonly marks?: HighWaterMarks;
  /** The resource a request writes to: by default the lock's name (one lock per resource). */
  readonly resource?: (fence: Fence, req: IncomingMessage) => string;
  /** Requests without a token: refused with 428 (default), or passed unchecked. */
  readonly missingToken?: 'refuse' | 'pass';
}

/** The middleware: Express, Connect, or a plain `node:http` handler calling it with its own `next`. */
export type FencingMiddleware = (
  req: IncomingMessage,
  res: ServerResponse,
  next: (error?: unknown) => void,
) => void;

/**
 * Checks each request's token against the resource's mark before `next()`:
 *
 * - stale (below the mark): 409 `{"error":"stale_fencing_token","message",...,"token","mark"}`;
 * - another lock's mark on the resource: 409 `{"error":"fencing_lock_mismatch",...}`;
 * - malformed header: 400 `{"error":"malformed_fencing_token","message"}`;
 * - no header: 428 `{"error":"missing_fencing_token","message"}`, or `next()` as `missingToken` says;
 * - admitted: the mark rises to the token, then `next()`.
 *
 * Tokens in the bodies are decimal strings. A failure of the mark store goes to `next(error)`.
 * As with the gRPC interceptor, the check admits a request when it starts (see
 * fencingServerInterceptor on writes that must be ordered with the check).
 */
export function fencingMiddleware(options: FencingMiddlewareOptions = {}): FencingMiddleware {
  const marks = options.marks ?? new HighWaterMarks();
  const resourceOf = options.resource ?? ((fence: Fence) => fence.name);
  const missing = options.missingToken ?? 'refuse';
  return (req, res, next) => {
    let fence: Fence | undefined;
    try {
      fence = fenceFromValues(headerValues(req));
    } catch (error) {
      if (!(error instanceof FencingError)) throw error;
      answer(res, 400, { error: 'malformed_fencing_token', message: error.message });
      return;
    }
    if (fence === undefined) {
      if (missing === 'pass') next();
      else {
        const message = new MissingFencingTokenError(`${req.method ?? 'a'} request`).message;
        answer(res, 428, { error: 'missing_fencing_token', message });
      }
      return;
    }
    const admitted = fence;
    Promise.resolve()
      .then(() => marks.admit(resourceOf(admitted, req), admitted))
      .then(
        () => next(),
        (error: unknown) => {
          if (error instanceof StaleTokenError) {
            answer(res, 409, {
              error: 'stale_fencing_token',
              message: error.message,
              resource: error.resource,
              lock: error.lockName,
              token: error.token.toString(),
              mark: error.mark.toString(),
            });
          } else if (error instanceof FencingLockMismatchError) {
            answer(res, 409, {
              error: 'fencing_lock_mismatch',
              message: error.message,
              resource: error.resource,
              lock: error.lockName,
              token: error.token.toString(),
              markLock: error.markLockName,
              mark: error.mark.toString(),
            });
          } else {
            next(error);
          }
        },
      );
  };
}

/** Each value of the header: Node joins repeated headers with ", ", headersDistinct does not. */
function headerValues(req: IncomingMessage): string[] {
  const distinct = req.headersDistinct?.[FENCING_HEADER];
  if (distinct !== undefined) return distinct;
  const value = req.headers[FENCING_HEADER];
  if (value === undefined) return [];
  return Array.isArray(value) ? value : [value];
}

function answer(res: ServerResponse, statusCode: number, body: Record<string, string>): void {
  const text = JSON.stringify(body);
  res.writeHead(statusCode, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}
