/**
 * The zoo.cfg of one test server: shared by the ensemble starter (zookeeper-ensemble.ts) and by
 * its membership changes (zookeeper-membership.ts), which write a joining server's zoo.cfg.
 */
import { SHARED_ZOO_CFG } from './zookeeper-installation.js';
import type { MemberConfig } from './zookeeper-member.js';

export type MemberPlacement = NonNullable<MemberConfig['host']>;

/** One server of an ensemble: its id (myid), where it runs and its three ports. */
export interface ServerSpec {
  readonly id: number;
  readonly host?: MemberPlacement | undefined;
  readonly clientPort: number;
  readonly quorumPort: number;
  readonly electionPort: number;
}

/** What every server of one ensemble has in common in its zoo.cfg. */
export interface SharedConfig {
  readonly tickTimeMs: number;
  readonly minSessionTimeoutMs: number;
  readonly maxSessionTimeoutMs: number;
  readonly production: boolean;
  readonly maxClientCnxns: number;
  readonly syncLimitTicks: number;
  /** Dynamic reconfiguration on (see StartZooKeeperEnsembleOptions.dynamic). */
  readonly dynamic: boolean;
}

/** The address a server's clients connect to: its host's (every interface there) or loopback. */
function clientAddress(server: ServerSpec): string {
  return server.host ? '0.0.0.0' : '127.0.0.1';
}

/**
 * A server's line in a dynamic configuration (also what `reconfig -add` takes): with the role and
 * the client address, as ZooKeeper 3.5+ writes it.
 */
export function serverLine(server: ServerSpec): string {
  return (
    `server.${server.id}=${server.host?.ip ?? '127.0.0.1'}:${server.quorumPort}:${server.electionPort}` +
    `:participant;${clientAddress(server)}:${server.clientPort}`
  );
}

/**
 * The zoo.cfg of one member; `servers` null: a standalone server (an ensemble of one). With
 * `dynamic`, ZooKeeper moves the server lines into a dynamic configuration file of its own next
 * to zoo.cfg at the first start (zoo.cfg.dynamic.<version>, zoo.cfg then points to it) and
 * rewrites that file after each reconfiguration.
 */
export function zooCfg(
  c: SharedConfig & { server: ServerSpec; dataDir: string; servers: readonly ServerSpec[] | null },
): string {
  const quorum = c.servers ?? [];
  return [
    `tickTime=${c.tickTimeMs}`,
    // In ticks (2 s and 1 s at the default 200 ms tick): time for a follower to connect and sync
    // with a new leader, and the silence after which leader and follower give up on each other
    // (how long a pause() has to last to count as a partition).
    ...(c.servers ? ['initLimit=10', `syncLimit=${c.syncLimitTicks}`] : []),
    `minSessionTimeout=${c.minSessionTimeoutMs}`,
    `maxSessionTimeout=${c.maxSessionTimeoutMs}`,
    `dataDir=${c.dataDir}`,
    `clientPortAddress=${clientAddress(c.server)}`,
    `clientPort=${c.server.clientPort}`,
    // In a quorum, a lone member must not fall back to standalone mode. Unless the ensemble is
    // dynamic, the membership is fixed: no dynamic config file is written next to zoo.cfg.
    ...(c.servers ? ['standaloneEnabled=false', `reconfigEnabled=${c.dynamic}`] : ['standaloneEnabled=true']),
    ...SHARED_ZOO_CFG.filter((line) => !(c.production && line.startsWith('forceSync='))),
    // Connections per client IP (0 = no limit; every test client comes from 127.0.0.1).
    `maxClientCnxns=${c.maxClientCnxns}`,
    ...quorum.map((s) =>
      c.dynamic
        ? serverLine(s)
        : `server.${s.id}=${s.host?.ip ?? '127.0.0.1'}:${s.quorumPort}:${s.electionPort}`,
    ),
    '',
  ].join('\n');
}
