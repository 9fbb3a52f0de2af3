/**
 * Starts a throwaway ZooKeeper ensemble on loopback: three servers by default, for fault tests
 * that need a real quorum (kill the leader, restart a member, freeze one with SIGSTOP), or one
 * server, standalone or a quorum of one. A single test server (zookeeper-process.ts) is an
 * ensemble of one run standalone.
 *
 * Each member is a QuorumPeerMain JVM (see zookeeper-installation.ts for why `java` is spawned
 * directly); only its zoo.cfg differs. Everything lives in one temp dir:
 *
 *   <dir>/log4j.properties
 *   <dir>/member-N/zoo.cfg
 *   <dir>/member-N/data/myid      (and ZooKeeper's version-2/ snapshots and txn logs)
 *
 * A member keeps its ports, zoo.cfg and data dir for the ensemble's whole life, so restart()
 * brings back the same server with the same state, as a real restart would.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { zooCfg, type MemberPlacement, type ServerSpec, type SharedConfig } from './zookeeper-config.js';
import {
  LOG4J_PROPERTIES,
  requireZooKeeperInstallation,
  zooKeeperJvmArgs,
  type ZooKeeperInstallation,
} from './zookeeper-installation.js';
import {
  Member,
  POLL_INTERVAL_MS,
  POLL_MODE_TIMEOUT_MS,
  type EnsembleMember,
  type MemberMode,
} from './zookeeper-member.js';
import { Membership, type EnsembleMembership } from './zookeeper-membership.js';
import { findFreePorts } from './zookeeper-ports.js';
import { scaled } from '../support/timing.js';

export type { MemberPlacement } from './zookeeper-config.js';
export type { EnsembleMember, MemberMode } from './zookeeper-member.js';
export type { EnsembleMembership } from './zookeeper-membership.js';

export interface ZooKeeperEnsemble {
  readonly members: readonly EnsembleMember[];
  /** All client addresses, comma-separated, for a client's connect string. */
  readonly connectString: string;
  /** The temp dir holding everything; removed by stop(). */
  readonly dir: string;
  /** Milliseconds from the first spawn until a leader was elected and every member served. */
  readonly startupMs: number;
  /**
   * Waits (polling `srvr` every ~100 ms, default at most 30 s) until exactly one member reports
   * leader, and returns it.
   */
  leader(timeoutMs?: number): Promise<EnsembleMember>;
  /**
   * Resolves once a quorum serves again: one leader and at least floor(size/2) followers
   * answering (default at most 30 s).
   */
  waitForQuorum(timeoutMs?: number): Promise<void>;
  /**
   * Changes of membership (ZooKeeper's dynamic reconfiguration), in an ensemble started with
   * `dynamic`; undefined otherwise. `members` stays the servers started first: a member removed
   * by a reconfiguration is still listed there, and a server that joined later is not.
   */
  readonly membership: EnsembleMembership | undefined;
  /** Resumes paused members, stops every JVM (SIGTERM, then SIGKILL), removes `dir`. Idempotent. */
  stop(): Promise<void>;
}

export interface StartZooKeeperEnsembleOptions {
  /** Number of servers. Default 3. */
  size?: number;
  /** ZooKeeper's tick: initLimit/syncLimit and session expiry are counted in it. Default 200 ms. */
  tickTimeMs?: number;
  /** Overall time allowed from spawn until every member serves. Default 90 000 ms. */
  startTimeoutMs?: number;
  /** Receives every line every member prints (stdout and stderr), with the member's id. */
  logger?: (member: number, line: string) => void;
  /**
   * The epoch every member starts from (its currentEpoch and acceptedEpoch files): the first
   * leader's epoch is one more, and a zxid is `epoch << 32 | counter`. Above 2^21 every zxid,
   * and so every fencing token, exceeds 2^53.
   */
  epoch?: number;
  /** Smallest session timeout a member grants. Default 2 * tickTime (ZooKeeper's own rule). */
  minSessionTimeoutMs?: number;
  /** Largest session timeout a member grants. Default 60 000 ms. */
  maxSessionTimeoutMs?: number;
  /**
   * An ensemble of one that runs standalone (ZooKeeper's standaloneEnabled): no quorum, `srvr`
   * says "standalone". Otherwise even one member forms a quorum (of one) with a leader.
   */
  standalone?: boolean;
  /**
   * Run as in production: fsync every transaction and keep ZooKeeper's default container check
   * (60 s). For benchmarks; tests skip the fsync and reap empty containers within a second.
   */
  production?: boolean;
  /**
   * Connections one client IP may hold on each member (zoo.cfg `maxClientCnxns`; 0 = no limit).
   * Default 0: every test client comes from 127.0.0.1. ZooKeeper's own default is 60.
   */
  maxClientCnxns?: number;
  /**
   * Where each member runs (by id), when not on this machine's loopback: a test host of its own
   * (test/jepsen/net). Each member then listens on its host's address with ZooKeeper's usual
   * ports (2181, 2888, 3888), as on a machine of its own.
   */
  placement?: (id: number) => MemberPlacement;
  /** Ticks a follower and its leader wait for each other before giving up (syncLimit). Default 5. */
  syncLimitTicks?: number;
  /**
   * Dynamic reconfiguration (`reconfigEnabled=true`), for tests that change the membership
   * (`ensemble.membership`): ZooKeeper keeps the server list in a dynamic configuration file of
   * its own. Every member of such an ensemble runs with `zookeeper.skipACL=yes`, which lets any
   * client reconfigure it (ZooKeeper otherwise allows only the super user to); a throwaway test
   * ensemble on its own network has nothing to protect. Default false: a fixed membership, as
   * every other test has.
   */
  dynamic?: boolean;
}

