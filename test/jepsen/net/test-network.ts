/**
 * A private network of test hosts on this machine: each host is a Linux network namespace of its
 * own with one address, joined to the others through a bridge in a namespace of its own (the
 * switch), so that nothing of it touches the machine's own network. Links between hosts are cut
 * with iptables inside the hosts (packets dropped, nothing refused or closed: a partition, as on
 * a real network), and healed again.
 *
 * Addresses come from 198.18.0.0/15, the range set aside for benchmarking test networks
 * (RFC 2544): every network uses 198.18.0.0/24 inside its own switch, so networks of tests that
 * run at once never meet. Needs root (ip netns, iptables).
 */
import { execFile, spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

const SUBNET = '198.18.0';
/** Every namespace of a network is named `${PREFIX}<pid>n<network>-<name>`, to be found again. */
const PREFIX = 'lsj';

export interface Host {
  readonly name: string;
  /** The namespace's name, for `ip netns exec`. */
  readonly namespace: string;
  readonly ip: string;
}

let networks = 0;

async function ip(...args: string[]): Promise<void> {
  await run('ip', args);
}

async function inHost(namespace: string, command: string, ...args: string[]): Promise<string> {
  const { stdout } = await run('ip', ['netns', 'exec', namespace, command, ...args]);
  return stdout;
}

export class TestNetwork {
  readonly #id: string;
  /** Short and unique on the machine: veth names are made in the root namespace first. */
  readonly #linkPrefix: string;
  readonly #switch: string;
  readonly #hosts = new Map<string, Host>();
  /** Cuts in force, as `a|b` with a < b. */
  readonly #cuts = new Set<string>();
  #destroyed = false;

  private constructor(id: string, linkPrefix: string) {
    this.#id = id;
    this.#linkPrefix = linkPrefix;
    this.#switch = `${id}-sw`;
  }

  /** Makes the switch of a new network (and removes namespaces of dead test processes first). */
  static async create(): Promise<TestNetwork> {
    await removeStaleNamespaces();
    networks += 1;
    const network = new TestNetwork(
      `${PREFIX}${process.pid}n${networks}`,
      `ls${process.pid % 100000}n${networks % 100}h`,
    );
    await ip('netns', 'add', network.#switch);
    await inHost(network.#switch, 'ip', 'link', 'add', 'br0', 'type', 'bridge');
    await inHost(network.#switch, 'ip', 'link', 'set', 'br0', 'up');
    return network;
  }

  /** The network's addresses (CIDR): every host's is in it. */
  get subnet(): string {
    return `${SUBNET}.0/24`;
  }

  get hosts(): readonly Host[] {
    return [...this.#hosts.values()];
  }

  host(name: string): Host {
    const host = this.#hosts.get(name);
    if (!host) throw new Error(`no host ${name} in this network`);
    return host;
  }

  /** Adds a host: a namespace with loopback, and a link to the switch with the next address. */
  async addHost(name: string): Promise<Host> {
    if (this.#hosts.has(name)) throw new Error(`host ${name} exists already`);
    const index = this.#hosts.size + 1;
    if (index > 250) throw new Error('a test network holds at most 250 hosts');
    const namespace = `${this.#id}-${name}`;
    const host: Host = { name, namespace, ip: `${SUBNET}.${index}` };
    // Interface names are at most 15 characters: the outer end is named by index.
    const outer = `${this.#linkPrefix}${index}`;
    // Taken before the first await: hosts added at once get addresses of their own.
    this.#hosts.set(name, host);
    await ip('netns', 'add', namespace);
    await ip('link', 'add', outer, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', namespace);
    await ip('link', 'set', outer, 'netns', this.#switch);
    await inHost(this.#switch, 'ip', 'link', 'set', outer, 'master', 'br0');
    await inHost(this.#switch, 'ip', 'link', 'set', outer, 'up');
    await inHost(namespace, 'ip', 'link', 'set', 'lo', 'up');
    await inHost(namespace, 'ip', 'addr', 'add', `${host.ip}/24`, 'dev', 'eth0');
    await inHost(namespace, 'ip', 'link', 'set', 'eth0', 'up');
    return host;
  }

  /** Spawns `command` inside `host`'s namespace (as `ip netns exec`). */
  spawn(host: Host, command: string, args: readonly string[], options: SpawnOptions = {}): ChildProcess {
    return spawn('ip', ['netns', 'exec', host.namespace, command, ...args], options);
  }

  /** The command line prefix that runs a program inside `host`. */
  prefix(host: Host): string[] {
    return ['ip', 'netns', 'exec', host.namespace];
  }

  /** Runs `command` inside `host` to its end; resolves with its output. */
  exec(host: Host, command: string, ...args: string[]): Promise<string> {
    return inHost(host.namespace, command, ...args);
  }

  /**
   * Cuts the link between each host of `side` and each of `other` both ways: each drops every
   * packet from and to the other. Idempotent per pair.
   */
  async cut(side: readonly Host[], other: readonly Host[]): Promise<void> {
    for (const a of side) {
      for (const b of other) {
        if (a === b) continue;
        const key = pairKey(a, b);
        if (this.#cuts.has(key)) continue;
        this.#cuts.add(key);
        await Promise.all([dropBetween(a, b, '-A'), dropBetween(b, a, '-A')]);
      }
    }
  }

  /** Heals the links between `side` and `other` (every pair cut before). */
  async heal(side: readonly Host[], other: readonly Host[]): Promise<void> {
    for (const a of side) {
      for (const b of other) {
        const key = pairKey(a, b);
        if (!this.#cuts.delete(key)) continue;
        await Promise.all([dropBetween(a, b, '-D'), dropBetween(b, a, '-D')]);
      }
    }
  }

  /** Heals every cut. */
  async healAll(): Promise<void> {
    for (const host of this.#hosts.values()) {
      await inHost(host.namespace, 'iptables', '-F', 'INPUT');
      await inHost(host.namespace, 'iptables', '-F', 'OUTPUT');
    }
    this.#cuts.clear();
  }

  /** Whether `a` and `b` are cut from each other now. */
  isCut(a: Host, b: Host): boolean {
    return this.#cuts.has(pairKey(a, b));
  }

  /** Removes every namespace of the network (their veth links go with them). Idempotent. */
  async destroy(): Promise<void> {
    if (this.#destroyed) return;
    this.#destroyed = true;
    for (const host of this.#hosts.values()) await ip('netns', 'del', host.namespace).catch(() => {});
    await ip('netns', 'del', this.#switch).catch(() => {});
  }
}

function pairKey(a: Host, b: Host): string {
  return a.name < b.name ? `${a.name}|${b.name}` : `${b.name}|${a.name}`;
}

/** In `host`, drops (`-A`) or stops dropping (`-D`) every packet from and to `peer`. */
async function dropBetween(host: Host, peer: Host, action: '-A' | '-D'): Promise<void> {
  await inHost(host.namespace, 'iptables', action, 'INPUT', '-s', peer.ip, '-j', 'DROP');
  await inHost(host.namespace, 'iptables', action, 'OUTPUT', '-d', peer.ip, '-j', 'DROP');
}

/** Removes the namespaces of test processes that are gone (killed before they could clean up). */
async function removeStaleNamespaces(): Promise<void> {
  const { stdout } = await run('ip', ['netns', 'list']);
  for (const line of stdout.split('\n')) {
    const name = line.split(' ')[0] ?? '';
    const match = new RegExp(`^${PREFIX}(\\d+)n\\d+-`).exec(name);
    if (!match || isAlive(Number(match[1]))) continue;
    await ip('netns', 'del', name).catch(() => {});
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
