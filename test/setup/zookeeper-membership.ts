/**
 * Membership changes of a test ensemble started with `dynamic` (ZooKeeper's dynamic
 * reconfiguration, 3.5+): a server joins, `reconfig` adds or removes servers.
 *
 * How ZooKeeper wants a server added (zookeeperReconfig.html, "Adding servers"): it is started
 * first with an initial configuration that lists the current members and itself as a
 * participant; it finds the leader, syncs and follows without a vote ("non-voting follower")
 * until a `reconfig -add` makes it a member. A removed server is not shut down by ZooKeeper: it
 * goes on following without a vote, and serving its clients, until someone stops it.
 *
 * `reconfig` is run by ZooKeeper's own CLI (org.apache.zookeeper.ZooKeeperMain, a JVM of about a
 * second) on a member's host, so that it reaches the member as any client there would: lockstream's
 * own ZooKeeper client has no reconfig request, and this is test tooling, not server code. The
 * members of a dynamic ensemble run with skipACL (see zookeeper-installation.ts), so the CLI
 * needs no credentials.
 */
import { execFile } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  serverLine,
  zooCfg,
  type MemberPlacement,
  type ServerSpec,
  type SharedConfig,
} from './zookeeper-config.js';
import { zooKeeperJvmArgs, type ZooKeeperInstallation } from './zookeeper-installation.js';
import { Member, type EnsembleMember } from './zookeeper-member.js';
import { findFreePorts } from './zookeeper-ports.js';

const run = promisify(execFile);

export interface EnsembleMembership {
  /** The voting members' ids, as the last reconfiguration left them (at first every member). */
  readonly voters: readonly number[];
  /** The member with this id, started first or joined later; undefined if there is none. */
  member(id: number): EnsembleMember | undefined;
  /**
   * Starts server `id` as a joiner: with an empty data dir and a zoo.cfg that lists the current
   * voters and itself. An id that was a member before (removed, then stopped) keeps its ports and
   * host; a new id runs on `placement` (ZooKeeper's usual ports there), or on free loopback ports.
   * Resolves once it serves (it follows the leader, without a vote until it is added).
   */
  startJoiner(id: number, placement?: MemberPlacement): Promise<EnsembleMember>;
  /**
   * Runs `reconfig -add <servers> -remove <ids>` (incremental) with ZooKeeper's CLI, through a
   * running voter. Resolves with the new configuration (ZooKeeper's text: server lines and
   * `version=`) once every running member of it has taken it on, so that a removed server can be
   * stopped without taking the quorum with it.
   */
  reconfig(change: { add?: readonly number[]; remove?: readonly number[] }): Promise<string>;
}

interface Server {
  readonly spec: ServerSpec;
  readonly member: Member;
}

export interface MembershipOptions {
  readonly installation: ZooKeeperInstallation;
  readonly dir: string;
  readonly log4jFile: string;
  readonly shared: SharedConfig;
  readonly servers: readonly Server[];
  readonly logger: ((member: number, line: string) => void) | undefined;
}

const CLI_SESSION_TIMEOUT_MS = 10_000;
const CLI_TIMEOUT_MS = 30_000;
const JOIN_TIMEOUT_MS = 60_000;
const ACTIVATION_TIMEOUT_MS = 20_000;
const RECONFIG_ATTEMPTS = 4;
const RETRY_DELAY_MS = 1_000;
/** Failures worth another try: a reconfig still pending, a joiner not yet synced, a lost link. */
const TRANSIENT = /ReconfigInProgress|NewConfigNoQuorum|ConnectionLoss|timed out|SessionExpired/i;

export class Membership implements EnsembleMembership {
  readonly #options: MembershipOptions;
  readonly #servers = new Map<number, Server>();
  /** Servers started by startJoiner (the first ones are stopped by the ensemble). */
  readonly #joined: Member[] = [];
  #voters: number[];

  constructor(options: MembershipOptions) {
    this.#options = options;
    for (const server of options.servers) this.#servers.set(server.spec.id, server);
    this.#voters = options.servers.map((server) => server.spec.id);
  }

