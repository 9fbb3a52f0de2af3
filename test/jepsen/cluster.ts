/**
 * What a partition-suite run starts, every process on a test host of its own (a network
 * namespace, test/jepsen/net): a three-member ZooKeeper ensemble, three lockstream instances,
 * and lock clients that record their histories (test/jepsen/client). The nemeses reach every
 * process through it: kill and restart an instance or a client on the same host and port,
 * step an instance's wall clock, find the ZooKeeper leader.
 */
import { type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { EnsembleMember, MemberPlacement, ZooKeeperEnsemble } from '../setup/zookeeper-ensemble.js';
import { killOnExit } from '../setup/zookeeper-process.js';
import { fakeClock, type FakeClock } from '../support/fake-clock.js';
import type { ServerProcess } from '../support/server-process.js';
import { Recorder, type HistoryEvent, type RecorderOptions } from './client/recorder.js';
import { serveOnHost } from './net/lockstream-hosts.js';
import { TestNetwork, type Host } from './net/test-network.js';
import { placeOn, startNetworkedEnsemble } from './net/zookeeper-hosts.js';

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

export type PlantedBug =
  'released-early' | 'follower-reads' | 'ignore-lost' | 'elected-early' | 'observer-skips';
export const PLANTED_BUGS: readonly PlantedBug[] = [
  'released-early',
  'follower-reads',
  'ignore-lost',
  'elected-early',
  'observer-skips',
];
/** Planted in the server (LOCKSTREAM_PLANTED_BUG, src/server/planted-bugs.ts); the others in a client. */
const SERVER_BUGS: ReadonlySet<PlantedBug> = new Set([
  'released-early',
  'follower-reads',
  'elected-early',
  'observer-skips',
]);
/** The planted bugs of elections: they need the elections workload. */
export const ELECTION_BUGS: ReadonlySet<PlantedBug> = new Set(['elected-early', 'observer-skips']);

/** What the clients do: take locks, or campaign for and observe an election. */
export type Workload = 'locks' | 'elections';
/** The election of the elections workload. */
export const ELECTION = 'e0';

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
  /** Plain mutex locks (m0, m1, ...). */
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

/** How candidates campaign and lead (recorder-main.ts's options of the same names). */
export interface ElectionRoleOptions {
  /** How long a leader leads (default 200-2500 ms), unless a quick term (a moment). */
  readonly holdMs?: string;
  /** Between a candidate's campaigns (default 100-1000 ms). */
  readonly pauseMs?: string;
  readonly graceMs?: number;
  readonly quick?: number;
  readonly stale?: number;
  /** How long an observer keeps a stream before starting another (recorder default 5000-20000 ms). */
  readonly observeMs?: string;
  /**
   * The instances (by name) whose campaigns ask for the grace; the others' do not. Unset: half
   * of all campaigns at random. Keeping the two apart per instance avoids the known takeover
   * bug (README: "Elections"), which needs both kinds in one instance's ZooKeeper session.
   */
  readonly graceInstances?: readonly string[];
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
      await Promise.all(placements.map(([name, members]) => started.#startInstance(name, members)));
      // Started at once, pushed as they came up: s1 first again.
      cluster.instances.sort((a, b) => a.name.localeCompare(b.name));
      if (options.workload === 'elections') {
        for (let i = 0; i < (options.candidates ?? 5); i += 1)
          await cluster.#startElectionClient('candidate', i);
        for (let i = 0; i < (options.observers ?? 3); i += 1)
          await cluster.#startElectionClient('observer', i);
      } else {
        for (let i = 0; i < options.clients; i += 1) await cluster.#startClient(i);
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

  /**
   * Client i: its role cycles through a mutex writer (locks m0..), a reader or writer of one
   * read/write lock (rw), and a holder of a semaphore of 2 (sem); its instance list starts at
   * instance floor(i / 3) mod 3, so each instance serves every role. Planted bugs that need a
   * holder to hold on through a fault (follower-reads, ignore-lost) get roles of their own.
   */
  async #startClient(i: number): Promise<void> {
    const name = `c${i + 1}`;
    const host = await this.network.addHost(name);
    const first = Math.floor(i / 3) % this.instances.length;
    const proxy = this.#options.delays ? await this.#startProxy(host) : undefined;
    const servers = this.#servers(first, proxy);
    const plant = this.#options.plant;
    const mutexes = Array.from({ length: Math.max(1, this.#options.locks) }, (_, k) => `m${k}`);
    const role: Omit<RecorderOptions, 'client' | 'servers'> =
      i % 3 === 0
        ? { locks: mutexes, mode: 'write', holdMs: '20-1000' }
        : i % 3 === 1
          ? { locks: ['rw'], mode: Math.floor(i / 3) % 2 === 0 ? 'read' : 'write', holdMs: '50-1000' }
          : { locks: ['sem'], mode: 'semaphore', limit: 2, holdMs: '100-3000' };
    const options: Omit<RecorderOptions, 'client'> =
      plant === 'follower-reads' || plant === 'ignore-lost'
        ? {
            // Bugs that show only when a holder on s1 (the nemeses' focus) holds on through a
            // fault while a client of another instance waits: c1, on s1 alone, holds the mutex
            // m0 for 10-15 s at a time; the clients of s2 and s3 take it briefly in between and
            // wait long; s1's other clients keep to m1, out of the way.
            locks: [i === 0 || first !== 0 ? 'm0' : 'm1'],
            mode: 'write',
            holdMs: i === 0 ? '10000-15000' : '100-500',
            servers: i === 0 ? [this.instances[0]!.address] : servers,
            pauseMs: '20-300',
            waitTimeoutMs: 30_000,
            ignoreLost: plant === 'ignore-lost' && i === 0,
          }
        : { ...role, servers, pauseMs: '20-300', waitTimeoutMs: 10_000 };
    this.#addClient(name, host, options, proxy);
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
    return this.instances.map((_, k) => {
      const index = (first + k) % this.instances.length;
      return proxy ? `127.0.0.1:${DELAY_PROXY_PORT + index}` : this.instances[index]!.address;
    });
  }

  /**
   * Election client i of its role: candidate `c<i+1>` or observer `o<i+1>`, on a host of its
   * own, its instance list starting at instance i mod 3 (each instance serves both roles).
   */
  async #startElectionClient(role: 'candidate' | 'observer', i: number): Promise<void> {
    const name = `${role === 'candidate' ? 'c' : 'o'}${i + 1}`;
    const host = await this.network.addHost(name);
    const proxy = this.#options.delays ? await this.#startProxy(host) : undefined;
    const election = this.#options.election ?? {};
    const servers = this.#servers(i % this.instances.length, proxy);
    const graceServers = election.graceInstances?.map((instance) => {
      const index = this.instances.findIndex((candidate) => candidate.name === instance);
      if (index < 0) throw new Error(`graceInstances: no instance ${instance}`);
      return proxy ? `127.0.0.1:${DELAY_PROXY_PORT + index}` : this.instances[index]!.address;
    });
    this.#addClient(
      name,
      host,
      {
        role,
        locks: [ELECTION],
        servers,
        waitTimeoutMs: 30_000,
        ...(graceServers === undefined ? {} : { graceServers }),
        holdMs: election.holdMs ?? '200-2500',
        pauseMs: election.pauseMs ?? '100-1000',
        ...(election.graceMs === undefined ? {} : { graceMs: election.graceMs }),
        ...(election.quick === undefined ? {} : { quick: election.quick }),
        ...(election.stale === undefined ? {} : { stale: election.stale }),
        ...(election.observeMs === undefined ? {} : { observeMs: election.observeMs }),
      },
      proxy,
    );
  }

  /**
   * The election's whole history as the server recorded it: an Observe from term 1 through a
   * random instance, by a `reference` recorder on the first client's host, read until vacant and
   * quiet (client/election-roles.ts). Its lines join the history (history()) as the checker's
   * reference. Call once every client has stopped.
   */
  async recordReference(random: () => number): Promise<void> {
    const first = Math.floor(random() * this.instances.length);
    const slot = this.clients[0]!;
    const recorder = Recorder.start(this.network, slot.host, {
      client: 'reference',
      role: 'reference',
      locks: [ELECTION],
      servers: this.#servers(first, slot.proxy),
    });
    this.#reference = recorder;
    const timer = setTimeout(() => void recorder.kill('SIGKILL'), 90_000);
    await recorder.finished();
    clearTimeout(timer);
    if (recorder.exitCode !== 0)
      throw new Error(`the reference exited (${recorder.exitCode}): ${recorder.stderr.slice(-2000)}`);
  }

  #reference: Recorder | undefined;

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

  /** The client that believes it leads the election now (holds ELECTION), if any. */
  leader(): ClientSlot | undefined {
    return this.clients.find(
      (slot) => slot.pausedAt === undefined && believedHolds(slot.recorder.history).includes(ELECTION),
    );
  }

  /** The instance the leader was elected through (its `elected` line names it), if anyone leads. */
  leaderInstance(): Instance | undefined {
    const leader = this.leader();
    const elected = [...(leader?.recorder.history ?? [])]
      .reverse()
      .find((e) => e.f === 'acquire' && e.type === 'ok');
    const server = elected?.server;
    if (server === undefined) return undefined;
    const proxied = /^127\.0\.0\.1:(\d+)$/.exec(server);
    if (proxied) return this.instances[Number(proxied[1]) - DELAY_PROXY_PORT];
    return this.instances.find((instance) => instance.address === server);
  }

  /** Every client's history, with the events the harness added, and the reference if recorded. */
  history(): HistoryEvent[] {
    return [
      ...this.clients.flatMap((slot) => [...slot.generations.flatMap((r) => r.history), ...slot.added]),
      ...(this.#reference?.history ?? []),
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
    if (this.#reference) await writeFile(path.join(dir, 'reference.stderr.txt'), this.#reference.stderr);
  }

  /** Stops everything and removes the network. Idempotent. */
  async stop(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    await Promise.all(this.clients.map((slot) => slot.recorder.kill('SIGKILL').catch(() => {})));
    await this.#reference?.kill('SIGKILL').catch(() => {});
    for (const slot of this.clients) slot.proxy?.kill('SIGKILL');
    await Promise.all(this.instances.map((instance) => instance.server.kill('SIGKILL').catch(() => {})));
    await this.ensemble.stop().catch(() => {});
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
