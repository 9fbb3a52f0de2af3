import { pino } from 'pino';
import { LockEngine } from '../../src/server/engine/lock-engine.js';
import { MemoryStore } from '../../src/server/stores/memory/memory-store.js';
import { describeEngineContract } from '../contract/engine-contract.js';

describeEngineContract('memory', async (rootPath) => {
  const store = new MemoryStore();
  return {
    engine: new LockEngine({ store, replacement: store, rootPath, logger: pino({ level: 'silent' }) }),
    store,
    expireSession: async () => store.expireSession(),
    close: () => store.close(),
  };
});
