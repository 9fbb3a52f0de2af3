import { describe, expect, it } from 'vitest';
import type { PlantedBug } from './workloads.js';
import { NEMESES, type NemesisName } from './nemeses.js';
import { ciRun } from './ci-runs.js';
import type { JepsenOptions, JepsenResult } from './run-jepsen.js';
import { scaled } from '../support/timing.js';

/*
 * The partition suite's short mode, through the same runJepsen as `npm run jepsen`: one run with
 * every nemesis applied at least once (the checker must find nothing), and one short run per
 * planted bug with the nemesis that exposes it (the checker must catch it). Every run must also
 * mean something: enough grants, no process crashed, the checker decided. About 5 minutes of
 * wall time on two cores; the reports are under .tmp/jepsen/ci-*.
 */

function run(name: string, options: Partial<JepsenOptions> & { timeS: number }): Promise<JepsenResult> {
  return ciRun(
    name,
    name,
    { nemeses: [], clients: 9, locks: 2, ...options },
    (result) => `grants ${result.grants}, checks ${result.checks}`,
  );
}

describe('the partition suite (npm run jepsen, short mode)', () => {
  it(
    'finds no anomaly while every nemesis is applied in turn',
    async () => {
      const nemeses: NemesisName[] = [...NEMESES];
      // 15 nemeses at about 9.5 s each (fault and heal), plus the membership change's own
      // reconfigurations and JVM starts (about 9 s a round: the first round ended at 154 s).
      const result = await run('all', {
        timeS: 170,
        nemeses,
        faultMs: [4_500, 6_000],
        healMs: [3_500, 5_000],
        requireEveryNemesis: true,
      });
      expect(result.problems).toEqual([]);
      for (const name of nemeses) expect(result.applied[name], name).toBeGreaterThanOrEqual(1);
      expect(result.grants).toBeGreaterThanOrEqual(100);
      expect(result.verdict.anomalies, result.verdict.stdout).toBe(0);
      expect(result.exitCode).toBe(0);
    },
    scaled(330_000),
  );

  const plants: Array<[PlantedBug, NemesisName, number]> = [
    // Caught by the check right after a release returned, under any fault or none.
    ['released-early', 'partition-instance-zk', 15],
    // A client that holds on after it was told lost, on an instance cut from ZooKeeper.
    ['ignore-lost', 'partition-instance-zk', 30],
  ];
  // follower-reads bites only while the cut-off follower has a session with nothing written in
  // flight: it answers that session's reads alone, but a read behind a pending write waits for
  // the write, which waits for the leader. This run's instances are busy, so the bug is caught
  // where its holder is idle: test/faults/follower-partition.test.ts runs the same checker on
  // the same partition with the bug planted, and expects anomalies.

  it.each(plants)(
    'catches the planted bug %s under %s',
    async (plant, nemesis, timeS) => {
      const result = await run(plant, {
        timeS,
        nemeses: [nemesis],
        plant,
        faultMs: [6_000, 8_000],
        healMs: [3_000, 4_000],
        minGrants: 10,
        requireEveryNemesis: true,
      });
      expect(result.problems).toEqual([]);
      expect(result.verdict.anomalies, result.verdict.stdout).toBeGreaterThan(0);
      expect(result.exitCode).toBe(0);
    },
    scaled(120_000),
  );
});
