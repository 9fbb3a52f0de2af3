/**
 * Runs the independent checker (test/jepsen/checker, Go) over a history: builds it once per
 * process into .tmp/bin, writes the history and nemesis schedule as JSON lines, and returns its
 * verdict.
 */
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { goBuild } from '../support/go-build.js';

const run = promisify(execFile);
const CHECKER_DIR = fileURLToPath(new URL('./checker/', import.meta.url));
const BIN = fileURLToPath(new URL('../../.tmp/bin/lockstream-check', import.meta.url));

/** One fault, as the checker's report shows it. */
export interface NemesisEvent {
  readonly t: number;
  readonly type: 'start' | 'stop';
  readonly nemesis: string;
  readonly detail?: string;
}

export interface Verdict {
  /** 0: no anomaly; 1: anomalies; 2: bad input or undecided. */
  readonly exitCode: number;
  readonly stdout: string;
  readonly operations: number;
  readonly anomalies: number;
  readonly report: string;
}

let built: Promise<void> | undefined;

export function buildChecker(): Promise<void> {
  built ??= goBuild(BIN, '.', { cwd: CHECKER_DIR });
  return built;
}

/** How to run the checker: more options (e.g. `--doubt-ends-hold`), and the report's name. */
export interface CheckOptions {
  readonly args?: readonly string[];
  /** The report is `<report>.html` in the directory (default `report`). */
  readonly report?: string;
}

/** Checks `history`; the files (history, nemesis, report.html) are written to `dir`. */
export async function check(
  dir: string,
  history: readonly object[],
  nemesis: readonly NemesisEvent[] = [],
  options: CheckOptions = {},
): Promise<Verdict> {
  await buildChecker();
  await mkdir(dir, { recursive: true });
  const historyFile = path.join(dir, 'history.jsonl');
  const nemesisFile = path.join(dir, 'nemesis.jsonl');
  const report = path.join(dir, `${options.report ?? 'report'}.html`);
  await writeFile(historyFile, history.map((event) => JSON.stringify(event)).join('\n') + '\n');
  await writeFile(nemesisFile, nemesis.map((event) => JSON.stringify(event)).join('\n') + '\n');
  const args = [
    '--history',
    historyFile,
    '--nemesis',
    nemesisFile,
    '--report',
    report,
    ...(options.args ?? []),
  ];
  let stdout: string;
  let exitCode = 0;
  try {
    ({ stdout } = await run(BIN, args, { maxBuffer: 64 * 1024 * 1024 }));
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    if (typeof failed.code !== 'number') throw error;
    exitCode = failed.code;
    stdout = `${failed.stdout ?? ''}${failed.stderr ?? ''}`;
  }
  const last = /(\d+) operations, (\d+) anomalies\s*$/.exec(stdout);
  return {
    exitCode,
    stdout,
    operations: Number(last?.[1] ?? NaN),
    anomalies: Number(last?.[2] ?? NaN),
    report,
  };
}
