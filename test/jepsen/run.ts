/**
 * npm run jepsen -- [--time <s>] [--nemesis <list>|all] [--plant <bug>] [--seed <n>]
 *   [--out <dir>] [--clients <n>] [--locks <n>] [--fault-s <min>-<max>] [--heal-s <min>-<max>]
 *   [--workload locks|elections|records] [--elections] [--records] [--candidates <n>] [--observers <n>]
 *   [--hold-ms <min>-<max>] [--quick <p>] [--grace-ms <n>] [--observe-ms <min>-<max>] [--min-terms <n>]
 *   [--grace-on s1,s3] [--keys <n>] [--increments <min>-<max>] [--think-ms <min>-<max>]
 *
 * One partition-suite run (run-jepsen.ts; test/jepsen/README.md). Exits 0 when the checker found
 * no anomaly (with --plant: when it caught the planted bug), 1 when it found anomalies (with
 * --plant: when it did not catch the bug), 2 when the run proves nothing (too few grants, a
 * crashed process, the checker undecided). The last line is `<n> operations, <k> anomalies`.
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import { bugWorkload, PLANTED_BUGS, type PlantedBug } from './workloads.js';
import { ELECTION_NEMESES, NEMESES, OTHER_NEMESES, RECORDS_NEMESES, type NemesisName } from './nemeses.js';
import { runJepsen } from './run-jepsen.js';

const { values } = parseArgs({
  options: {
    time: { type: 'string', default: '60' },
    nemesis: { type: 'string', default: 'all' },
    plant: { type: 'string' },
    seed: { type: 'string' },
    out: { type: 'string' },
    clients: { type: 'string' },
    locks: { type: 'string' },
    'fault-s': { type: 'string', default: '5-10' },
    'heal-s': { type: 'string', default: '5-10' },
    workload: { type: 'string', default: 'locks' },
    elections: { type: 'boolean', default: false },
    records: { type: 'boolean', default: false },
    keys: { type: 'string' },
    increments: { type: 'string' },
    'think-ms': { type: 'string' },
    candidates: { type: 'string', default: '5' },
    observers: { type: 'string', default: '3' },
    'hold-ms': { type: 'string' },
    quick: { type: 'string' },
    'grace-ms': { type: 'string' },
    'min-terms': { type: 'string' },
    'observe-ms': { type: 'string' },
    'grace-on': { type: 'string' },
  },
});

function fail(message: string): never {
  console.error(message);
  process.exit(2);
}

const workload = values.elections ? 'elections' : values.records ? 'records' : values.workload;
if (workload !== 'locks' && workload !== 'elections' && workload !== 'records')
  fail(`--workload ${workload}: expected locks, elections or records`);
const elections = workload === 'elections';
const records = workload === 'records';
const named: readonly string[] = [...NEMESES, ...OTHER_NEMESES];
const nemeses: NemesisName[] =
  values.nemesis === 'all'
    ? [...(elections ? ELECTION_NEMESES : records ? RECORDS_NEMESES : NEMESES)]
    : values.nemesis === 'none' || values.nemesis === ''
      ? []
      : values.nemesis.split(',').map((name) => {
          if (!named.includes(name))
            fail(`--nemesis ${name}: expected a list of ${named.join(', ')}, or all, or none`);
          return name as NemesisName;
        });
const plant = values.plant;
if (plant !== undefined && !(PLANTED_BUGS as readonly string[]).includes(plant))
  fail(`--plant ${plant}: expected one of ${PLANTED_BUGS.join(', ')}`);
if (plant !== undefined && bugWorkload(plant as PlantedBug) !== workload)
  fail(`--plant ${plant}: needs --workload ${bugWorkload(plant as PlantedBug)}`);
const number = (name: string, text: string, low: number): number => {
  const value = Number(text);
  if (!Number.isInteger(value) || value < low) fail(`--${name} ${text}: expected an integer ≥ ${low}`);
  return value;
};
const seconds = (name: string, text: string): [number, number] => {
  const [low, high] = text.split('-').map(Number);
  if (low === undefined || !(low > 0) || (high !== undefined && !(high >= low)))
    fail(`--${name} ${text}: expected seconds as <min>-<max> or <n>`);
  return [low * 1000, (high ?? low) * 1000];
};
const stamp = new Date().toISOString().replace(/[:.]/g, '-');

const result = await runJepsen({
  timeS: number('time', values.time, 1),
  nemeses,
  plant: plant as PlantedBug | undefined,
  seed: values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : number('seed', values.seed, 0),
  out: path.resolve(values.out ?? `.tmp/jepsen/${stamp}`),
  clients: number('clients', values.clients ?? (records ? '6' : '9'), 1),
  locks: number('locks', values.locks ?? (records ? '3' : '2'), 1),
  faultMs: seconds('fault-s', values['fault-s']),
  healMs: seconds('heal-s', values['heal-s']),
  workload,
  candidates: number('candidates', values.candidates, 1),
  observers: number('observers', values.observers, 1),
  election: {
    ...(values['hold-ms'] === undefined ? {} : { holdMs: values['hold-ms'] }),
    ...(values.quick === undefined ? {} : { quick: Number(values.quick) }),
    ...(values['grace-ms'] === undefined ? {} : { graceMs: number('grace-ms', values['grace-ms'], 0) }),
    ...(values['observe-ms'] === undefined ? {} : { observeMs: values['observe-ms'] }),
    ...(values['grace-on'] === undefined ? {} : { graceInstances: values['grace-on'].split(',') }),
  },
  records: {
    ...(values.keys === undefined ? {} : { keys: number('keys', values.keys, 1) }),
    ...(values.increments === undefined ? {} : { increments: values.increments }),
    ...(values['think-ms'] === undefined ? {} : { thinkMs: values['think-ms'] }),
    ...(values['grace-ms'] === undefined ? {} : { graceMs: number('grace-ms', values['grace-ms'], 0) }),
  },
  ...(values['min-terms'] === undefined ? {} : { minTerms: number('min-terms', values['min-terms'], 0) }),
  log: (line) => console.log(line),
});

const { verdict } = result;
console.log('');
console.log(
  verdict.stdout
    .trim()
    .split('\n')
    .filter((line) => !/^\d+ operations, \d+ anomalies$/.test(line.trim()))
    .join('\n'),
);
console.log('');
console.log(`grants: ${result.grants}, checks answered: ${result.checks}`);
/** What each store's guard answers a late writer. */
const REFUSALS: Record<string, string> = { records: 'not the holder', pg: 'StaleTokenError' };
for (const [store, f] of Object.entries(result.stores ?? {}))
  console.log(
    `store ${store}: ${f.increments} increments, ${f.acknowledged} acknowledged (${f.lateAccepted} late), ` +
      `${f.lateRefused} late writes refused (${REFUSALS[store] ?? 'by the guard'}), ${f.lost} lost, ` +
      `${f.duplicated} duplicated; final values: ${f.final} ids`,
  );
if (elections)
  console.log(
    `terms in the history: ${result.terms}${result.pruned ? ' (pruned)' : ''}; ` +
      `strict loss rule (second opinion): ${result.strict?.anomalies} anomalies (${result.strict?.report})`,
  );
console.log(
  `nemeses applied: ${Object.entries(result.applied)
    .map(([name, count]) => `${name} ×${count}`)
    .join(', ')}`,
);
console.log(`report: ${verdict.report}`);
for (const problem of result.problems) console.log(`NOT MEANINGFUL: ${problem}`);
if (result.problems.length === 0 && plant !== undefined)
  console.log(
    verdict.anomalies > 0
      ? `planted bug ${plant} caught: ${verdict.anomalies} anomalies`
      : `planted bug ${plant} NOT caught`,
  );
console.log(result.summary);
process.exit(result.exitCode);
