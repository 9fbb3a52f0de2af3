/**
 * A private PostgreSQL cluster for one test file: initdb in a temp dir, then `postgres` on
 * 127.0.0.1 and a free port (no Unix socket), trust authentication, fsync off; or, given a
 * placement, on a test host of the partition suite (its address and command prefix, test/jepsen/
 * net/postgres-hosts.ts), trusting the networks it names. Debian's
 * `postgresql` package (scripts/install-test-deps.sh) provides the binaries under
 * /usr/lib/postgresql/<version>/bin; LOCKSTREAM_PG_BINDIR points elsewhere. PostgreSQL refuses to
 * run as root, so as root the cluster is the `postgres` user's (the package creates that user).
 * Set LOCKSTREAM_PG_LOG=1 to see the server's log on stderr.
 */
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { appendFileSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { killOnExit } from './zookeeper-process.js';
import { findFreePort } from './zookeeper-ports.js';

export interface PostgresCluster {
  /**
   * `postgres://postgres@127.0.0.1:PORT/postgres` (the placement's address instead, if placed):
   * superuser, trust, the default database.
   */
  readonly url: string;
  readonly port: number;
  /** The postmaster's pid. */
  readonly pid: number;
  /** Fast shutdown (SIGINT), then the temp dir is removed. Twice is a no-op. */
  stop(): Promise<void>;
}

/** Where a cluster runs when not on this machine's loopback: a test host of the partition suite. */
export interface PostgresPlacement {
  /** The host's address, which postgres listens on instead of 127.0.0.1. */
  readonly ip: string;
  /** The command prefix that runs a program on that host (`ip netns exec <namespace>`). */
  readonly prefix: readonly string[];
  /** Default 5432: the host is the cluster's alone. */
  readonly port?: number;
  /** Networks (CIDR) whose clients pg_hba.conf trusts, besides the loopback. */
  readonly allow?: readonly string[];
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

/**
 * Starts a new cluster (on `placement`'s host, if given); rejects if PostgreSQL is not installed
 * (a missing database never passes).
 */
export async function startPostgres(placement?: PostgresPlacement): Promise<PostgresCluster> {
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
    for (const network of placement?.allow ?? [])
      appendFileSync(join(data, 'pg_hba.conf'), `host all all ${network} trust\n`);
    if (placement) return await run(bin, dir, data, owner, placement.port ?? 5432, placement);
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
  placement?: PostgresPlacement,
): Promise<PostgresCluster> {
  // The settings of a throwaway cluster: nothing survives a crash, and nothing needs to.
  const settings = ['fsync=off', 'synchronous_commit=off', 'full_page_writes=off', 'max_connections=50'];
  const host = placement?.ip ?? '127.0.0.1';
  const args = ['-D', data, '-h', host, '-p', String(port), '-k', '', ...settings.flatMap((s) => ['-c', s])];
  // On a test host: `ip netns exec` needs root, so the user is changed inside it (both exec, so
  // the child's pid is the postmaster's).
  const asOwner =
    owner.uid === undefined
      ? []
      : ['setpriv', `--reuid=${owner.uid}`, `--regid=${owner.gid}`, '--clear-groups'];
  const [command, ...prefixed] = placement
    ? [...placement.prefix, ...asOwner, join(bin, 'postgres'), ...args]
    : [join(bin, 'postgres'), ...args];
  const child = spawn(command!, prefixed, {
    cwd: dir,
    stdio: ['ignore', 'ignore', 'pipe'],
    ...(placement ? {} : owner),
  });
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
    url: `postgres://postgres@${host}:${port}/postgres`,
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
