/*
 * The lock requests on each store session, told of its loss and of its doubt through one pair of
 * listeners per session.
 */
import { onAbort } from '../../common/abort.js';
import type { StoreSession } from '../stores/store.js';

/** What a lock request hears of its store session. */
export interface SessionDependent {
  /** The session was lost: its nodes are gone (or must be taken as gone). */
  sessionLost(): void;
  /** The session fell in doubt (`false`) or is vouched for again (`true`). */
  confirmationChanged(confirmed: boolean): void;
}

interface Dependents {
  readonly members: Set<SessionDependent>;
  /** Unsubscribes from the session. */
  readonly stop: () => void;
}

/**
 * The lock requests of one engine on each store session, told of its loss and of its doubt
 * through one pair of listeners per session rather than a pair of closures per request (a
 * server holds tens of thousands of requests on one session). A session is listened to while
 * it has requests here.
 */
export class SessionDependents {
  readonly #bySession = new Map<StoreSession, Dependents>();

  /** `dependent` hears of `session` until `remove` (or its loss); `session` must not be lost yet. */
  add(session: StoreSession, dependent: SessionDependent): void {
    let dependents = this.#bySession.get(session);
    if (!dependents) {
      const members = new Set<SessionDependent>();
      const unconfirm = session.onConfirmedChange((confirmed) => {
        for (const member of [...members]) member.confirmationChanged(confirmed);
      });
      const unlose = onAbort(session.lost, () => {
        unconfirm();
        if (this.#bySession.get(session)?.members === members) this.#bySession.delete(session);
        for (const member of [...members]) member.sessionLost();
        members.clear();
      });
      dependents = {
        members,
        stop: () => {
          unconfirm();
          unlose();
        },
      };
      this.#bySession.set(session, dependents);
    }
    dependents.members.add(dependent);
  }

  remove(session: StoreSession, dependent: SessionDependent): void {
    const dependents = this.#bySession.get(session);
    if (!dependents?.members.delete(dependent) || dependents.members.size > 0) return;
    dependents.stop();
    this.#bySession.delete(session);
  }
}
