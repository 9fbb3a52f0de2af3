import { defineConfig } from 'vitest/config';
import { scaled } from './test/support/timing.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/setup/global-zookeeper.ts'],
    // Makes connecting and listening throw in test/unit files (and only there).
    setupFiles: ['test/setup/unit-no-sockets.ts'],
    // Child processes (ZooKeeper JVMs, native ZooKeeper client) are better isolated in forks.
    pool: 'forks',
    // LOCKSTREAM_TEST_TIME_SCALE stretches both on a slow machine (test/support/timing.ts).
    testTimeout: scaled(30_000),
    hookTimeout: scaled(60_000),
    // expect.poll without a timeout of its own: vitest's 1 s, stretched the same way.
    expect: { poll: { timeout: scaled(1_000) } },
  },
});
