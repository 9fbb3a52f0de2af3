import { configDefaults, defineConfig } from 'vitest/config';
import type { TestProjectInlineConfiguration } from 'vitest/config';
import { scaled } from './test/support/timing.js';

/** What every test file runs with. */
const common = {
  // Makes connecting and listening throw in test/unit files (and only there).
  setupFiles: ['test/setup/unit-no-sockets.ts'],
  // Child processes (ZooKeeper JVMs, native ZooKeeper client) are better isolated in forks.
  pool: 'forks',
  // LOCKSTREAM_TEST_TIME_SCALE stretches both on a slow machine (test/support/timing.ts).
  testTimeout: scaled(30_000),
  hookTimeout: scaled(60_000),
  // expect.poll without a timeout of its own: vitest's 1 s, stretched the same way.
  expect: { poll: { timeout: scaled(1_000) } },
} satisfies TestProjectInlineConfiguration['test'];

const PARTITION_SUITE = 'test/jepsen/**/*.test.ts';

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          ...common,
          name: 'suite',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, PARTITION_SUITE],
          // One real ZooKeeper shared by the whole run (each test uses a root node of its own).
          globalSetup: ['test/setup/global-zookeeper.ts'],
          // Two files at a time, whatever the number of cores (vitest's default is one fewer
          // worker than cores: a single one on CI's two). Most files spend their time waiting
          // on ZooKeeper, timers and child processes, not on the CPU; everything a file starts
          // is its own (free ports, temp dirs, root nodes, Go binaries put in place by rename).
          maxWorkers: 2,
        },
      },
      {
        test: {
          ...common,
          name: 'partition-suite',
          include: [PARTITION_SUITE],
          // Alone, after the rest: each file runs three ZooKeeper members and three instances on
          // test hosts of its own for minutes, CPU-bound, and its nemeses' timing is its meaning.
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
