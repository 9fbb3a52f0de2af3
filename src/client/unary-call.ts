/*
 * A unary call of a LockClient: to the current endpoint, tried on the next one after
 * UNAVAILABLE, and its failure as a LockClientError; and a server stream (WatchLock, Observe)
 * read as an async generator.
 */
import { status as Status, type ClientReadableStream, type ServiceError } from '@grpc/grpc-js';
import { onAbort } from '../common/abort.js';
import type { EndpointClients, Endpoints } from './endpoints.js';
import { LockClientClosedError, LockClientError } from './errors.js';

/** What the call is about, and how it fails. */
export interface UnaryTarget {
  /** The lock (or election) it is about; '' for none (its errors then name none). */
  readonly name: string;
  /** Whether the client was closed: then the call rejects with LockClientClosedError. */
  readonly closed: () => boolean;
  /** The error for the server's refusal; default: a LockClientError with its status. */
  readonly failure?: (refusal: ServiceError) => LockClientError;
}

/**
 * Makes `call` on the current endpoint's clients and resolves with its answer. UNAVAILABLE moves
 * the client on to the next endpoint and tries there, once per endpoint (UNAVAILABLE means the
 * call was not done, so trying it elsewhere is safe); any other failure rejects at once.
 */
export async function unaryCall<T>(
  endpoints: Endpoints,
  target: UnaryTarget,
  call: (clients: EndpointClients, done: (error: ServiceError | null, value?: T) => void) => unknown,
): Promise<T> {
  const { name } = target;
  const failure =
    target.failure ??
    ((refusal: ServiceError) => new LockClientError(name, refusal.code, refusal.details, { cause: refusal }));
  for (let tried = 1; ; tried += 1) {
    if (target.closed()) throw new LockClientClosedError(name);
    const endpoint = endpoints.current;
    try {
      return await new Promise<T>((resolve, reject) => {
        call(endpoints.clients(endpoint), (error, value) => (error ? reject(error) : resolve(value as T)));
      });
    } catch (error) {
      const refusal = error as ServiceError;
      if (refusal.code !== Status.UNAVAILABLE) throw failure(refusal);
      endpoints.moveOn(endpoint);
      if (tried >= endpoints.count) throw failure(refusal);
    }
  }
}

/**
 * Reads the server stream `open` makes on the current endpoint's clients, yielding what `read`
 * makes of each message (undefined: nothing). Ends when the server ends it, or quietly when
 * `signal` aborts; a failure throws as a LockClientError naming `name`, and UNAVAILABLE moves
 * the client on to the next endpoint first, for the caller to open the stream again there.
 */
export async function* serverStream<M, T>(
  endpoints: Endpoints,
  name: string,
  signal: AbortSignal | undefined,
  open: (clients: EndpointClients) => ClientReadableStream<M>,
  read: (message: M) => T | undefined,
): AsyncGenerator<T, void> {
  if (signal?.aborted) return;
  const endpoint = endpoints.current;
  const call = open(endpoints.clients(endpoint));
  const unlink = signal ? onAbort(signal, () => call.cancel()) : undefined;
  try {
    for await (const message of call as AsyncIterable<M>) {
      const value = read(message);
      if (value !== undefined) yield value;
    }
  } catch (error) {
    const failure = error as ServiceError;
    if (signal?.aborted && failure.code === Status.CANCELLED) return;
    if (failure.code === Status.UNAVAILABLE) endpoints.moveOn(endpoint);
    throw new LockClientError(name, failure.code, failure.details, { cause: error });
  } finally {
    unlink?.();
    call.cancel();
  }
}
