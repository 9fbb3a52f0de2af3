/**
 * How a lock is shared. `mutex` and `write` are both exclusive and share one queue with `read`;
 * `semaphore` is counted (see semaphore-position in queue-position.ts) and shares its queue with
 * semaphore requests of the same limit only.
 */
export type LockMode = 'mutex' | 'read' | 'write' | 'semaphore';

export function isExclusive(mode: LockMode): boolean {
  return mode !== 'read';
}

/**
 * The grant rule of the lock modes, written once: two requests for one lock conflict (the later
 * waits for the earlier) unless both are reads. A request holds the lock when no request ahead
 * of it in the queue conflicts with it. position() (the engine), holderCount() (the inspector)
 * and the property test of both derive from this. A semaphore request ahead of a lock request
 * (which fails as soon as it lists, see agreement()) conflicts with it, as does a lock request
 * ahead of a semaphore request.
 */
export function conflicts(a: LockMode, b: LockMode): boolean {
  return isExclusive(a) || isExclusive(b);
}
