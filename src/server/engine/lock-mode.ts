/** How a lock is shared. `mutex` and `write` are both exclusive and share one queue with `read`. */
export type LockMode = 'mutex' | 'read' | 'write';

export function isExclusive(mode: LockMode): boolean {
  return mode !== 'read';
}
