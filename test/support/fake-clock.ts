import { existsSync } from 'node:fs';
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Debian's libfaketime (package `libfaketime`); installed by scripts/install-test-deps.sh. */
export const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';

/**
 * A wall clock for one process (or several) that a test steps while it runs: libfaketime,
 * preloaded, offsets the wall clock by what a file says and re-reads that file at every call
 * (FAKETIME_NO_CACHE), while the monotonic clock stays real (FAKETIME_DONT_FAKE_MONOTONIC). In a
 * Node 20 process started with `env` (measured here: a step of the file to "+1h" moved
 * Date.now() by 3,600,000 ms at the next call, while performance.now(), process.hrtime and
 * timers went on as before), `Date.now()` and `new Date()` step and nothing else does.
 */
export interface FakeClock {
  /** Environment variables for a process whose wall clock this clock sets. */
  readonly env: Readonly<Record<string, string>>;
  /** The offset the processes' wall clock has now, as libfaketime reads it (e.g. "+1h"). */
  readonly offset: string;
  /**
   * Steps the wall clock to `offset` from the real one (libfaketime's syntax: "+1h", "-1h",
   * "+30s", "+0"). Every time call a process makes once this resolves sees the new offset.
   */
  step(offset: string): Promise<void>;
  /** Removes the offset file (a process still running then falls back to the real clock). */
  close(): Promise<void>;
}

/** Whether this machine has libfaketime (tests that need it should say so when it is missing). */
export function hasLibfaketime(): boolean {
  return existsSync(LIBFAKETIME);
}

/** A stepped wall clock starting at `offset` (the real clock by default). */
export async function fakeClock(offset = '+0'): Promise<FakeClock> {
  const dir = await mkdtemp(join(tmpdir(), 'lockstream-clock-'));
  const file = join(dir, 'offset');
  let current = offset;
  // Written beside the file and renamed over it: a process reading it never sees it half written.
  // One write at a time, in the order asked (a strobe's step and the undo that ends it may
  // overlap): the last step asked is the one left in the file.
  let writing = Promise.resolve();
  const write = (text: string): Promise<void> => {
    const next = `${file}.next`;
    writing = writing
      .catch(() => undefined)
      .then(async () => {
        await writeFile(next, `${text}\n`);
        await rename(next, file);
      });
    return writing;
  };
  await write(offset);
  return {
    env: {
      LD_PRELOAD: LIBFAKETIME,
      FAKETIME_TIMESTAMP_FILE: file,
      FAKETIME_NO_CACHE: '1',
      FAKETIME_DONT_FAKE_MONOTONIC: '1',
    },
    get offset() {
      return current;
    },
    step: async (next) => {
      await write(next);
      current = next;
    },
    close: () => rm(dir, { recursive: true, force: true }),
  };
}
