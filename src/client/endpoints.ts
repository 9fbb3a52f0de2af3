/*
 * The servers a LockClient talks to: one gRPC channel each, made on first use, and which one is
 * current, moving on from one that failed.
 */
import type { ElectionServiceClient } from '../gen/lockstream/v1/election.js';
import type { LockServiceClient } from '../gen/lockstream/v1/lockstream.js';
import type { RecordServiceClient } from '../gen/lockstream/v1/records.js';

/** The gRPC clients of one endpoint, all on its one channel: one per lockstream service. */
export interface EndpointClients {
  readonly locks: LockServiceClient;
  readonly elections: ElectionServiceClient;
  readonly records: RecordServiceClient;
}

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
  readonly #clients: Array<EndpointClients | undefined>;
  readonly #connect: (address: string) => EndpointClients;
  #current = 0;
  #closed = false;

  constructor(addresses: readonly string[], connect: (address: string) => EndpointClients) {
    this.#addresses = addresses;
    this.#clients = addresses.map(() => undefined);
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

  /** The gRPC clients of endpoint `index`. Throws once closed: no channel is made after `close()`. */
  clients(index: number): EndpointClients {
    if (this.#closed) throw new Error('the LockClient was closed');
    return (this.#clients[index] ??= this.#connect(this.#addresses[index]!));
  }

  /** Closes every channel made (the clients of an endpoint share its channel: closing one closes it). */
  close(): void {
    this.#closed = true;
    for (const clients of this.#clients) clients?.locks.close();
  }
}
