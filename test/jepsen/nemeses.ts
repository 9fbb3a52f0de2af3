/**
 * The faults of a partition-suite run. Each nemesis is made fresh for one fault period: `start`
 * applies the fault and says what it did (the detail shown on the report's band), `stop` undoes
 * exactly that. The harness runs one at a time, with heal periods between.
 */
import type { EnsembleMember } from '../setup/zookeeper-ensemble.js';
import type { Cluster, ClientSlot, Instance } from './cluster.js';
import type { Host } from './net/test-network.js';
import { pauseWriters } from './writer-pauses.js';

export interface NemesisContext {
  readonly cluster: Cluster;
  readonly random: () => number;
  readonly log: (line: string) => void;
  /** The instance that faults aimed at one instance pick (when a planted bug lives there). */
  readonly focus?: Instance | undefined;
}

export interface Nemesis {
  readonly name: string;
  /** Applies the fault; resolves with what it did. */
  start(ctx: NemesisContext): Promise<string>;
  /** Undoes it (heals, restarts, resumes, steps the clock back). */
  stop(ctx: NemesisContext): Promise<void>;
}

export const NEMESES = [
  'partition-follower',
  'partition-instance-zk',
  'partition-instance-leader',
  'partition-zk-majority',
  'partition-client',
  'bridge',
  'kill-instance',
  'pause-instance',
  'kill-zk',
  'pause-zk',
  'kill-client',
  'flaky',
  'delay',
  'clock',
  'membership',
] as const;
/** Nemeses that only a run asks for by name (not in `all` of the locks workload). */
export const OTHER_NEMESES = ['pause-client', 'pause-writer'] as const;
export type NemesisName = (typeof NEMESES)[number] | (typeof OTHER_NEMESES)[number];
/** `all` of the elections workload: the faults of candidates, observers and their instances. */
export const ELECTION_NEMESES: readonly NemesisName[] = [
  'partition-instance-zk',
  'partition-client',
  'clock',
  'kill-instance',
  'pause-instance',
  'kill-client',
  'pause-client',
];
/** `all` of the records workload: holders paused between a read and its write, instances, a member. */
export const RECORDS_NEMESES: readonly NemesisName[] = [
  'pause-writer',
  'partition-instance-zk',
  'kill-instance',
  'pause-instance',
  'pause-zk',
];

function pick<T>(random: () => number, items: readonly T[]): T {
  const item = items[Math.floor(random() * items.length)];
  if (item === undefined) throw new Error('INVARIANT: pick from an empty list');
  return item;
}

function names(hosts: readonly Host[]): string {
  return hosts.map((host) => host.name).join(', ');
}

function zk(member: EnsembleMember): string {
  return `zk${member.id}`;
}

/** A set of cuts (side × other), healed again by stop. */
function partition(
  name: NemesisName,
  plan: (ctx: NemesisContext) => Promise<{ cuts: Array<[readonly Host[], readonly Host[]]>; detail: string }>,
): Nemesis {
  let cuts: Array<[readonly Host[], readonly Host[]]> = [];
  return {
    name,
    start: async (ctx) => {
      const planned = await plan(ctx);
      cuts = planned.cuts;
      for (const [side, other] of cuts) await ctx.cluster.network.cut(side, other);
      return planned.detail;
    },
    stop: async (ctx) => {
      for (const [side, other] of cuts) await ctx.cluster.network.heal(side, other);
    },
  };
}

/**
 * The instance a fault at one instance aims at: the focus if there is one; in the elections and
 * records workloads a holder's instance half the time (the leader's; when someone holds); else any.
 */
function instanceFor(ctx: NemesisContext): Instance {
  if (ctx.focus) return ctx.focus;
  if (ctx.cluster.workload !== 'locks' && ctx.random() < 0.5) {
    const instance = ctx.cluster.holderInstance();
    if (instance) return instance;
  }
  return pick(ctx.random, ctx.cluster.instances);
}

