import { ZooKeeper } from '../../src/server/stores/zookeeper/zookeeper-client.js';
import { ZooKeeperStore } from '../../src/server/stores/zookeeper/zookeeper-store.js';
import type { CoordinationStore } from '../../src/server/stores/store.js';

/**
 * Expires the store's ZooKeeper session for real: a second handle attaches to the same session
 * (id and password) and closes it, which ends the session on the ensemble as an expiry does.
 * If the store's own handle reconnects first and takes the session back, the close misses, so
 * it is repeated until the store's session is gone. Resolves once the store has noticed.
 */
export async function expireZooKeeperSession(store: CoordinationStore, connectString: string): Promise<void> {
  if (!(store instanceof ZooKeeperStore)) throw new Error('INVARIANT: not the ZooKeeper store');
  const lost = store.session.lost;
  const { id, password } = store.sessionCredentials;
  const noticed = new Promise((resolve) => lost.addEventListener('abort', resolve, { once: true }));
  for (let attempt = 1; !lost.aborted; attempt += 1) {
    if (attempt > 20) throw new Error(`session ${id} did not expire after ${attempt - 1} closes`);
    const config = {
      connect: connectString,
      timeout: 10_000,
      debug_level: 0,
      host_order_deterministic: false,
      client_id: id,
      client_password: password,
    };
    const intruder = new ZooKeeper(config);
    await new Promise<void>((resolve) => {
      intruder.once('connect', () => resolve());
      intruder.once('close', () => resolve());
      intruder.init(config);
    });
    intruder.close();
    await Promise.race([noticed, new Promise((resolve) => setTimeout(resolve, 500))]);
  }
}
