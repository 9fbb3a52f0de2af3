/**
 * What a partition-suite run starts, every process on a test host of its own (a network
 * namespace, test/jepsen/net): a three-member ZooKeeper ensemble, three lockstream instances,
 * PostgreSQL for the records workload, and the clients that record their histories
 * (test/jepsen/client), in the roles of their workload (workloads.ts). The nemeses reach every process through it: kill and restart an
 * instance or a client on the same host and port, step an instance's wall clock, find the
 * ZooKeeper leader.
 */
import { type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PostgresCluster } from '../setup/postgres-process.js';
import type { EnsembleMember, MemberPlacement, ZooKeeperEnsemble } from '../setup/zookeeper-ensemble.js';
import { killOnExit } from '../setup/zookeeper-process.js';
import { fakeClock, type FakeClock } from '../support/fake-clock.js';
import type { ServerProcess } from '../support/server-process.js';
import { COUNTERS_TABLE_SQL } from './client/postgres-counters.js';
import { Recorder, type HistoryEvent, type RecorderOptions } from './client/recorder.js';
import { serveOnHost } from './net/lockstream-hosts.js';
import { startPostgresOnHost } from './net/postgres-hosts.js';
import { TestNetwork, type Host } from './net/test-network.js';
import { placeOn, startNetworkedEnsemble } from './net/zookeeper-hosts.js';
import {
  ELECTION,
  electionClient,
  incrementer,
  lockClient,
  recordLocks,
  SERVER_BUGS,
  type ElectionRoleOptions,
  type Placement,
  type PlantedBug,
  type RecordsRoleOptions,
  type Workload,
} from './workloads.js';

const DELAY_PROXY = fileURLToPath(new URL('./net/delay-proxy-main.ts', import.meta.url));
/** A client's delay proxy listens on 127.0.0.1:(this + k) of its host for instance k. */
const DELAY_PROXY_PORT = 6001;

/** ZooKeeper's tick and syncLimit: a follower cut off from its leader serves reads for 4 s. */
export const TICK_MS = 500;
export const SYNC_LIMIT_TICKS = 8;
/** lockstream's ZooKeeper session timeout: short, so that faults resolve within a period. */
export const SESSION_TIMEOUT_MS = 4_000;
/** Every instance listens on this port of its own host, and comes back on it after a kill. */
export const LOCKSTREAM_PORT = 50051;

export interface Instance {
  readonly name: string;
  readonly host: Host;
  /** The ZooKeeper members in its connect string. */
  readonly members: readonly EnsembleMember[];
  readonly address: string;
  /** Its wall clock, when the run steps clocks (libfaketime preloaded from the start). */
  readonly clock: FakeClock | undefined;
  server: ServerProcess;
  /** Every process this instance ran (restarts included), for logs and crash checks. */
  readonly generations: ServerProcess[];
  /** Set while a nemesis kills it: its exit is no crash. */
  killing: boolean;
  /** Processes that exited when nobody killed them. */
  readonly crashes: string[];
}

export interface ClientSlot {
  readonly name: string;
  readonly host: Host;
  readonly options: Omit<RecorderOptions, 'client'>;
  recorder: Recorder;
  /** Every recorder that ran on this host (a killed client comes back under a new name). */
  readonly generations: Recorder[];
  /**
   * Events the harness adds: a killed client stops believing it holds anything when it dies, a
   * paused one when it is stopped.
   */
  readonly added: HistoryEvent[];
  /** When a nemesis stopped it (SIGSTOP), until it is continued. */
  pausedAt: number | undefined;
  /** The client's delay proxy (when the run delays links): it reaches the instances through it. */
  readonly proxy: ChildProcess | undefined;
  killing: boolean;
  readonly crashes: string[];
}

