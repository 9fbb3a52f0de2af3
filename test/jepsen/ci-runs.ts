/**
 * One run of the partition suite for a CI test (jepsen*.test.ts): runJepsen with a fresh seed
 * and its output under .tmp/jepsen/ci-<dir>, its progress logged line by line, and at its end
 * the checker's last lines with the run's figures.
 */
import path from 'node:path';
import { runJepsen, type JepsenOptions, type JepsenResult } from './run-jepsen.js';

const OUT = path.resolve('.tmp/jepsen');

export async function ciRun(
  dir: string,
  label: string,
  options: Omit<JepsenOptions, 'seed' | 'out' | 'log'>,
  figures: (result: JepsenResult) => string,
): Promise<JepsenResult> {
  const result = await runJepsen({
    seed: Math.floor(Math.random() * 2 ** 31),
    out: path.join(OUT, `ci-${dir}`),
    log: (line) => console.info(`[${label}] ${line}`),
    ...options,
  });
  const tail = result.verdict.stdout.trim().split('\n').slice(-12).join('\n');
  console.info(
    `[${label}] ${tail}\n[${label}] ${figures(result)}, applied ${JSON.stringify(result.applied)}; ` +
      `report ${result.verdict.report}`,
  );
  return result;
}
