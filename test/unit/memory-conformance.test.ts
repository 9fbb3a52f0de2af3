import { MemoryStore } from '../../src/server/stores/memory/memory-store.js';
import { describeLockConformance } from '../contract/lock-conformance.js';

describeLockConformance('memory', {
  serveArgs: () => [],
  expireSession: async (server) => {
    if (!(server.store instanceof MemoryStore)) throw new Error('INVARIANT: not the memory store');
    server.store.expireSession();
  },
});