export interface ClusterOptions {
  /** Lock clients (workload locks). */
  readonly clients: number;
  readonly workload?: Workload | undefined;
  /** Workload elections: candidates c1.. and observers o1.. of the election ELECTION. */
  readonly candidates?: number | undefined;
  readonly observers?: number | undefined;
  /** Candidates' options (workload elections); the defaults are recorder-main's. */
  readonly election?: ElectionRoleOptions | undefined;
  /** Incrementers' options (workload records). */
  readonly records?: RecordsRoleOptions | undefined;
  /** Plain mutex locks (m0, m1, ...; workload records: r0, r1, ...). */
  readonly locks: number;
  readonly plant: PlantedBug | undefined;
  /** Start the instances under libfaketime, for the clock nemesis. */
  readonly clocks: boolean;
  /** Clients reach the instances through a delay proxy on their host, for the delay nemesis. */
  readonly delays: boolean;
  /** A ZooKeeper ensemble with dynamic reconfiguration, for the membership nemesis. */
  readonly membership: boolean;
  readonly random: () => number;
  readonly log: (line: string) => void;
}

function now(): number {
  return Number(process.hrtime.bigint());
}

export class Cluster {
  readonly network: TestNetwork;
  readonly ensemble: ZooKeeperEnsemble;
  readonly zkHosts: readonly Host[];
  readonly instances: Instance[] = [];
  readonly clients: ClientSlot[] = [];
  /** The records workload's PostgreSQL, on host `pg` (no nemesis aims at it). */
  postgres: PostgresCluster | undefined;
  readonly root = `/jepsen-${randomUUID()}`;
  readonly #options: ClusterOptions;

  private constructor(
    network: TestNetwork,
    ensemble: ZooKeeperEnsemble,
    zkHosts: readonly Host[],
    options: ClusterOptions,
  ) {
    this.network = network;
    this.ensemble = ensemble;
    this.zkHosts = zkHosts;
    this.#options = options;
  }

