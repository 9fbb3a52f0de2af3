import type { CreatedNode } from '../stores/store.js';
import { grantPart, type AcquireListener, type AcquisitionEngine, type Part } from './request-part.js';
import { QueuePlace, Withdrawal, type AcquireRequest, type Lease } from './lock-request.js';
import { MultiLease } from './multi-lease.js';
import type { HeldPosition } from './queue-position.js';

/** Where one lock of a multi-lock stands when its turn comes. */
interface Turn {
  readonly current: HeldPosition;
  readonly children: readonly string[];
}

/**
 * A multi-lock, all or none: its nodes were created in one transaction (so the request has
 * one place in a single order across every lock: two multi-locks cannot each wait for the
 * other); each waits for its turn as a single request does, and the locks are handed out
 * together once every node's turn has come. Any part's failure (deadline, withdrawal, a
 * vanished node) ends the whole request. Its place told is the sum of its parts' places.
 */
export async function waitForAll(
  engine: AcquisitionEngine,
  request: AcquireRequest,
  parts: readonly Part[],
  created: readonly CreatedNode[],
  stop: Withdrawal,
  place: QueuePlace | undefined,
  listener: AcquireListener,
): Promise<Lease> {
  // One withdrawal for every part: the caller's (or the deadline's), or the first failure.
  const together = new Withdrawal();
  const unlink = stop.onWithdrawn((reason) => together.withdraw(reason));
  const aheads = parts.map(() => 0);
  const places = parts.map(() => new QueuePlace());
  place?.bind({
    recount: async () => (await Promise.all(places.map((each) => each.recount()))).some(Boolean),
  });
  try {
    const turns = await Promise.all(
      parts.map((part, i) =>
        new Promise<Turn>((resolve, reject) => {
          engine.waits.waitForTurn(part.request, created[i]!, part.node, together, places[i], part.wakeup, {
            queued: (ahead) => {
              aheads[i] = ahead;
              listener.queued(aheads.reduce((sum, each) => sum + each, 0));
            },
            turn: (current, children) => {
              aheads[i] = 0;
              resolve({ current, children });
            },
            turnFailed: reject,
          });
        }).catch((error: unknown) => {
          together.withdraw(error);
          throw error;
        }),
      ),
    );
    const leases = parts.map((part, i) => grantPart(engine, part, turns[i]!.current, turns[i]!.children));
    return new MultiLease(request.name, leases, engine.store);
  } finally {
    unlink();
    place?.bind(undefined);
  }
}
