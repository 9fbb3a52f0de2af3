import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/setup/global-zookeeper.ts'],
    // Makes connecting and listening throw in test/unit files (and only there).
    setupFiles: ['test/setup/unit-no-sockets.ts'],
    // Child processes (ZooKeeper JVMs, native ZooKeeper client) are better isolated in forks.
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