const DEFAULT_SIZE = 3;
const DEFAULT_TICK_TIME_MS = 200;
const DEFAULT_MAX_SESSION_TIMEOUT_MS = 60_000;
// Generous: three JVMs are serving after 2-3 s here, but on CI they share two slow cores with
// the rest of the test run.
const DEFAULT_START_TIMEOUT_MS = scaled(90_000);
const DEFAULT_WAIT_TIMEOUT_MS = scaled(30_000);
const START_ATTEMPTS = 3;

/**
 * Starts a fresh ensemble and resolves once every member serves (and, in a quorum, a leader is
 * elected). Typed as the Ensemble class for zookeeper-process.ts; tests see ZooKeeperEnsemble.
 */
export async function startZooKeeperEnsemble(options: StartZooKeeperEnsembleOptions = {}): Promise<Ensemble> {
  const size = options.size ?? DEFAULT_SIZE;
  // extendedTypesEnabled (TTL nodes) needs server ids below 255.
  if (!Number.isInteger(size) || size < 1 || size > 254) {
    throw new Error(`ensemble size must be an integer from 1 to 254, got ${size}`);
  }
  if (options.standalone === true && size !== 1) {
    throw new Error(`only an ensemble of one can run standalone, not one of ${size}`);
  }
  if (options.standalone === true && options.dynamic === true) {
    throw new Error('a standalone server cannot be reconfigured: leave out `dynamic` or `standalone`');
  }
  const installation = requireZooKeeperInstallation();
  // A port found free can be taken before the JVM binds it, which shows up as a BindException.
  // Start over with all new ports.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(installation, size, options);
    } catch (error) {
      if (!(error instanceof PortInUseError) || attempt >= START_ATTEMPTS) throw error;
    }
  }
}

class PortInUseError extends Error {}

async function startOnce(
  installation: ZooKeeperInstallation,
  size: number,
  options: StartZooKeeperEnsembleOptions,
): Promise<Ensemble> {
  const tickTimeMs = options.tickTimeMs ?? DEFAULT_TICK_TIME_MS;
  const startTimeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
  const standalone = options.standalone ?? false;
  const production = options.production ?? false;
  const maxClientCnxns = options.maxClientCnxns ?? 0;
  if (!Number.isInteger(maxClientCnxns) || maxClientCnxns < 0) {
    throw new Error(`maxClientCnxns must be an integer ≥ 0 (0: no limit), got ${maxClientCnxns}`);
  }
  const shared: SharedConfig = {
    tickTimeMs,
    minSessionTimeoutMs: options.minSessionTimeoutMs ?? 2 * tickTimeMs,
    maxSessionTimeoutMs: options.maxSessionTimeoutMs ?? DEFAULT_MAX_SESSION_TIMEOUT_MS,
    production,
    maxClientCnxns,
    syncLimitTicks: options.syncLimitTicks ?? 5,
    dynamic: options.dynamic ?? false,
  };

  const dir = await mkdtemp(path.join(os.tmpdir(), 'lockstream-zk-'));
  const members: Member[] = [];
  const servers: ServerSpec[] = [];
  const log4jFile = path.join(dir, 'log4j.properties');
  try {
    // Per member: client port, quorum port (followers connect to the leader's), election port.
    const placement = options.placement;
    const ports = placement
      ? Array.from({ length: size }, () => [2181, 2888, 3888]).flat()
      : await findFreePorts(3 * size);
    const port = (index: number): number => {
      const found = ports[index];
      if (found === undefined) throw new Error(`INVARIANT: no port #${index}`);
      return found;
    };
    for (let i = 0; i < size; i += 1) {
      servers.push({
        id: i + 1,
        host: placement?.(i + 1),
        clientPort: port(3 * i),
        quorumPort: port(3 * i + 1),
        electionPort: port(3 * i + 2),
      });
    }
    await writeFile(log4jFile, LOG4J_PROPERTIES);
    for (const server of servers) {
      const memberDir = path.join(dir, `member-${server.id}`);
      const dataDir = path.join(memberDir, 'data');
      const configFile = path.join(memberDir, 'zoo.cfg');
      await mkdir(dataDir, { recursive: true });
      await writeFile(path.join(dataDir, 'myid'), `${server.id}\n`);
      if (options.epoch !== undefined) {
        const epochDir = path.join(dataDir, 'version-2');
        await mkdir(epochDir, { recursive: true });
        await writeFile(path.join(epochDir, 'currentEpoch'), String(options.epoch));
        await writeFile(path.join(epochDir, 'acceptedEpoch'), String(options.epoch));
      }
      const quorum = standalone ? null : servers;
      await writeFile(configFile, zooCfg({ ...shared, server, dataDir, servers: quorum }));
      const args = zooKeeperJvmArgs(installation, {
        logDir: memberDir,
        log4jFile,
        configFile,
        production,
        skipAcl: shared.dynamic,
      });
      members.push(
        new Member({
          id: server.id,
          clientPort: server.clientPort,
          dataDir,
          cwd: memberDir,
          ensembleDir: dir,
          java: installation.java,
          args,
          logger: options.logger,
          ...(server.host ? { host: server.host } : {}),
        }),
      );
    }
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }

  const ensemble = new Ensemble(members, dir);
  if (shared.dynamic) {
    ensemble.membership = new Membership({
      installation,
      dir,
      log4jFile,
      shared,
      servers: members.map((member, i) => ({ spec: servers[i]!, member })),
      logger: options.logger,
    });
  }
  const spawnedAt = performance.now();
  const deadline = spawnedAt + startTimeoutMs;
  try {
    for (const member of members) member.spawn();
    // Fails fast when any member exits: the others may well form a quorum without it.
    await Promise.all(members.map((member) => member.waitUntilServing(deadline)));
    // Prove that each port is answered by our JVM, not by a process that grabbed the port
    // between findFreePorts() and our bind (conf only answers once the member serves).
    await Promise.all(members.map((member) => member.checkIdentity()));
    if (!standalone) await ensemble.leader(Math.max(deadline - performance.now(), POLL_INTERVAL_MS));
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const details =
      `ZooKeeper ensemble of ${size} failed to start (time allowed: ${startTimeoutMs} ms): ${message}\n` +
      members.map((member) => member.describe()).join('\n');
    const portTaken = members.some((member) => /BindException|Address already in use/.test(member.logTail()));
    await ensemble.stop();
    if (portTaken) throw new PortInUseError(details);
    throw new Error(details, { cause: error });
  }
  ensemble.startupMs = performance.now() - spawnedAt;
  return ensemble;
}

