/**
 * lockstream's lock semantics written a second time, apart from the engine and as small as it
 * can be: what every client must have been told after any sequence of requests, releases and
 * cancels. Model-based tests drive a real server and this model with the same operations and
 * compare what each client received with what the model says.
 *
 * Per lock name, one FIFO queue. A request holds when nothing ahead of it conflicts with it:
 * reads share with reads; mutex and write exclude everything. A request that asked not to wait
 * (wait_timeout 0) and cannot hold at once ends with DEADLINE_EXCEEDED and leaves no trace.
 */

export type ModelMode = 'mutex' | 'read' | 'write';

/** How a request ended, as its client saw the call end. */
export type ModelEnd =
  /** Released at the client's request: `released`, then OK. */
  | 'released'
  /** Withdrawn while waiting (half-close): CANCELLED from the server. */
  | 'withdrawn'
  /** The client cancelled its call: CANCELLED, whatever it held. */
  | 'cancelled'
  /** A try that found the lock taken: DEADLINE_EXCEEDED. */
  | 'not-free';

export interface ModelRequest {
  readonly id: number;
  readonly lock: string;
  readonly mode: ModelMode;
  /** Requests ahead of it when it joined the queue (holders included); undefined if it held at once. */
  firstAhead: number | undefined;
  held: boolean;
  end: ModelEnd | undefined;
}

function conflicts(a: ModelMode, b: ModelMode): boolean {
  return a !== 'read' || b !== 'read';
}

export class LockModel {
  readonly requests: ModelRequest[] = [];
  readonly #queues = new Map<string, ModelRequest[]>();

  /** A new request for `lock`; `tryOnly`: wait_timeout 0. Returns it (already ended if it could not hold). */
  open(lock: string, mode: ModelMode, tryOnly: boolean): ModelRequest {
    const queue = this.#queues.get(lock) ?? [];
    this.#queues.set(lock, queue);
    const request: ModelRequest = {
      id: this.requests.length,
      lock,
      mode,
      firstAhead: undefined,
      held: false,
      end: undefined,
    };
    this.requests.push(request);
    const free = queue.every((ahead) => !conflicts(ahead.mode, mode));
    if (!free && tryOnly) {
      request.end = 'not-free';
      return request;
    }
    queue.push(request);
    if (free) request.held = true;
    else request.firstAhead = queue.length - 1;
    return request;
  }

  /** The client half-closed: a holder releases, a waiter is withdrawn. */
  halfClose(id: number): void {
    const request = this.#live(id);
    this.#leave(request, request.held ? 'released' : 'withdrawn');
  }

  /** The client cancelled its call (no resume grace): whatever it held or waited for is given up. */
  cancel(id: number): void {
    this.#leave(this.#live(id), 'cancelled');
  }

  /** Requests still queued or holding. */
  get live(): ModelRequest[] {
    return this.requests.filter((request) => request.end === undefined);
  }

  /** How many requests are ahead of a live one in its queue now (holders included). */
  ahead(id: number): number {
    const request = this.#live(id);
    return this.queue(request.lock).indexOf(request);
  }

  /** A lock's queue: holders first, then waiters, in order. */
  queue(lock: string): readonly ModelRequest[] {
    return this.#queues.get(lock) ?? [];
  }

  #live(id: number): ModelRequest {
    const request = this.requests[id];
    if (!request || request.end !== undefined) throw new Error(`INVARIANT: request ${id} is not live`);
    return request;
  }

  #leave(request: ModelRequest, end: ModelEnd): void {
    request.end = end;
    request.held = false;
    const queue = this.#queues.get(request.lock) ?? [];
    queue.splice(queue.indexOf(request), 1);
    // Whoever nothing conflicting is ahead of now holds.
    for (let i = 0; i < queue.length; i += 1) {
      const candidate = queue[i]!;
      if (!candidate.held && queue.slice(0, i).every((ahead) => !conflicts(ahead.mode, candidate.mode))) {
        candidate.held = true;
      }
    }
  }
}
