/** How a lock is shared. `mutex` and `write` are both exclusive and share one queue with `read`. */
export type LockMode = 'mutex' | 'read' | 'write';

export function isExclusive(mode: LockMode): boolean {
  return mode !== 'read';
}

/**
 * The grant rule, written once: two requests for one lock conflict (the later waits for the
 * earlier) unless both are reads. A request holds the lock when no request ahead of it in the
 * queue conflicts with it. position() (the engine), holderCount() (the inspector) and the
 * property test of both derive from this.
 */
export function conflicts(a: LockMode, b: LockMode): boolean {
  return isExclusive(a) || isExclusive(b);
}
