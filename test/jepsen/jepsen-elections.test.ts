import { describe, expect, it } from 'vitest';
import type { PlantedBug } from './workloads.js';
import { ELECTION_NEMESES } from './nemeses.js';
import { ciRun } from './ci-runs.js';
import type { JepsenOptions, JepsenResult } from './run-jepsen.js';
import { scaled } from '../support/timing.js';

/*
 * The partition suite's elections workload, short mode, through the same runJepsen as
 * `npm run jepsen -- --elections`: 5 candidates and 3 observers of one election across the three
 * instances on ZooKeeper. One run with every election nemesis applied at least once (kill -9 and
 * SIGSTOP of candidates, observers and instances, a candidate's instance cut from ZooKeeper, a
 * client cut from its instance, an instance's clock jumping): the checker must find nothing
 * (observers' sequences against the replayed history, two leaders at once, stale Proclaim and
 * Resign accepted), over at least 30 terms. And one short run per planted bug of elections: the
 * checker must catch it. About 3 minutes of wall time on two cores; the reports are under
 * .tmp/jepsen/ci-elections-*.
 */

function run(name: string, options: Partial<JepsenOptions> & { timeS: number }): Promise<JepsenResult> {
  return ciRun(
    `elections-${name}`,
    name,
    { nemeses: [], clients: 0, locks: 0, workload: 'elections', candidates: 5, observers: 3, ...options },
    (result) =>
      `terms ${result.terms}, told elected ${result.grants}, strict loss rule ${result.strict?.anomalies} anomalies`,
  );
}

describe('the partition suite, elections (npm run jepsen -- --elections, short mode)', () => {
  it(
    'finds no anomaly over dozens of terms while every election nemesis is applied in turn',
    async () => {
      const nemeses = [...ELECTION_NEMESES];
      // 7 nemeses at about 9.8 s each (fault, heal, restarts): every one applied once, with room
      // for the slowest draws (at most 11 s each).
      const result = await run('all', {
        timeS: 80,
        nemeses,
        faultMs: [4_500, 6_000],
        healMs: [3_500, 5_000],
        requireEveryNemesis: true,
        minTerms: 30,
      });
      expect(result.problems).toEqual([]);
      for (const name of nemeses) expect(result.applied[name], name).toBeGreaterThanOrEqual(1);
      expect(result.terms).toBeGreaterThanOrEqual(30);
      expect(result.verdict.stdout).toMatch(/election e0: \d+ terms in the history .*; 0 anomalies/);
      expect(result.verdict.anomalies, result.verdict.stdout).toBe(0);
      expect(result.exitCode).toBe(0);
    },
    scaled(180_000),
  );

  const plants: Array<[PlantedBug, RegExp]> = [
    // A leader that resigns within 300 ms of `elected` is never recorded: quick terms.
    ['elected-early', /a term told to its leader was never recorded/],
    // An observer that resumes from the last term it was told is never told it: streams restart often.
    ['observer-skips', /the observer was not told every term/],
  ];

  it.each(plants)(
    'catches the planted bug %s',
    async (plant, caught) => {
      const result = await run(plant, {
        timeS: 12,
        plant,
        election: { quick: 0.5, observeMs: '1500-4000' },
        minTerms: 5,
      });
      expect(result.problems).toEqual([]);
      expect(result.verdict.anomalies, result.verdict.stdout).toBeGreaterThan(0);
      expect(result.verdict.stdout).toMatch(caught);
      expect(result.exitCode).toBe(0);
    },
    scaled(90_000),
  );
});