  /**
   * Starts the ensemble, then the instances: `s1` on one follower only (so that cutting that
   * follower from its leader bites), `s2` and `s3` on every member; then the clients.
   */
  static async start(options: ClusterOptions): Promise<Cluster> {
    const network = await TestNetwork.create();
    let cluster: Cluster | undefined;
    try {
      const { ensemble, hosts } = await startNetworkedEnsemble(network, {
        tickTimeMs: TICK_MS,
        syncLimitTicks: SYNC_LIMIT_TICKS,
        ...(options.membership ? { dynamic: true } : {}),
      });
      cluster = new Cluster(network, ensemble, hosts, options);
      const leader = await ensemble.leader();
      const followers = ensemble.members.filter((member) => member !== leader);
      const all = ensemble.members;
      const rotate = (by: number): EnsembleMember[] => all.map((_, i) => all[(i + by) % all.length]!);
      const placements: Array<[string, readonly EnsembleMember[]]> = [
        ['s1', [followers[0]!]],
        ['s2', rotate(1)],
        ['s3', rotate(2)],
      ];
      const started = cluster;
      await Promise.all([
        ...placements.map(([name, members]) => started.#startInstance(name, members)),
        ...(options.workload === 'records' ? [started.#startPostgres()] : []),
      ]);
      // Started at once, pushed as they came up: s1 first again.
      cluster.instances.sort((a, b) => a.name.localeCompare(b.name));
      const start = (name: string, role: (at: Placement) => Omit<RecorderOptions, 'client'>): Promise<void> =>
        started.#startRole(name, role);
      if (options.workload === 'elections') {
        const election = options.election ?? {};
        for (let i = 0; i < (options.candidates ?? 5); i += 1)
          await start(`c${i + 1}`, (at) => electionClient('candidate', i, at, election));
        for (let i = 0; i < (options.observers ?? 3); i += 1)
          await start(`o${i + 1}`, (at) => electionClient('observer', i, at, election));
      } else if (options.workload === 'records') {
        for (let i = 0; i < options.clients; i += 1)
          await start(`c${i + 1}`, (at) =>
            incrementer(i, at, options.locks, options.records ?? {}, options.plant),
          );
      } else {
        for (let i = 0; i < options.clients; i += 1)
          await start(`c${i + 1}`, (at) => lockClient(i, at, options.locks, options.plant));
      }
      return cluster;
    } catch (error) {
      if (cluster) await cluster.stop();
      else await network.destroy();
      throw error;
    }
  }

  zkHost(member: EnsembleMember): Host {
    return this.zkHosts[member.id - 1]!;
  }

  /**
   * Where a ZooKeeper server that joins later (id above the first members') runs: a host of its
   * own, `zk<id>`, added on first use and kept (a server that joins again comes back there).
   * It is not among `zkHosts`: the other nemeses aim at the first members only.
   */
  async joinerPlacement(id: number): Promise<MemberPlacement> {
    const name = `zk${id}`;
    const host = this.network.hosts.find((h) => h.name === name) ?? (await this.network.addHost(name));
    return placeOn(this.network, host);
  }

  async #startPostgres(): Promise<void> {
    const host = await this.network.addHost('pg');
    this.postgres = await startPostgresOnHost(this.network, host, [COUNTERS_TABLE_SQL]);
  }

  async #startInstance(name: string, members: readonly EnsembleMember[]): Promise<void> {
    const host = await this.network.addHost(name);
    const clock = this.#options.clocks ? await fakeClock() : undefined;
    const server = await this.#serve(host, members, clock);
    const instance: Instance = {
      name,
      host,
      members,
      address: `${host.ip}:${LOCKSTREAM_PORT}`,
      clock,
      server,
      generations: [server],
      killing: false,
      crashes: [],
    };
    this.#watchInstance(instance, server);
    this.instances.push(instance);
  }

  async #serve(
    host: Host,
    members: readonly EnsembleMember[],
    clock: FakeClock | undefined,
  ): Promise<ServerProcess> {
    const plant = this.#options.plant;
    const env: Record<string, string> = { ...(clock?.env ?? {}) };
    if (plant !== undefined && SERVER_BUGS.has(plant)) env['LOCKSTREAM_PLANTED_BUG'] = plant;
    return serveOnHost(this.network, host, {
      members,
      sessionTimeoutMs: SESSION_TIMEOUT_MS,
      root: this.root,
      // After the starter's own --port 0 and --log-level debug: the last one counts.
      args: ['--port', String(LOCKSTREAM_PORT), '--log-level', 'info'],
      env,
    });
  }

  #watchInstance(instance: Instance, server: ServerProcess): void {
    void server.exited.then((code) => {
      if (instance.killing || this.#stopping) return;
      instance.crashes.push(
        `${instance.name} (pid ${server.pid}) exited (${code}): ${server.stderr().slice(-2000)}`,
      );
      this.#options.log(`CRASH: instance ${instance.name} exited (${code})`);
    });
  }

  /** SIGKILLs an instance (it stays down until restartInstance). */
  async killInstance(instance: Instance): Promise<void> {
    instance.killing = true;
    await instance.server.kill('SIGKILL');
  }

  /** Starts a killed instance again on the same host and port, with the same connect string. */
  async restartInstance(instance: Instance): Promise<void> {
    const server = await this.#serve(instance.host, instance.members, instance.clock);
    instance.server = server;
    instance.generations.push(server);
    instance.killing = false;
    this.#watchInstance(instance, server);
  }

