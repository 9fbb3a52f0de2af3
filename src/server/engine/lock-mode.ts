/**
 * How a lock is shared. `mutex` and `write` are both exclusive and share one queue with `read`;
 * `semaphore` is counted (see holds() in queue-position.ts) and shares its queue with
 * semaphore requests of the same limit only.
 */
export type LockMode = 'mutex' | 'read' | 'write' | 'semaphore';

export function isExclusive(mode: LockMode): boolean {
  return mode !== 'read';
}

/**
 * Which lock modes conflict: two requests for one lock conflict (the later waits for the
 * earlier) unless both are reads. The grant rule (holds() in queue-position.ts, the one fold
 * over a queue) is built on this. A semaphore request ahead of a lock request (which fails as
 * soon as it lists, see disagreement()) conflicts with it, as does a lock request ahead of a
 * semaphore request.
 */
export function conflicts(a: LockMode, b: LockMode): boolean {
  return isExclusive(a) || isExclusive(b);
}
