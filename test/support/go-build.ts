import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { rename, rm } from 'node:fs/promises';
import { promisify } from 'node:util';

/**
 * `go build -o output pkg` in `cwd` (go caches the build), with the binary put in place by one
 * rename. Test files run two at a time, and more than one builds or runs the same binary under
 * .tmp/bin: go build -o removes the old file and writes the new one in place, so a file that
 * starts the binary meanwhile would find it missing or still being written (ENOENT, ETXTBSY).
 * A rename swaps whole files: a starter gets the old binary or the new one, never a part.
 */
export async function goBuild(
  output: string,
  pkg: string,
  options: { cwd: string; env?: NodeJS.ProcessEnv },
): Promise<void> {
  // Next to the output (the same file system, so the rename is atomic), and named for this build.
  const partial = `${output}.${randomUUID()}.partial`;
  try {
    await promisify(execFile)('go', ['build', '-o', partial, pkg], options);
    await rename(partial, output);
  } finally {
    await rm(partial, { force: true });
  }
}
