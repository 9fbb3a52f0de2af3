/**
 * A private PostgreSQL cluster for one test file: initdb in a temp dir, then `postgres` on
 * 127.0.0.1 and a free port (no Unix socket), trust authentication, fsync off. Debian's
 * `postgresql` package (scripts/install-test-deps.sh) provides the binaries under
 * /usr/lib/postgresql/<version>/bin; LOCKSTREAM_PG_BINDIR points elsewhere. PostgreSQL refuses to
 * run as root, so as root the cluster is the `postgres` user's (the package creates that user).
 * Set LOCKSTREAM_PG_LOG=1 to see the server's log on stderr.
 */
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { killOnExit } from './zookeeper-process.js';
import { findFreePort } from './zookeeper-ports.js';

export interface PostgresCluster {
  /** `postgres://postgres@127.0.0.1:PORT/postgres`: superuser, trust, the default database. */
  readonly url: string;
  readonly port: number;
  /** The postmaster's pid. */
  readonly pid: number;
  /** Fast shutdown (SIGINT), then the temp dir is removed. Twice is a no-op. */
  stop(): Promise<void>;
}

/** The directory with initdb and postgres (the newest version installed), or null. */
export function findPostgresBinDir(): string | null {
  const configured = process.env['LOCKSTREAM_PG_BINDIR'];
  if (configured) return configured;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((name) => /^\d+$/.test(name) && existsSync(join(root, name, 'bin', 'postgres')))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length === 0 ? null : join(root, versions[0]!, 'bin');
}

/** Starts a new cluster; rejects if PostgreSQL is not installed (a missing database never passes). */
export async function startPostgres(): Promise<PostgresCluster> {
  const bin = findPostgresBinDir();
  if (bin === null || !existsSync(join(bin, 'initdb'))) {
    throw new Error(
      'PostgreSQL is not installed (need initdb and postgres under /usr/lib/postgresql/<version>/bin ' +
        'from the Debian "postgresql" package, or LOCKSTREAM_PG_BINDIR). Run scripts/install-test-deps.sh.',
    );
  }
  const owner: { uid?: number; gid?: number } = process.getuid?.() === 0 ? postgresUser() : {};
  const dir = mkdtempSync(join(tmpdir(), 'lockstream-pg-'));
  try {
    if (owner.uid !== undefined && owner.gid !== undefined) chownSync(dir, owner.uid, owner.gid);
    const data = join(dir, 'data');
    execFileSync(
      join(bin, 'initdb'),
      ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync'],
      { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'], ...owner },
    );
    // Another process can take the free port before postgres binds it: then try another.
    for (let attempt = 1; ; attempt++) {
      try {
        return await run(bin, dir, data, owner, await findFreePort());
      } catch (error) {
        if (attempt === 3 || !String(error).includes('could not bind')) throw error;
      }
    }
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

function postgresUser(): { uid: number; gid: number } {
  try {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    return { uid, gid };
  } catch {
    throw new Error(
      'running as root and there is no "postgres" user to run PostgreSQL as (PostgreSQL refuses root)',
    );
  }
}

async function run(
  bin: string,
  dir: string,
  data: string,
  owner: { uid?: number; gid?: number },
  port: number,
): Promise<PostgresCluster> {
  // The settings of a throwaway cluster: nothing survives a crash, and nothing needs to.
  const settings = ['fsync=off', 'synchronous_commit=off', 'full_page_writes=off', 'max_connections=50'];
  const child = spawn(
    join(bin, 'postgres'),
    ['-D', data, '-h', '127.0.0.1', '-p', String(port), '-k', '', ...settings.flatMap((s) => ['-c', s])],
    { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'], ...owner },
  );
  const untrack = killOnExit(child, dir);
  const exited = once(child, 'exit');
  let log = '';
  const ready = new Promise<void>((resolve, reject) => {
    child.stderr.on('data', (chunk: Buffer) => {
      log += chunk.toString();
      if (process.env['LOCKSTREAM_PG_LOG'] === '1') process.stderr.write(`[postgres] ${chunk.toString()}`);
      if (log.includes('database system is ready to accept connections')) resolve();
    });
    void exited.then(([code, signal]) =>
      reject(new Error(`postgres exited (${String(code ?? signal)}) before it was ready:\n${log}`)),
    );
  });
  await ready;
  let stopping: Promise<void> | undefined;
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    pid: child.pid!,
    stop() {
      stopping ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill('SIGINT');
          await exited;
        }
        untrack();
        rmSync(dir, { recursive: true, force: true });
      })();
      return stopping;
    },
  };
}
