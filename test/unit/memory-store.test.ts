import { MemoryStore } from '../../src/server/stores/memory/memory-store.js';
import { describeStoreContract } from '../contract/store-contract.js';

describeStoreContract('memory', async () => {
  const store = new MemoryStore();
  return {
    store,
    expireSession: async () => {
      store.expireSession();
    },
  };
});
