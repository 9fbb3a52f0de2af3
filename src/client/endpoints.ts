import type { LockServiceClient } from '../gen/lockstream/v1/lockstream.js';
import { invalidArgument } from './request-checks.js';

/**
 * The servers a client can talk to, as its streams see them: endpoints numbered from 0, the
 * current one, and moving on from one that failed.
 */
export interface EndpointRing {
  /** How many endpoints there are (1 for a client made with one address). */
  readonly count: number;
  /** The endpoint new calls go to. */
  readonly current: number;
  /** `host:port` (or the gRPC target) of endpoint `index`, for messages. */
  address(index: number): string;
  /** Endpoint `index` failed: unless the client has moved on already, the next one is current. */
  moveOn(index: number): void;
}

/**
 * A client's endpoints, each with its own gRPC channel, made on first use (a client whose first
 * endpoint answers never connects to the others). Every call goes to the current endpoint; a
 * call that finds it unavailable moves the client on to the next, round the list.
 */
export class Endpoints implements EndpointRing {
  readonly #addresses: readonly string[];
  readonly #channels: Array<LockServiceClient | undefined>;
  readonly #connect: (address: string) => LockServiceClient;
  #current = 0;
  #closed = false;

  constructor(addresses: readonly string[], connect: (address: string) => LockServiceClient) {
    this.#addresses = addresses;
    this.#channels = addresses.map(() => undefined);
    this.#connect = connect;
  }

  get count(): number {
    return this.#addresses.length;
  }

  get current(): number {
    return this.#current;
  }

  address(index: number): string {
    return this.#addresses[index]!;
  }

  moveOn(index: number): void {
    if (this.#current === index) this.#current = (index + 1) % this.#addresses.length;
  }

  /** The gRPC client of endpoint `index`. Throws once closed: no channel is made after `close()`. */
  grpc(index: number): LockServiceClient {
    if (this.#closed) throw new Error('the LockClient was closed');
    return (this.#channels[index] ??= this.#connect(this.#addresses[index]!));
  }

  /** Closes every channel made. */
  close(): void {
    this.#closed = true;
    for (const channel of this.#channels) channel?.close();
  }
}

/**
 * `host:port`: a DNS name, an IPv4 address or a bracketed IPv6 address, and a port from 1 to
 * 65535.
 */
const HOST_PORT =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.?|\[[0-9A-Fa-f:.]+(?:%[\w.-]+)?\]):(\d{1,5})$/;

/**
 * The endpoints a LockClient is made with: one address (any gRPC target, as given), or a list of
 * `host:port`, which must be non-empty, well formed and without duplicates. Refuses a bad list
 * with LockClientError (INVALID_ARGUMENT) naming the problem.
 */
export function endpointList(address: string | readonly string[]): readonly string[] {
  if (typeof address === 'string') return [address];
  if (!Array.isArray(address)) {
    throw invalidArgument('', `address must be a string or an array of "host:port", not ${typeof address}`);
  }
  if (address.length === 0) {
    throw invalidArgument('', 'addresses is empty: give at least one "host:port"');
  }
  const list: readonly unknown[] = address;
  const seen = new Map<string, number>();
  return list.map((endpoint, index) => {
    if (typeof endpoint !== 'string') {
      throw invalidArgument('', `addresses[${index}] must be a string "host:port", not ${typeof endpoint}`);
    }
    const port = HOST_PORT.exec(endpoint)?.[1];
    if (port === undefined) {
      throw invalidArgument(
        '',
        `addresses[${index}] ${JSON.stringify(endpoint)} is not "host:port" (a DNS name, IPv4 address or [IPv6] address, then a port)`,
      );
    }
    if (Number(port) < 1 || Number(port) > 65_535) {
      throw invalidArgument(
        '',
        `addresses[${index}] ${JSON.stringify(endpoint)}: port ${port} is not 1 to 65535`,
      );
    }
    // Host names are case-insensitive: the same server twice would be tried twice per round.
    const key = endpoint.toLowerCase();
    const first = seen.get(key);
    if (first !== undefined) {
      throw invalidArgument(
        '',
        `addresses[${index}] ${JSON.stringify(endpoint)} is the same endpoint as addresses[${first}]`,
      );
    }
    seen.set(key, index);
    return endpoint;
  });
}
