/*
 * The calling side over gRPC: a held lock's token as `lockstream-fencing-token` metadata, set by
 * hand or by a client interceptor on every call made through it.
 */
import { InterceptingCall, Metadata, type Interceptor } from '@grpc/grpc-js';
import { FENCING_HEADER, formatFencingToken, type FencingHolder } from './header.js';

/**
 * `metadata` (a new Metadata by default) with `holder`'s `lockstream-fencing-token` set,
 * replacing any earlier one. Pass it to a call: `client.write(request, fencingMetadata(lock), cb)`.
 */
export function fencingMetadata(holder: FencingHolder, metadata: Metadata = new Metadata()): Metadata {
  metadata.set(FENCING_HEADER, formatFencingToken(holder));
  return metadata;
}

/**
 * A grpc-js client interceptor that sets `holder`'s token on every call made through it (unary
 * and streaming): `new ResourceClient(address, credentials, { interceptors: [fencingInterceptor(lock)] })`
 * for a client used under one lock, or `{ interceptors: [...] }` in one call's options. The value
 * is made once, here: a holder that cannot be fenced throws now, not at the first call.
 */
export function fencingInterceptor(holder: FencingHolder): Interceptor {
  const value = formatFencingToken(holder);
  return (options, nextCall) =>
    new InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        metadata.set(FENCING_HEADER, value);
        next(metadata, listener);
      },
    });
}