export class Ensemble implements ZooKeeperEnsemble {
  readonly members: readonly Member[];
  readonly connectString: string;
  readonly dir: string;
  startupMs = NaN;
  membership: Membership | undefined;
  #stopping: Promise<void> | undefined;

  constructor(members: readonly Member[], dir: string) {
    this.members = members;
    this.connectString = members.map((member) => member.connectString).join(',');
    this.dir = dir;
  }

  async leader(timeoutMs = DEFAULT_WAIT_TIMEOUT_MS): Promise<EnsembleMember> {
    const modes = await this.#pollModes(
      'exactly one leader',
      timeoutMs,
      (m) => m.filter((mode) => mode === 'leader').length === 1,
    );
    const index = modes.indexOf('leader');
    const leader = this.members[index];
    if (leader === undefined) throw new Error('INVARIANT: no leader after polling for one');
    return leader;
  }

  async waitForQuorum(timeoutMs = DEFAULT_WAIT_TIMEOUT_MS): Promise<void> {
    const followersNeeded = Math.floor(this.members.length / 2);
    await this.#pollModes(
      `a quorum (one leader, at least ${followersNeeded} follower(s))`,
      timeoutMs,
      (m) =>
        m.filter((mode) => mode === 'leader').length === 1 &&
        m.filter((mode) => mode === 'follower').length >= followersNeeded,
    );
  }

  /** Asks every member for its mode until `done` accepts the answers; they are returned. */
  async #pollModes(
    awaited: string,
    timeoutMs: number,
    done: (modes: MemberMode[]) => boolean,
  ): Promise<MemberMode[]> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const modes = await Promise.all(this.members.map((member) => member.mode(POLL_MODE_TIMEOUT_MS)));
      if (done(modes)) return modes;
      if (this.#stopping !== undefined) throw new Error(`the ensemble was stopped; awaited ${awaited}`);
      if (performance.now() + POLL_INTERVAL_MS > deadline) {
        const summary = this.members.map((member, i) => `${member.id}: ${modes[i] ?? '?'}`).join(', ');
        throw new Error(
          `timed out after ${timeoutMs} ms waiting for ${awaited}; modes: ${summary}\n` +
            this.members.map((member) => member.describe()).join('\n'),
        );
      }
      await sleep(POLL_INTERVAL_MS);
    }
  }

  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      await Promise.all(this.members.map((member) => member.stop()));
      // Servers that joined later (they are not among `members`).
      await this.membership?.stop();
      await rm(this.dir, { recursive: true, force: true, maxRetries: 3 });
    })();
    return this.#stopping;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
