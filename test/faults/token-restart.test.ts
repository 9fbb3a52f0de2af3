import { describe, expect, it } from 'vitest';
import { faultFixture } from '../support/fault-fixture.js';
import { scaled } from '../support/timing.js';

/** Grants in each run: a burst, as fast as one client takes and releases a lock. */
const GRANTS_PER_RUN = 200;

/*
 * The embedded store keeps nothing on disk, so what makes its fencing tokens grow across a
 * restart is where it starts counting (the wall clock at its start: see clockStartingId). A
 * resource that remembers the highest token it has seen must never be shown a lower one by a
 * holder after a restart, whether the server stopped cleanly or was killed.
 */
describe('fencing tokens on the embedded store', () => {
  const fixture = faultFixture();

  it(
    'grow across restarts with the same command line, after SIGTERM and after kill -9 alike',
    async () => {
      const runs: Array<{ ended: string; tokens: bigint[] }> = [];
      for (const signal of ['SIGTERM', 'SIGKILL', undefined] as const) {
        // The quick start's command line, every time: no flag of any kind.
        const server = await fixture.serve([]);
        const locks = fixture.client(server.address);
        const tokens: bigint[] = [];
        for (let grant = 0; grant < GRANTS_PER_RUN; grant += 1) {
          const lock = await locks.acquire('restart/report');
          tokens.push(lock.token);
          await lock.release();
        }
        locks.close();
        runs.push({ ended: signal ?? 'still running', tokens });
        if (signal) await server.kill(signal);
      }
      const all = runs.flatMap((run) => run.tokens);
      for (let at = 1; at < all.length; at += 1) {
        expect(
          all[at]! > all[at - 1]!,
          `token ${all[at]} (grant ${at % GRANTS_PER_RUN} of run ${Math.floor(at / GRANTS_PER_RUN) + 1}) after ${all[at - 1]}; runs ended by ${runs.map((run) => run.ended).join(', ')}`,
        ).toBe(true);
      }
      // Within a run they count up one by one; across a restart they start above the last one.
      for (const run of runs) expect(run.tokens.at(-1)! - run.tokens[0]!).toBe(BigInt(GRANTS_PER_RUN - 1));
    },
    scaled(60_000),
  );
});
