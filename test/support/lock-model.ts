/**
 * lockstream's lock semantics written a second time, apart from the engine and as small as it
 * can be: what every client must have been told after any sequence of requests, releases and
 * cancels. Model-based tests drive a real server and this model with the same operations and
 * compare what each client received with what the model says.
 *
 * Per lock name, one FIFO queue. A request holds when nothing ahead of it conflicts with it:
 * reads share with reads; mutex and write exclude everything. A semaphore request (all of one
 * name's, with MODEL_SEMAPHORE_LIMIT) holds when its weight and the weights of all requests
 * ahead of it fit the limit. A request that asked not to wait
 * (wait_timeout 0) and cannot hold at once ends with DEADLINE_EXCEEDED and leaves no trace.
 * A request with a resume grace that is cancelled, or half-closed without `release`, keeps its
 * place, queued or holding, until a new stream resumes it (graces here are longer than any
 * sequence). RevokeLock asks each holder: the first request it is told stands, except that a
 * forced one escalates a cooperative one (the holder is told again, now with a deadline); a
 * forced request told takes the lock away (no later request moves or removes its deadline), and
 * the holder hears of the loss before anyone is granted the lock.
 */

export type ModelMode = 'mutex' | 'read' | 'write' | 'semaphore';

/** The limit every semaphore request names. */
export const MODEL_SEMAPHORE_LIMIT = 3;

/** How a request ended, as its client saw the call end. */
export type ModelEnd =
  /** Released at the client's request: `released`, then OK. */
  | 'released'
  /** Withdrawn while waiting (half-close): CANCELLED from the server. */
  | 'withdrawn'
  /** The client cancelled its call: CANCELLED, whatever it held. */
  | 'cancelled'
  /** A try that found the lock taken: DEADLINE_EXCEEDED. */
  | 'not-free'
  /** A forced revocation took the lock away: ABORTED. */
  | 'lost'
  /** The client's connection broke (no resume grace): UNAVAILABLE, as the client sees it. */
  | 'dropped';

/** What RevokeLock asked of a holder, as the holder was told it. */
export interface ModelRevoke {
  readonly reason: string;
  readonly forced: boolean;
}

export interface ModelRequest {
  readonly id: number;
  readonly lock: string;
  readonly mode: ModelMode;
  /** A semaphore request's weight (1 to MODEL_SEMAPHORE_LIMIT); 0 for the lock modes. */
  readonly weight: number;
  /** Asked for a resume grace: a cancel detaches it instead of ending it. */
  readonly resumable: boolean;
  /**
   * Requests ahead of it when its current stream was first told (holders included): when it
   * joined, or when it was resumed; undefined if it held by then.
   */
  firstAhead: number | undefined;
  held: boolean;
  /** Cancelled with a resume grace and not resumed yet: no stream speaks for it. */
  detached: boolean;
  /** How many streams it has had (1 + resumes). */
  streams: number;
  /** The revocation requests the holder was told, in order: at most a cooperative one, then a forced one. */
  readonly revokes: ModelRevoke[];
  end: ModelEnd | undefined;
}

function conflicts(a: ModelMode, b: ModelMode): boolean {
  return a !== 'read' || b !== 'read';
}

/** Whether `request`, with `ahead` in front of it in its queue, holds. */
function canHold(ahead: readonly ModelRequest[], request: Pick<ModelRequest, 'mode' | 'weight'>): boolean {
  if (request.mode === 'semaphore') {
    return ahead.reduce((sum, other) => sum + other.weight, request.weight) <= MODEL_SEMAPHORE_LIMIT;
  }
  return ahead.every((other) => !conflicts(other.mode, request.mode));
}

export class LockModel {
  readonly requests: ModelRequest[] = [];
  readonly #queues = new Map<string, ModelRequest[]>();

  /**
   * A new request for `lock`; `tryOnly`: wait_timeout 0; `resumable`: with a resume grace;
   * `weight` for a semaphore request. Returns it (already ended if it could not hold).
   */
  open(lock: string, mode: ModelMode, tryOnly: boolean, resumable = false, weight = 0): ModelRequest {
    const queue = this.#queues.get(lock) ?? [];
    this.#queues.set(lock, queue);
    const request: ModelRequest = {
      id: this.requests.length,
      lock,
      mode,
      weight: mode === 'semaphore' ? weight : 0,
      resumable,
      firstAhead: undefined,
      held: false,
      detached: false,
      streams: 1,
      revokes: [],
      end: undefined,
    };
    this.requests.push(request);
    const free = canHold(queue, request);
    if (!free && tryOnly) {
      request.end = 'not-free';
      return request;
    }
    queue.push(request);
    if (free) request.held = true;
    else request.firstAhead = queue.length - 1;
    return request;
  }