  get voters(): readonly number[] {
    return [...this.#voters];
  }

  member(id: number): EnsembleMember | undefined {
    return this.#servers.get(id)?.member;
  }

  async startJoiner(id: number, placement?: MemberPlacement): Promise<EnsembleMember> {
    if (!Number.isInteger(id) || id < 1 || id > 254) throw new Error(`server id must be 1..254, got ${id}`);
    if (this.#voters.includes(id)) throw new Error(`server ${id} is a voting member already`);
    const { dir, installation, log4jFile, shared } = this.#options;
    const memberDir = path.join(dir, `member-${id}`);
    const dataDir = path.join(memberDir, 'data');
    const configFile = path.join(memberDir, 'zoo.cfg');
    let server = this.#servers.get(id);
    if (server) {
      if (server.member.pid !== null) throw new Error(`server ${id} is still running: stop it first`);
    } else {
      const [clientPort, quorumPort, electionPort] = placement ? [2181, 2888, 3888] : await findFreePorts(3);
      const spec: ServerSpec = {
        id,
        host: placement,
        clientPort: clientPort!,
        quorumPort: quorumPort!,
        electionPort: electionPort!,
      };
      const args = zooKeeperJvmArgs(installation, {
        logDir: memberDir,
        log4jFile,
        configFile,
        production: shared.production,
        skipAcl: true,
      });
      const member = new Member({
        id,
        clientPort: spec.clientPort,
        dataDir,
        cwd: memberDir,
        ensembleDir: dir,
        java: installation.java,
        args,
        logger: this.#options.logger,
        ...(placement ? { host: placement } : {}),
      });
      server = { spec, member };
      this.#servers.set(id, server);
      this.#joined.push(member);
    }
    // A fresh start, as a new machine would have: no data (it syncs from the leader), and none of
    // the dynamic configuration files ZooKeeper wrote while it was a member (it would boot from
    // the last one, which no longer lists it, and fail).
    await rm(memberDir, { recursive: true, force: true });
    await mkdir(dataDir, { recursive: true });
    await writeFile(path.join(dataDir, 'myid'), `${id}\n`);
    const servers = [...this.#voters.map((voter) => this.#spec(voter)), server.spec];
    await writeFile(configFile, zooCfg({ ...shared, server: server.spec, dataDir, servers }));
    await server.member.restart(JOIN_TIMEOUT_MS);
    return server.member;
  }

  async reconfig(change: { add?: readonly number[]; remove?: readonly number[] }): Promise<string> {
    const add = change.add ?? [];
    const remove = change.remove ?? [];
    if (add.length === 0 && remove.length === 0) throw new Error('reconfig: nothing to add or remove');
    const args = [
      ...(add.length > 0 ? ['-add', add.map((id) => serverLine(this.#spec(id))).join(',')] : []),
      ...(remove.length > 0 ? ['-remove', remove.join(',')] : []),
    ];
    let output = '';
    for (let attempt = 1; ; attempt += 1) {
      output = await this.#cli(['reconfig', ...args], remove);
      if (/^version=/m.test(output) || attempt >= RECONFIG_ATTEMPTS || !TRANSIENT.test(output)) break;
      await sleep(RETRY_DELAY_MS);
    }
    const version = /^version=([0-9a-f]+)$/m.exec(output)?.[1];
    const voters = [...output.matchAll(/^server\.(\d+)=.*:participant;/gm)].map((m) => Number(m[1]));
    const expected = [...this.#voters.filter((id) => !remove.includes(id)), ...add];
    if (version === undefined || !sameIds(voters, expected)) {
      throw new Error(
        `reconfig ${args.join(' ')} failed (voters expected: ${expected.join(',')}): ${output.trim().slice(-1500)}`,
      );
    }
    this.#voters = voters;
    await this.#awaitActivation(version);
    return output;
  }

  /** Stops the servers that joined later. */
  async stop(): Promise<void> {
    await Promise.all(this.#joined.map((member) => member.stop()));
  }

  #spec(id: number): ServerSpec {
    const server = this.#servers.get(id);
    if (!server) throw new Error(`no server ${id} was ever started in this ensemble`);
    return server.spec;
  }

  /**
   * Runs ZooKeeper's CLI with one command against a running voter (not one of `avoid`), on that
   * voter's host; resolves with what it printed (its exit status says little: it also fails on a
   * log4j warning).
   */
  async #cli(command: readonly string[], avoid: readonly number[]): Promise<string> {
    const running = this.#voters
      .map((id) => this.#servers.get(id)!)
      .filter((server) => server.member.pid !== null && !server.member.paused);
    const via = running.find((server) => !avoid.includes(server.spec.id)) ?? running[0];
    if (!via) throw new Error(`no voting member is running (voters: ${this.#voters.join(',')})`);
    const { installation } = this.#options;
    // On the member's own host its client port listens on every address, loopback included.
    const address = `127.0.0.1:${via.spec.clientPort}`;
    const [command0, ...prefix] = [...(via.spec.host?.prefix ?? []), installation.java];
    const argv = [
      ...prefix,
      '-Djava.net.preferIPv4Stack=true',
      '-cp',
      installation.classpath,
      'org.apache.zookeeper.ZooKeeperMain',
      '-server',
      address,
      '-timeout',
      String(CLI_SESSION_TIMEOUT_MS),
      '-waitforconnection',
      ...command,
    ];
    try {
      const { stdout, stderr } = await run(command0, argv, { timeout: CLI_TIMEOUT_MS });
      return `${stdout}\n${stderr}`;
    } catch (error) {
      const failed = error as { stdout?: string; stderr?: string; message: string };
      return `${failed.stdout ?? ''}\n${failed.stderr ?? ''}\n${failed.message}`;
    }
  }

  /**
   * Waits until every running voter reports configuration `version` (the `conf` four-letter
   * word) and the voters serve with one leader and a quorum of followers: a reconfiguration has
   * committed once the leader sent its activation, not once a quorum of the new configuration
   * acted on it (and removing the leader hands leadership over to another voter).
   */
  async #awaitActivation(version: string): Promise<void> {
    const deadline = performance.now() + ACTIVATION_TIMEOUT_MS;
    let summary = '';
    for (;;) {
      const voters = this.#voters.map((id) => this.#servers.get(id)!.member);
      const running = voters.filter((member) => member.pid !== null && !member.paused);
      const [confs, modes] = await Promise.all([
        Promise.all(running.map((member) => member.fourLetterWord('conf', 1_000).catch(() => ''))),
        Promise.all(voters.map((member) => member.mode(1_000))),
      ]);
      const behind = running.filter((_, i) => !new RegExp(`^version=${version}$`, 'm').test(confs[i]!));
      const leaders = modes.filter((mode) => mode === 'leader').length;
      const followers = modes.filter((mode) => mode === 'follower').length;
      if (behind.length === 0 && leaders === 1 && followers >= Math.floor(voters.length / 2)) return;
      summary =
        `behind: ${behind.map((m) => m.id).join(', ') || 'none'}; modes: ` +
        voters.map((member, i) => `${member.id} ${modes[i]}`).join(', ');
      if (performance.now() > deadline) {
        throw new Error(
          `configuration ${version} not in force within ${ACTIVATION_TIMEOUT_MS} ms (${summary})`,
        );
      }
      await sleep(100);
    }
  }
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && [...a].sort().join(',') === [...b].sort().join(',');
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
