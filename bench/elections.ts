/**
 * `npm run bench:elections` (issue 40): how long an election's seat stays empty, through the
 * TypeScript SDK with its default options, on two lockstream instances (built JavaScript) sharing a
 * private ZooKeeper (fsync on).
 * 1. Resign: the leader resigns (`Leadership.resign()`) while another candidate waits: the time
 *    from the call to the next candidate's `campaign` resolving (`--handovers` of them).
 * 2. Leader process killed: the leader is a process of its own (bench/election-candidate.ts,
 *    the SDK's default 5 s resume grace), killed with SIGKILL: the time from the signal to the
 *    next candidate's election (the grace passes first: nobody else leads meanwhile).
 * 3. Leader's instance killed: the leader's instance (its first endpoint) is killed with SIGKILL:
 *    the leader resumes on the other instance and keeps its term (`whenConfirmed()`); the time from
 *    the signal to that, and that the waiting candidate was not elected meanwhile.
 * p50/p99/max per scenario; writes JSON to bench/results/.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { LockClient, type Leadership } from '../dist/client/index.js';
import { startZooKeeper } from '../test/setup/zookeeper-process.js';
import { BENCH_DIR, nodeScript, spawnLineProcess, type LineProcess } from './processes.js';

const { values: flags } = parseArgs({
  options: {
    handovers: { type: 'string', default: '200' },
    kills: { type: 'string', default: '3' },
    out: { type: 'string' },
  },
});
const HANDOVERS = Number(flags.handovers);
const KILLS = Number(flags.kills);
const ROOT = '/bench-elections';

async function startInstance(
  zookeeper: string,
  port: number,
): Promise<{ process: LineProcess; port: number }> {
  const instance = spawnLineProcess(process.execPath, [
    fileURLToPath(new URL('../dist/cli.js', import.meta.url)),
    'serve',
    '--port',
    String(port),
    '--zookeeper',
    zookeeper,
    '--root',
    ROOT,
  ]);
  const listening = await instance.next((m) => String(m['msg']).startsWith('lockstream listening'));
  return { process: instance, port: Number(listening['port']) };
}

function summary(samples: readonly number[]): { n: number; p50: number; p99: number; max: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (p: number): number =>
    sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
  const round = (ms: number): number => Math.round(ms * 10) / 10;
  return {
    n: sorted.length,
    p50: round(at(50)),
    p99: round(at(99)),
    max: round(sorted.at(-1) ?? Number.NaN),
  };
}

const zookeeper = await startZooKeeper({ production: true });
const instances = [
  await startInstance(zookeeper.connectString, 0),
  await startInstance(zookeeper.connectString, 0),
];
const address = (i: number): string => `127.0.0.1:${instances[i]!.port}`;
const clients: LockClient[] = [];
const client = (...endpoints: string[]): LockClient => {
  const made = new LockClient(endpoints);
  clients.push(made);
  return made;
};
try {
  // 1. Resign, handed over: two candidates on two instances take turns.
  const a = client(address(0));
  const b = client(address(1));
  const resigns: number[] = [];
  let leader: Leadership = await a.campaign('handover', 'a');
  let waiting = b.campaign('handover', 'b');
  for (let i = 0; i < HANDOVERS; i += 1) {
    // The waiting candidate is queued once the election shows it.
    for (;;) {
      const described = await a.describe('handover');
      if (described.waiters.length === 1) break;
    }
    const started = performance.now();
    await leader.resign();
    leader = await waiting;
    resigns.push(performance.now() - started);
    waiting = (i % 2 === 0 ? a : b).campaign('handover', i % 2 === 0 ? 'a' : 'b');
  }
  await leader.resign();
  await (await waiting).resign();

  // 2. The leader's process killed: the SDK's default grace passes before the next is elected.
  const processKills: number[] = [];
  for (let i = 0; i < KILLS; i += 1) {
    const [command, args] = nodeScript('./election-candidate.ts', [address(0), 'process-kill']);
    const candidate = spawnLineProcess(command, args);
    const { term } = await candidate.next('elected');
    const next = b.campaign('process-kill', 'next');
    for (;;) if ((await b.describe('process-kill')).waiters.length === 1) break;
    const killedAt = performance.now();
    process.kill(candidate.pid, 'SIGKILL');
    const elected = await next;
    processKills.push(performance.now() - killedAt);
    if (elected.term <= BigInt(String(term))) throw new Error('the next term is not larger');
    await elected.resign();
  }

  // 3. The leader's instance killed: it resumes on the other instance with its term.
  const instanceKills: number[] = [];
  let electedMeanwhile = 0;
  for (let i = 0; i < KILLS; i += 1) {
    const leading = client(address(0), address(1));
    const held = await leading.campaign('instance-kill', 'leader');
    const next = b.campaign('instance-kill', 'next');
    for (;;) if ((await b.describe('instance-kill')).waiters.length === 1) break;
    let nextElected = false;
    void next.then(() => (nextElected = true)).catch(() => {});
    const victim = instances[0]!;
    const killedAt = performance.now();
    process.kill(victim.process.pid, 'SIGKILL');
    await victim.process.exited;
    await held.whenConfirmed();
    instanceKills.push(performance.now() - killedAt);
    if ((await b.leader('instance-kill'))?.term !== held.term) throw new Error('the leader lost its term');
    if (nextElected) electedMeanwhile += 1;
    await held.resign();
    await (await next).resign();
    leading.close();
    instances[0] = await startInstance(zookeeper.connectString, victim.port);
  }

  const result = {
    machine: { cpus: os.cpus().length, node: process.version },
    resignToNextElectedMs: summary(resigns),
    leaderProcessKilledToNextElectedMs: summary(processKills),
    leaderInstanceKilledToTermConfirmedMs: summary(instanceKills),
    electedWhileTheLeaderResumed: electedMeanwhile,
  };
  console.log(`\nElections on 2 instances, one ZooKeeper; ${HANDOVERS} handovers, ${KILLS} kills each`);
  console.table({
    'resign -> next elected (ms)': result.resignToNextElectedMs,
    'SIGKILL of the leader process -> next elected (ms)': result.leaderProcessKilledToNextElectedMs,
    "SIGKILL of the leader's instance -> term confirmed (ms)": result.leaderInstanceKilledToTermConfirmedMs,
  });
  console.log(`candidates elected while a leader resumed: ${electedMeanwhile}`);
  const out =
    flags.out ??
    path.join(BENCH_DIR, 'results', `elections-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  await mkdir(path.dirname(out), { recursive: true });
  await writeFile(out, `${JSON.stringify(result, null, 2)}\n`);
  console.log(`written to ${out}`);
} finally {
  for (const each of clients) each.close();
  for (const instance of instances) await instance.process.kill();
  await zookeeper.stop();
}