  #addClient(
    name: string,
    host: Host,
    options: Omit<RecorderOptions, 'client'>,
    proxy: ChildProcess | undefined,
  ): void {
    const recorder = Recorder.start(this.network, host, { client: name, ...options });
    const slot: ClientSlot = {
      name,
      host,
      options,
      recorder,
      generations: [recorder],
      added: [],
      pausedAt: undefined,
      proxy,
      killing: false,
      crashes: [],
    };
    this.#watchClient(slot, recorder);
    this.clients.push(slot);
  }

  /** The servers a client on `host` reaches, starting at instance `first`, through its proxy if any. */
  #servers(first: number, proxy: ChildProcess | undefined): string[] {
    return this.instances.map((_, k) => this.#reach((first + k) % this.instances.length, proxy));
  }

  /** Instance `index`'s address as a client reaches it: through its delay proxy, if it has one. */
  #reach(index: number, proxy: ChildProcess | undefined): string {
    return proxy ? `127.0.0.1:${DELAY_PROXY_PORT + index}` : this.instances[index]!.address;
  }

  /** Starts client `name` on a host of its own, with the options `role` makes for where it is. */
  async #startRole(
    name: string,
    role: (placement: Placement) => Omit<RecorderOptions, 'client'>,
  ): Promise<void> {
    const host = await this.network.addHost(name);
    const proxy = this.#options.delays ? await this.#startProxy(host) : undefined;
    const placement: Placement = {
      instances: this.instances.map((instance) => instance.name),
      servers: (first) => this.#servers(first, proxy),
      reach: (index) => this.#reach(index, proxy),
      direct: (index) => this.instances[index]!.address,
      postgres: this.postgres?.url,
    };
    this.#addClient(name, host, role(placement), proxy);
  }

  /**
   * The election's whole history as the server recorded it: an Observe from term 1 through a
   * random instance, by a `reference` recorder on the first client's host, read until vacant and
   * quiet (client/election-roles.ts). Its lines join the history (history()) as the checker's
   * reference. Call once every client has stopped.
   */
  recordReference(random: () => number): Promise<void> {
    const first = Math.floor(random() * this.instances.length);
    return this.#recordOnce({ client: 'reference', role: 'reference', locks: [ELECTION] }, first);
  }

  /**
   * The records workload's final state: every record read through every instance, and every
   * PostgreSQL counter, by a `final` recorder on the first client's host
   * (client/record-increments.ts). Its lines join the history. Call once every client has stopped.
   */
  readRecords(): Promise<void> {
    const { keys } = this.#options.records ?? {};
    return this.#recordOnce({
      client: 'final',
      role: 'final-reader',
      locks: recordLocks(this.#options.locks),
      ...(keys === undefined ? {} : { keys }),
      ...(this.postgres === undefined ? {} : { postgres: this.postgres.url }),
    });
  }

  /** Runs a recorder on the first client's host to its end (at most 90 s); its lines join history(). */
  async #recordOnce(options: Omit<RecorderOptions, 'servers'>, first = 0): Promise<void> {
    const slot = this.clients[0]!;
    const recorder = Recorder.start(this.network, slot.host, {
      ...options,
      servers: this.#servers(first, slot.proxy),
    });
    this.#once.push(recorder);
    const timer = setTimeout(() => void recorder.kill('SIGKILL'), 90_000);
    await recorder.finished();
    clearTimeout(timer);
    if (recorder.exitCode !== 0)
      throw new Error(`the ${options.client} exited (${recorder.exitCode}): ${recorder.stderr.slice(-2000)}`);
  }

  /** The reference (elections) and the final reader (records), once they have run. */
  readonly #once: Recorder[] = [];

  /**
   * SIGSTOPs a client. Whatever it believed it held (led) ends when it stopped, as for a killed
   * client: a stopped process acts on nothing, and a candidate that wakes gives up what it led
   * (it notices the freeze: client/election-roles.ts). The `lost` events are added at
   * resumeClient, once everything it wrote before it stopped has been read.
   */
  async pauseClient(slot: ClientSlot): Promise<string> {
    await slot.recorder.kill('SIGSTOP');
    // After the stop has surely taken effect: nothing it records is later than this.
    await new Promise((resolve) => setTimeout(resolve, 50));
    slot.pausedAt = now();
    return `${slot.recorder.client} paused (SIGSTOP)`;
  }

  /** SIGCONTs a client paused by pauseClient; what it held ends at the pause (see there). */
  async resumeClient(slot: ClientSlot): Promise<void> {
    const pausedAt = slot.pausedAt;
    if (pausedAt === undefined) return;
    const recorder = slot.recorder;
    for (const lock of believedHolds(recorder.history.filter((event) => event.t <= pausedAt))) {
      slot.added.push({
        t: pausedAt,
        client: recorder.client,
        op: 1_000_000 + slot.added.length,
        type: 'event',
        f: 'lost',
        lock,
        error: 'paused (SIGSTOP) by the nemesis: a stopped process acts on nothing',
      });
    }
    slot.pausedAt = undefined;
    await recorder.kill('SIGCONT');
  }

  /** Starts a delay proxy on `host` with a port per instance; resolves once it listens. */
  async #startProxy(host: Host): Promise<ChildProcess> {
    const routes = this.instances.map((instance, k) => `${DELAY_PROXY_PORT + k}=${instance.address}`);
    const child = this.network.spawn(host, process.execPath, ['--import', 'tsx', DELAY_PROXY, ...routes], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const untrack = killOnExit(child);
    void once(child, 'close').then(untrack);
    await new Promise<void>((resolve, reject) => {
      child.stdout?.once('data', () => resolve());
      child.once('close', (code) => reject(new Error(`the delay proxy on ${host.name} exited (${code})`)));
    });
    return child;
  }

  /** Sets the one-way delay of `slot`'s links to every instance (0: none). */
  setDelay(slot: ClientSlot, ms: number): void {
    if (!slot.proxy) throw new Error('the clients were started without delay proxies');
    slot.proxy.stdin?.write(`delay ${Math.round(ms)}\n`);
  }

  #watchClient(slot: ClientSlot, recorder: Recorder): void {
    void recorder.finished().then(() => {
      if (slot.killing || this.#stopping || this.#clientsStopping) return;
      const stderr = recorder.stderr.replace(/^queued .*\n/gm, '');
      slot.crashes.push(`${recorder.client} exited (${recorder.exitCode}): ${stderr.slice(-2000)}`);
      this.#options.log(`CRASH: client ${recorder.client} exited (${recorder.exitCode})`);
    });
  }

  /**
   * SIGKILLs a client; each hold it still believed ends when it died (a `lost` event the harness
   * adds: a dead process acts on nothing), and a new client starts on its host under a new name.
   */
  async killClient(slot: ClientSlot): Promise<string> {
    slot.killing = true;
    const recorder = slot.recorder;
    await recorder.kill('SIGKILL');
    const diedAt = now();
    const held = believedHolds(recorder.history);
    for (const lock of held) {
      slot.added.push({
        t: diedAt,
        client: recorder.client,
        op: 1_000_000 + slot.added.length,
        type: 'event',
        f: 'lost',
        lock,
        error: 'killed (SIGKILL) by the nemesis',
      });
    }
    return `${recorder.client} killed holding ${held.length === 0 ? 'nothing' : held.join(', ')}`;
  }

  /** Starts a killed client again on its host, as `<name>.<generation>`. */
  restartClient(slot: ClientSlot): string {
    const client = `${slot.name}.${slot.generations.length + 1}`;
    const recorder = Recorder.start(this.network, slot.host, { client, ...slot.options });
    slot.recorder = recorder;
    slot.generations.push(recorder);
    slot.killing = false;
    this.#watchClient(slot, recorder);
    return client;
  }

  get workload(): Workload {
    return this.#options.workload ?? 'locks';
  }

  /**
   * A client (not paused) that believes it holds a lock now: the election's leader (holds
   * ELECTION) in the elections workload, the first holder of any lock in the others.
   */
  holder(): ClientSlot | undefined {
    return this.clients.find((slot) => {
      if (slot.pausedAt !== undefined) return false;
      const held = believedHolds(slot.recorder.history);
      return this.workload === 'elections' ? held.includes(ELECTION) : held.length > 0;
    });
  }

  /**
   * The instance a holder (holder()) most likely holds through: the one the leader was elected
   * through (its `elected` line names it), else the first of the holder's servers (the SDK stays
   * there until it fails over). Undefined if nobody holds.
   */
  holderInstance(): Instance | undefined {
    const holder = this.holder();
    const elected = [...(holder?.recorder.history ?? [])]
      .reverse()
      .find((e) => e.f === 'acquire' && e.type === 'ok');
    const server = elected?.server ?? holder?.options.servers[0];
    if (server === undefined) return undefined;
    const proxied = /^127\.0\.0\.1:(\d+)$/.exec(server);
    if (proxied) return this.instances[Number(proxied[1]) - DELAY_PROXY_PORT];
    return this.instances.find((instance) => instance.address === server);
  }

  /** Every client's history, with the events the harness added, and the reference or the final reads. */
  history(): HistoryEvent[] {
    return [
      ...this.clients.flatMap((slot) => [...slot.generations.flatMap((r) => r.history), ...slot.added]),
      ...this.#once.flatMap((recorder) => recorder.history),
    ];
  }

  crashes(): string[] {
    return [...this.instances.flatMap((i) => i.crashes), ...this.clients.flatMap((c) => c.crashes)];
  }

  /** Stops the clients (each releases what it holds and exits). */
  async stopClients(): Promise<void> {
    this.#clientsStopping = true;
    for (const slot of this.clients) if (slot.pausedAt !== undefined) await this.resumeClient(slot);
    await Promise.all(this.clients.map((slot) => slot.recorder.stop()));
  }

  #clientsStopping = false;
  #stopping = false;

  get clientsStopping(): boolean {
    return this.#clientsStopping;
  }

  /** Writes each instance's log (every generation) as JSON lines into `dir`. */
  async writeLogs(dir: string): Promise<void> {
    await mkdir(dir, { recursive: true });
    for (const instance of this.instances) {
      const lines = instance.generations.flatMap((server, g) =>
        server.logs.map((line) => JSON.stringify({ generation: g + 1, ...line })),
      );
      await writeFile(path.join(dir, `${instance.name}.log.jsonl`), lines.join('\n') + '\n');
    }
    for (const slot of this.clients) {
      const text = slot.generations.map((r) => `== ${r.client}\n${r.stderr}`).join('\n');
      await writeFile(path.join(dir, `${slot.name}.stderr.txt`), text);
    }
    for (const recorder of this.#once)
      await writeFile(path.join(dir, `${recorder.client}.stderr.txt`), recorder.stderr);
  }

  /** Stops everything and removes the network. Idempotent. */
  async stop(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    await Promise.all(this.clients.map((slot) => slot.recorder.kill('SIGKILL').catch(() => {})));
    for (const recorder of this.#once) await recorder.kill('SIGKILL').catch(() => {});
    for (const slot of this.clients) slot.proxy?.kill('SIGKILL');
    await Promise.all(this.instances.map((instance) => instance.server.kill('SIGKILL').catch(() => {})));
    await this.ensemble.stop().catch(() => {});
    await this.postgres?.stop().catch(() => {});
    for (const instance of this.instances) await instance.clock?.close();
    await this.network.destroy();
  }
}

/** The locks a client believes it holds at the end of its history (granted, not yet given up). */
export function believedHolds(history: readonly HistoryEvent[]): string[] {
  const held = new Set<string>();
  for (const event of history) {
    if (event.f === 'acquire' && event.type === 'ok') held.add(event.lock);
    else if (event.f === 'release' && event.type === 'invoke') held.delete(event.lock);
    else if (event.f === 'lost') held.delete(event.lock);
  }
  return [...held];
}
