/*
 * The one writer of a lock stream: messages go out in the order of their events, and while a slow
 * reader backs the stream up, only the newest place or heartbeat waits.
 */
/** What the writer needs of a gRPC server stream. */
export interface WritableCall<M> {
  write(message: M, written?: () => void): boolean;
  once(event: 'drain', listener: () => void): unknown;
}

/**
 * The one writer of a stream: messages go out in the order of the events they report. Most
 * are a handful per request and are written at once; the exceptions are the messages where
 * only the newest matters (a request's place in its queue, a heartbeat): while the stream is
 * backed up (a reader that does not keep up) those wait, and a newer one about the same thing
 * replaces the older, so a slow reader costs one message per request, not a growing queue.
 * Any other message first writes the ones waiting (or drops the one about its own request,
 * which it makes stale), so nothing overtakes what happened before it.
 */
export class StreamWriter<M> {
  readonly #call: WritableCall<M>;
  #backedUp = false;
  /**
   * Messages of which only the newest matters, by what they are about; in arrival order. Made
   * the first time the stream backs up (most streams never do).
   */
  #latest: Map<number, M> | undefined;

  constructor(call: WritableCall<M>) {
    this.#call = call;
  }

  /**
   * Writes `message` about `key` (drops a waiting latest-only message about the same key);
   * `written` is called once the stream has handed it to HTTP/2 (or failed to).
   */
  write(key: number, message: M, written?: () => void): void {
    if (this.#latest && this.#latest.size > 0) {
      this.#latest.delete(key);
      this.#flushLatest();
    }
    this.#write(message, written);
  }

  /** Writes `message` about `key`, or keeps it until the stream drains, replacing an older one. */
  writeLatest(key: number, message: M): void {
    if (!this.#backedUp) {
      this.#write(message);
      return;
    }
    const latest = (this.#latest ??= new Map());
    latest.delete(key);
    latest.set(key, message);
  }

  #write(message: M, written?: () => void): void {
    if (this.#call.write(message, written) || this.#backedUp) return;
    this.#backedUp = true;
    this.#call.once('drain', () => {
      this.#backedUp = false;
      this.#flushLatest();
    });
  }

  #flushLatest(): void {
    const latest = this.#latest;
    if (!latest || latest.size === 0) return;
    const waiting = [...latest.values()];
    latest.clear();
    for (const message of waiting) this.#write(message);
  }
}
