import { execFile } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { InteractiveProcess } from './interactive-process.js';
import { scaled } from './timing.js';

/**
 * The grpcurl binary: on PATH, or where `go install` put it (scripts/install-test-deps.sh).
 * Throws, naming the fix, when it is missing: a missing grpcurl never passes.
 */
export function findGrpcurl(): string {
  const dirs = (process.env['PATH'] ?? '').split(path.delimiter).filter(Boolean);
  const goPath = process.env['GOPATH'] ?? path.join(process.env['HOME'] ?? '/root', 'go');
  dirs.push(path.join(goPath, 'bin'));
  for (const dir of dirs) {
    const candidate = path.join(dir, 'grpcurl');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // keep looking
    }
  }
  throw new Error('grpcurl is not installed: run scripts/install-test-deps.sh');
}

const run = promisify(execFile);

/** Runs one grpcurl command to completion and resolves with its stdout. */
export async function grpcurl(args: string[]): Promise<string> {
  const { stdout } = await run(findGrpcurl(), args, { timeout: scaled(20_000) });
  return stdout;
}

/** A grpcurl process whose stdin stays open, as an operator typing at a terminal. */
export function interactiveGrpcurl(args: string[]): InteractiveProcess {
  return new InteractiveProcess(findGrpcurl(), args);
}