/** The client a fault at one client aims at: in the elections and records workloads a holder half the time. */
function clientFor(ctx: NemesisContext): ClientSlot {
  if (ctx.cluster.workload !== 'locks' && ctx.random() < 0.5) {
    const holder = ctx.cluster.holder();
    if (holder) return holder;
  }
  return pick(ctx.random, ctx.cluster.clients);
}

export function makeNemesis(name: NemesisName): Nemesis {
  switch (name) {
    case 'partition-follower':
      // s1's only member: while it is a follower, cut from the leader and the other follower,
      // it answers s1's reads alone for syncLimit × tickTime while the leader expires s1's
      // session (the case of issue 38's first defect).
      return partition(name, async ({ cluster }) => {
        const leader = await cluster.ensemble.leader();
        const s1 = cluster.instances[0]!;
        const member = s1.members[0]!;
        const others = cluster.ensemble.members.filter((m) => m !== member);
        const role = member === leader ? 'the leader' : 'a follower';
        return {
          cuts: [[[cluster.zkHost(member)], others.map((m) => cluster.zkHost(m))]],
          detail: `${zk(member)} (${role}, ${s1.name}'s only member) cut from ${others.map(zk).join(', ')}`,
        };
      });
    case 'partition-instance-zk':
      return partition(name, (ctx) => {
        const instance = instanceFor(ctx);
        return Promise.resolve({
          cuts: [[[instance.host], ctx.cluster.zkHosts]],
          detail: `${instance.name} cut from every ZooKeeper member`,
        });
      });
    case 'partition-instance-leader':
      return partition(name, async (ctx) => {
        const { cluster } = ctx;
        const instance = instanceFor(ctx);
        const leader = await cluster.ensemble.leader();
        return {
          cuts: [[[instance.host], [cluster.zkHost(leader)]]],
          detail: `${instance.name} cut from the leader ${zk(leader)}`,
        };
      });
    case 'partition-zk-majority':
      // {minority member, one instance} | {majority members, the other instances}.
      return partition(name, async (ctx) => {
        const { cluster, random } = ctx;
        await cluster.ensemble.leader();
        const minority = pick(random, cluster.ensemble.members);
        const majority = cluster.ensemble.members.filter((m) => m !== minority);
        const majorityHosts = majority.map((m) => cluster.zkHost(m));
        const stranded = instanceFor(ctx);
        const rest = cluster.instances.filter((i) => i !== stranded);
        return {
          cuts: [
            [[cluster.zkHost(minority), stranded.host], majorityHosts],
            [rest.map((i) => i.host), [cluster.zkHost(minority)]],
          ],
          detail:
            `${zk(minority)} + ${stranded.name} | ${majority.map(zk).join(', ')} + ` +
            rest.map((i) => i.name).join(', '),
        };
      });
    case 'partition-client':
      return partition(name, (ctx) => {
        const { cluster, random } = ctx;
        const client = clientFor(ctx);
        const all = random() < 0.5;
        const instances = all ? cluster.instances : [pick(random, cluster.instances)];
        return Promise.resolve({
          cuts: [[[client.host], instances.map((i) => i.host)]],
          detail: `${client.recorder.client} cut from ${all ? 'every instance' : instances[0]!.name}`,
        });
      });
    case 'bridge':
      return partition(name, (ctx) => {
        const instance = instanceFor(ctx);
        const clients = ctx.cluster.clients.map((c) => c.host);
        return Promise.resolve({
          cuts: [[[instance.host], clients]],
          detail: `${instance.name} reaches ZooKeeper but none of its clients (${names(clients)})`,
        });
      });
    case 'kill-instance': {
      let killed: Instance | undefined;
      return {
        name,
        start: async (ctx) => {
          killed = instanceFor(ctx);
          await ctx.cluster.killInstance(killed);
          return `${killed.name} killed (SIGKILL)`;
        },
        stop: async (ctx) => {
          if (killed) await ctx.cluster.restartInstance(killed);
        },
      };
    }
    case 'pause-instance': {
      let paused: Instance | undefined;
      return {
        name,
        start: (ctx) => {
          paused = instanceFor(ctx);
          process.kill(paused.server.pid, 'SIGSTOP');
          return Promise.resolve(`${paused.name} paused (SIGSTOP)`);
        },
        stop: () => {
          if (paused) process.kill(paused.server.pid, 'SIGCONT');
          return Promise.resolve();
        },
      };
    }
    case 'kill-zk':
    case 'pause-zk': {
      let member: EnsembleMember | undefined;
      return {
        name,
        start: async ({ cluster, random }) => {
          const leader = await cluster.ensemble.leader();
          // The leader half the time: an election under load.
          member = random() < 0.5 ? leader : pick(random, cluster.ensemble.members);
          const role = member === leader ? 'the leader' : 'a follower';
          if (name === 'kill-zk') {
            await member.kill('SIGKILL');
            return `${zk(member)} (${role}) killed (SIGKILL)`;
          }
          member.pause();
          return `${zk(member)} (${role}) paused (SIGSTOP)`;
        },
        stop: async ({ cluster }) => {
          if (!member) return;
          if (name === 'kill-zk') await member.restart();
          else member.resume();
          await cluster.ensemble.waitForQuorum();
        },
      };
    }
    case 'kill-client': {
      let slot: ClientSlot | undefined;
      return {
        name,
        start: async (ctx) => {
          slot = clientFor(ctx);
          return ctx.cluster.killClient(slot);
        },
        stop: ({ cluster, log }) => {
          if (slot) log(`${slot.name} restarted as ${cluster.restartClient(slot)}`);
          return Promise.resolve();
        },
      };
    }
    case 'pause-client': {
      let slot: ClientSlot | undefined;
      return {
        name,
        start: async (ctx) => {
          slot = clientFor(ctx);
          return ctx.cluster.pauseClient(slot);
        },
        stop: async ({ cluster }) => {
          if (slot) await cluster.resumeClient(slot);
        },
      };
    }
    case 'pause-writer':
      return pauseWriters();
    case 'flaky': {
      // No netem on this kernel: random loss with iptables' statistic match, both ways, on every
      // link of one host. Delay is not modelled (see README).
      let rule: { host: Host; probability: string } | undefined;
      const apply = async (ctx: NemesisContext, action: '-A' | '-D'): Promise<void> => {
        if (!rule) return;
        for (const chain of ['INPUT', 'OUTPUT']) {
          await ctx.cluster.network.exec(
            rule.host,
            'iptables',
            action,
            chain,
            '-m',
            'statistic',
            '--mode',
            'random',
            '--probability',
            rule.probability,
            '-j',
            'DROP',
          );
        }
      };
      return {
        name,
        start: async (ctx) => {
          const { cluster, random } = ctx;
          const hosts = [...cluster.instances.map((i) => i.host), ...cluster.zkHosts];
          rule = { host: pick(random, hosts), probability: (0.2 + 0.2 * random()).toFixed(2) };
          await apply(ctx, '-A');
          return `${rule.host.name} loses ${Math.round(Number(rule.probability) * 100)} % of its packets each way`;
        },
        stop: (ctx) => apply(ctx, '-D'),
      };
    }
    case 'delay': {
      // Through each client's delay proxy (a user-space stand-in for netem's delay).
      let delayed: ClientSlot[] = [];
      return {
        name,
        start: ({ cluster, random }) => {
          const all = random() < 0.5;
          delayed = all ? [...cluster.clients] : [pick(random, cluster.clients)];
          const ms = Math.round(100 + 1400 * random());
          for (const slot of delayed) cluster.setDelay(slot, ms);
          const who = all ? 'every client' : delayed[0]!.recorder.client;
          return Promise.resolve(`${who}: links to every instance delayed ${ms} ms each way`);
        },
        stop: ({ cluster }) => {
          for (const slot of delayed) cluster.setDelay(slot, 0);
          return Promise.resolve();
        },
      };
    }
    case 'membership':
      return membershipChange();
    case 'clock': {
      let strobe: NodeJS.Timeout | undefined;
      let stepped: Instance | undefined;
      return {
        name,
        start: async (ctx) => {
          const { cluster, random } = ctx;
          if (cluster.instances.some((i) => i.clock === undefined))
            throw new Error('the instances were started without a fake clock');
          stepped = instanceFor(ctx);
          const clock = stepped.clock!;
          const sign = random() < 0.5 ? '+' : '-';
          if (random() < 0.5) {
            await clock.step(`${sign}1h`);
            return `${stepped.name}'s wall clock stepped ${sign}1 h`;
          }
          const periodMs = Math.round(50 + 250 * random());
          let up = false;
          strobe = setInterval(() => {
            up = !up;
            // A step lost to the next one is no harm: the strobe goes on.
            clock.step(up ? `${sign}1h` : '+0').catch(() => {});
          }, periodMs);
          return `${stepped.name}'s wall clock strobed between +0 and ${sign}1 h every ${periodMs} ms`;
        },
        stop: async () => {
          clearInterval(strobe);
          await stepped?.clock?.step('+0');
        },
      };
    }
  }
}

