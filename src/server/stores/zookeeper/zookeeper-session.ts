/* One ZooKeeper session of the store, as its holders see it. */
import type { LockError } from '../../lock-error.js';
import { SessionState } from '../session-state.js';
import type { OwnedRecord } from './session-ownership.js';

/** One ZooKeeper session of the store, as its holders see it (see SessionKeeper). */
export class ZooKeeperSession extends SessionState {
  /** Set once ZooKeeper has granted the session: only then is there anything to lose. */
  established = false;
  /** While sessions are published: the session's record, once published or claimed. */
  owned: OwnedRecord | undefined;
  /**
   * Set when the store let the session go while it lives on (taken over by another instance,
   * or given up or handed over while published, for another to take): its nodes may be someone
   * else's, so a write made for it rejects with this instead of going out on a later session.
   */
  letGo: LockError | undefined;
  constructor() {
    super('connecting', false);
  }
}
