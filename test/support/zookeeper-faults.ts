import { parseConnectString } from '../../src/server/stores/zookeeper/protocol/connection-options.js';
import { ZooKeeperConnection } from '../../src/server/stores/zookeeper/protocol/connection.js';
import { ZooKeeperStore } from '../../src/server/stores/zookeeper/zookeeper-store.js';
import type { CoordinationStore } from '../../src/server/stores/store.js';

/**
 * Expires the store's ZooKeeper session for real: a second connection attaches to the same
 * session (id and password) and closes it, which ends the session on the ensemble as an expiry
 * does. If the store's own connection reconnects first and takes the session back, the close
 * misses, so it is repeated until the store's session is gone. Resolves once the store has noticed.
 */
export async function expireZooKeeperSession(store: CoordinationStore, connectString: string): Promise<void> {
  if (!(store instanceof ZooKeeperStore)) throw new Error('INVARIANT: not the ZooKeeper store');
  const lost = store.session.lost;
  const session = store.sessionCredentials;
  const { servers } = parseConnectString(connectString);
  const noticed = new Promise((resolve) => lost.addEventListener('abort', resolve, { once: true }));
  for (let attempt = 1; !lost.aborted; attempt += 1) {
    if (attempt > 20) throw new Error(`session ${session.id} did not expire after ${attempt - 1} closes`);
    // Rejects when the session has expired already: then there is nothing left to close.
    const intruder = await ZooKeeperConnection.connect({ servers, sessionTimeoutMs: 10_000, session }).catch(
      () => undefined,
    );
    await intruder?.close();
    await Promise.race([noticed, new Promise((resolve) => setTimeout(resolve, 500))]);
  }
  // The store may have let the session go rather than seen it end (given up while its link and
  // ours took the session from each other, as ZooKeeper allows): then it lives on, its nodes
  // too, until closed. Closed here until no handle can attach to it any more.
  for (let attempt = 1; ; attempt += 1) {
    if (attempt > 20) throw new Error(`session ${session.id} still alive after ${attempt - 1} closes`);
    const intruder = await ZooKeeperConnection.connect({ servers, sessionTimeoutMs: 10_000, session }).catch(
      () => undefined,
    );
    if (!intruder) return;
    await intruder.close();
  }
}
