// lockstream/fencing's public door: everything a user of the subpath may import, and nothing else.
/**
 * Fencing that reaches the resource. A call made under a held lock carries the lock's token as
 * `lockstream-fencing-token: <percent-encoded lock name>:<decimal token>` (gRPC metadata or an
 * HTTP header); the resource admits it only if the token is not below the highest it has seen.
 *
 * Calling side: `fencingInterceptor(lock)`, `fencingMetadata(lock)`, `fencingHeaders(lock)`,
 * `fencedFetch(lock, url, init)`. Resource side: `fencingServerInterceptor()` (grpc-js),
 * `fencingMiddleware()` (node:http, Express, Connect), `HighWaterMarks` over a `MarkStore`.
 * PostgreSQL, with the check in the writes' own transaction: `lockstream/fencing/postgres`.
 *
 * @packageDocumentation
 */
export {
  FENCING_HEADER,
  fenceOf,
  formatFencingToken,
  parseFencingToken,
  type Fence,
  type FencingHolder,
} from './header.js';
export {
  FencingError,
  FencingLockMismatchError,
  MalformedFencingTokenError,
  MissingFencingTokenError,
  StaleTokenError,
  type FencingErrorCode,
} from './errors.js';
export { HighWaterMarks, MemoryMarkStore, type Mark, type MarkStore, type RaiseResult } from './marks.js';
export { fencingInterceptor, fencingMetadata } from './grpc-client.js';
export { fenceFromMetadata, fencingServerInterceptor, type FencingServerOptions } from './grpc-server.js';
export { fencedFetch, fencingHeaders } from './http-client.js';
export {
  fencingMiddleware,
  type FencingMiddleware,
  type FencingMiddlewareOptions,
} from './http-middleware.js';
