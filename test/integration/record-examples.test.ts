import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LockClient } from '../../src/client/index.js';
import { InteractiveProcess } from '../support/interactive-process.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { scaled } from '../support/timing.js';

/**
 * The guarded records example (examples/typescript/records.ts): each run under the lock carries
 * on from the last one's checkpoint, and a run whose lock is held elsewhere waits its turn.
 * docs/records.md shows its [docs:records] region (test/integration/docs-code-blocks.test.ts).
 */

const repo = fileURLToPath(new URL('../../', import.meta.url));
const FILE = 'examples/typescript/records.ts';

function run(address: string, name: string): InteractiveProcess {
  return new InteractiveProcess(
    process.execPath,
    ['--import', 'tsx', join(repo, FILE), '--address', address, '--name', name],
    { cwd: repo },
  );
}

describe('the records example', () => {
  let server: ServerProcess;
  let client: LockClient;

  beforeAll(async () => {
    server = await startServerProcess([]);
    client = new LockClient(server.address);
  }, scaled(60_000));

  afterAll(async () => {
    client?.close();
    await server?.kill('SIGTERM');
  });

  it(
    'carries on from the checkpoint each run wrote: batch 1, then 2, then 3 (one run waiting for another)',
    async () => {
      const name = `examples/records-${Date.now()}`;
      const first = run(server.address, name);
      await first.waitFor(/batch 1 done \(revision 1\)/);
      expect(await first.exited).toBe(0);
      // Two at once: one waits for the other's lock, then reads its checkpoint.
      const [second, third] = [run(server.address, name), run(server.address, name)];
      expect([await second.exited, await third.exited]).toEqual([0, 0]);
      const done = [second.stdout, third.stdout].map((out) => /batch (\d) done/.exec(out)?.[1]).sort();
      expect(done).toEqual(['2', '3']);
      const checkpoint = await client.getRecord(name, 'checkpoint');
      expect([Buffer.from(checkpoint?.value ?? []).toString(), checkpoint?.revision]).toEqual(['3', 3n]);
    },
    scaled(60_000),
  );
});