  /** The client sent `release`: a holder releases, a waiter is withdrawn. */
  release(id: number): void {
    const request = this.#attached(id);
    this.#leave(request, request.held ? 'released' : 'withdrawn');
  }

  /**
   * The client half-closed without `release`: as `release` without a resume grace; with one,
   * the request is kept, detached, as after a cancel (the frames cannot tell the two apart).
   */
  halfClose(id: number): void {
    const request = this.#attached(id);
    if (request.resumable) request.detached = true;
    else this.release(id);
  }

  /**
   * The client cancelled its call: without a resume grace whatever it held or waited for is
   * given up; with one, the request is kept as it is, detached.
   */
  cancel(id: number): void {
    const request = this.#attached(id);
    if (request.resumable) request.detached = true;
    else this.#leave(request, 'cancelled');
  }

  /** The connection under the request's stream broke: as a cancel, but the client saw UNAVAILABLE. */
  drop(id: number): void {
    const request = this.#attached(id);
    if (request.resumable) request.detached = true;
    else this.#leave(request, 'dropped');
  }

  /** How many times the serving instance was restarted or failed (see restartInstance, failInstance). */
  restarts = 0;

  /**
   * The lockstream instance serving every stream stops (SIGTERM) and another takes its place:
   * every stream ends with UNAVAILABLE; a request with a resume grace is handed over, kept
   * detached exactly as it stands (held, or in its place), for a resume on the next instance;
   * the others end as after a dropped connection.
   */
  restartInstance(): void {
    this.restarts += 1;
    for (const request of this.attached) this.drop(request.id);
  }

  /**
   * The lockstream instance serving every stream dies (SIGKILL) or pauses (SIGSTOP), and every
   * client fails over to another instance at once: every stream ends with UNAVAILABLE; each
   * attached request with a resume grace is resumed on the next instance (which takes the
   * failed one's ZooKeeper session over) and keeps its lock or its place; a detached one stays
   * detached, as it stands; the others end as after a dropped connection, but the taker keeps
   * them until their clients must have noticed, so the resumed requests are told where they
   * stand with those still in the queue; then it releases them. Returns the requests resumed,
   * in order.
   */
  failInstance(): number[] {
    this.restarts += 1;
    const attached = this.attached;
    const failingOver = attached.filter((request) => request.resumable).map((request) => request.id);
    for (const id of failingOver) this.drop(id);
    for (const id of failingOver) this.resume(id);
    for (const request of attached) if (!request.resumable) this.drop(request.id);
    return failingOver;
  }

  /** A new stream resumes a detached request: it is told where the request stands. */
  resume(id: number): void {
    const request = this.#live(id);
    if (!request.detached) throw new Error(`INVARIANT: request ${id} is not detached`);
    request.detached = false;
    request.streams += 1;
    request.firstAhead = request.held ? undefined : this.ahead(id);
  }

  /**
   * RevokeLock on `lock`: every holder is asked (the count returned). A holder is told the
   * request if it was told none, or if the request is forced and it was told only a cooperative
   * one; a forced request told takes the lock (its deadline, once told, stands: here the holder
   * loses the lock to it before any later request). Returns the holders asked and those that
   * lost the lock.
   */
  revoke(lock: string, reason: string, forced: boolean): { asked: number; lost: ModelRequest[] } {
    const holders = this.queue(lock).filter((request) => request.held);
    const lost: ModelRequest[] = [];
    for (const holder of holders) {
      const told = holder.revokes.at(-1);
      if (told !== undefined && (told.forced || !forced)) continue;
      holder.revokes.push({ reason, forced });
      if (forced) lost.push(holder);
    }
    for (const holder of lost) this.#leave(holder, 'lost');
    return { asked: holders.length, lost };
  }

  /** Requests still queued or holding. */
  get live(): ModelRequest[] {
    return this.requests.filter((request) => request.end === undefined);
  }

  /** Live requests a stream speaks for. */
  get attached(): ModelRequest[] {
    return this.live.filter((request) => !request.detached);
  }

  /** Live requests cancelled with a resume grace, not resumed yet. */
  get detached(): ModelRequest[] {
    return this.live.filter((request) => request.detached);
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

  #attached(id: number): ModelRequest {
    const request = this.#live(id);
    if (request.detached) throw new Error(`INVARIANT: request ${id} has no stream`);
    return request;
  }

  #leave(request: ModelRequest, end: ModelEnd): void {
    request.end = end;
    request.held = false;
    request.detached = false;
    const queue = this.#queues.get(request.lock) ?? [];
    queue.splice(queue.indexOf(request), 1);
    // Whoever can hold with what is ahead of it now holds.
    for (let i = 0; i < queue.length; i += 1) {
      const candidate = queue[i]!;
      if (!candidate.held && canHold(queue.slice(0, i), candidate)) candidate.held = true;
    }
  }
}
