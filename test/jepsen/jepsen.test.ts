import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { PlantedBug } from './cluster.js';
import { NEMESES, type NemesisName } from './nemeses.js';
import { runJepsen, type JepsenOptions, type JepsenResult } from './run-jepsen.js';

/*
 * The partition suite's short mode, through the same runJepsen as `npm run jepsen`: one run with
 * every nemesis applied at least once (the checker must find nothing), and one short run per
 * planted bug with the nemesis that exposes it (the checker must catch it). Every run must also
 * mean something: enough grants, no process crashed, the checker decided. About 5 minutes of
 * wall time on two cores; the reports are under .tmp/jepsen/ci-*.
 */

const OUT = path.resolve('.tmp/jepsen');

async function run(name: string, options: Partial<JepsenOptions> & { timeS: number }): Promise<JepsenResult> {
  const result = await runJepsen({
    nemeses: [],
    seed: Math.floor(Math.random() * 2 ** 31),
    out: path.join(OUT, `ci-${name}`),
    clients: 9,
    locks: 2,
    log: (line) => console.info(`[${name}] ${line}`),
    ...options,
  });
  const tail = result.verdict.stdout.trim().split('\n').slice(-12).join('\n');
  console.info(
    `[${name}] ${tail}\n[${name}] grants ${result.grants}, checks ${result.checks}, applied ` +
      `${JSON.stringify(result.applied)}; report ${result.verdict.report}`,
  );
  return result;
}

describe('the partition suite (npm run jepsen, short mode)', () => {
  it('finds no anomaly while every nemesis is applied in turn', async () => {
    const nemeses: NemesisName[] = [...NEMESES];
    const result = await run('all', {
      timeS: 150,
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
  }, 330_000);

  const plants: Array<[PlantedBug, NemesisName, number]> = [
    // Caught by the check right after a release returned, under any fault or none.
    ['released-early', 'partition-instance-zk', 15],
    // A client that holds on after it was told lost, on an instance cut from ZooKeeper.
    ['ignore-lost', 'partition-instance-zk', 30],
  ];
  // follower-reads under partition-follower (two holders while s1's follower answers reads
  // alone) is not caught at 4f828fc: s1 moves off its member a quarter of the session timeout
  // after the leader last confirmed it, and with the heartbeat a sync the follower's own replies
  // never come; the plant must also keep s1 on its member. Back in the list once it bites.
  it.todo('catches the planted bug follower-reads under partition-follower');

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
    120_000,
  );
});
