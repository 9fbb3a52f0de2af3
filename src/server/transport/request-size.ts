/*
 * The limit on one lock request's size: an oversized message noted as it is decoded, so the handler
 * refuses that request alone rather than its whole call.
 */
import type { MethodDefinition, ServiceDefinition } from '@grpc/grpc-js';
import { RECEIVE_MARGIN_BYTES } from '../largest-request.js';
import { LockError } from '../lock-error.js';

/**
 * The configured limit on one lock request. gRPC hands handlers decoded messages only, so the
 * decoders of the lock RPCs note the size of each message over the limit here (and nothing for
 * the others), for the handler to refuse that request alone.
 */
export class RequestSizeLimit {
  readonly maxBytes: number;
  readonly #oversized = new WeakMap<object, number>();

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }

  /** gRPC's own limit: a message beyond it ends its whole call with RESOURCE_EXHAUSTED. */
  get receiveLimitBytes(): number {
    return this.maxBytes + RECEIVE_MARGIN_BYTES;
  }

  /** `service`, with the request decoders of `methods` noting the messages over the limit. */
  noting<S extends ServiceDefinition>(service: S, methods: ReadonlyArray<keyof S>): S {
    const noted: Record<keyof S, MethodDefinition<unknown, unknown>> = { ...service };
    for (const method of methods) {
      const definition = service[method];
      if (!definition) throw new Error(`INVARIANT: the service has no method ${String(method)}`);
      noted[method] = {
        ...definition,
        requestDeserialize: (bytes: Buffer): unknown => {
          const message: unknown = definition.requestDeserialize(bytes);
          if (bytes.length > this.maxBytes && typeof message === 'object' && message !== null) {
            this.#oversized.set(message, bytes.length);
          }
          return message;
        },
      };
    }
    return noted as S;
  }

  /** Refuses `message` (named `what` in the error) if it arrived larger than the limit. */
  check(message: object, what: string): void {
    const bytes = this.#oversized.get(message);
    if (bytes === undefined) return;
    throw new LockError(
      'RESOURCE_EXHAUSTED',
      `the ${what} message is ${bytes} bytes; this server accepts lock requests of at most ${this.maxBytes} bytes`,
    );
  }
}