/** The id of the server that joins in place of a removed member (on host zk4). */
const JOINER_ID = 4;

/**
 * A ZooKeeper membership change under load, by dynamic reconfiguration: one member (the leader
 * a third of the time) is removed and then stopped, as an operator retires a machine (ZooKeeper
 * itself leaves a removed server running, following without a vote and serving its clients);
 * then a new server joins on a host of its own, zk4, and is added. The instances keep their
 * static connect strings: those listing the removed member lose their connection to it and move
 * on to another member; s1, whose only member it may be, reaches none until it is back. Undone
 * by the reverse: the removed member joins again (afresh: empty data dir, synced from the
 * leader) and is added, zk4 is removed and stopped, so that the next faults find the first three
 * members, and their quorum, again.
 */
function membershipChange(): Nemesis {
  let removed: EnsembleMember | undefined;
  return {
    name: 'membership',
    start: async ({ cluster, random }) => {
      const membership = cluster.ensemble.membership;
      if (!membership) throw new Error('the ensemble was started without dynamic reconfiguration');
      const leader = await cluster.ensemble.leader();
      const member = pick(random, cluster.ensemble.members);
      removed = member;
      const s1 = cluster.instances[0]!;
      const role =
        (member === leader ? 'the leader' : 'a follower') +
        (s1.members.length === 1 && s1.members[0] === member ? `, ${s1.name}'s only member` : '');
      await membership.reconfig({ remove: [member.id] });
      await member.kill('SIGTERM');
      await membership.startJoiner(JOINER_ID, await cluster.joinerPlacement(JOINER_ID));
      await membership.reconfig({ add: [JOINER_ID] });
      return (
        `${zk(member)} (${role}) removed and stopped, zk${JOINER_ID} added: members ` +
        membership.voters.map((id) => `zk${id}`).join(', ')
      );
    },
    stop: async ({ cluster }) => {
      const membership = cluster.ensemble.membership;
      if (!membership || !removed) return;
      // From wherever start got to: the removed member back in, then the joiner out.
      if (!membership.voters.includes(removed.id)) {
        if (removed.pid !== null) await removed.kill('SIGTERM');
        await membership.startJoiner(removed.id);
        await membership.reconfig({ add: [removed.id] });
      }
      if (membership.voters.includes(JOINER_ID)) await membership.reconfig({ remove: [JOINER_ID] });
      await membership.member(JOINER_ID)?.kill('SIGTERM');
      await cluster.ensemble.waitForQuorum();
    },
  };
}
