/**
 * PostgreSQL on a test host of a TestNetwork (the records workload's second store): a private
 * cluster (test/setup/postgres-process.ts) listening on the host's address, trusting every host
 * of the network, with the tables the records workload writes created before any client starts.
 * No nemesis aims at it: it is the resource, not the system under test.
 */
import { join } from 'node:path';
import { fencingTableSql } from '../../../src/fencing/postgres.js';
import { findPostgresBinDir, startPostgres, type PostgresCluster } from '../../setup/postgres-process.js';
import type { Host, TestNetwork } from './test-network.js';

/**
 * Starts PostgreSQL on `host` (port 5432), reachable from every host of `network`, and runs
 * `ddl` there (psql on the host itself), with the fencing marks' table (lockstream_fencing).
 */
export async function startPostgresOnHost(
  network: TestNetwork,
  host: Host,
  ddl: readonly string[],
): Promise<PostgresCluster> {
  const cluster = await startPostgres({ ip: host.ip, prefix: network.prefix(host), allow: [network.subnet] });
  try {
    const psql = join(findPostgresBinDir()!, 'psql');
    for (const sql of [fencingTableSql(), ...ddl])
      await network.exec(
        host,
        psql,
        '--no-psqlrc',
        '-v',
        'ON_ERROR_STOP=1',
        '-q',
        '-d',
        cluster.url,
        '-c',
        sql,
      );
    return cluster;
  } catch (error) {
    await cluster.stop();
    throw error;
  }
}
