import type { RunningServer } from '../../src/server/main.js';
import { MemoryStore } from '../../src/server/stores/memory/memory-store.js';
import { describeLockConformance } from '../contract/lock-conformance.js';

function embeddedStore(server: RunningServer): MemoryStore {
  if (!(server.store instanceof MemoryStore)) throw new Error('INVARIANT: not the memory store');
  return server.store;
}

describeLockConformance('memory', {
  serveArgs: () => [],
  expireSession: async (server) => embeddedStore(server).expireSession(),
  setSessionConfirmed: async (server, confirmed) => embeddedStore(server).setSessionConfirmed(confirmed),
});
