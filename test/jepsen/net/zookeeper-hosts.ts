/**
 * A ZooKeeper ensemble whose members are test hosts of a TestNetwork, each in a network
 * namespace of its own: the partitions of test/jepsen cut links between them as on a real
 * network.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import {
  startZooKeeperEnsemble,
  type MemberPlacement,
  type StartZooKeeperEnsembleOptions,
  type ZooKeeperEnsemble,
} from '../../setup/zookeeper-ensemble.js';
import type { Host, TestNetwork } from './test-network.js';

const run = promisify(execFile);

/** Asks the member on `port` of `host` a four-letter word from inside the host. */
async function fourLetterWord(host: Host, port: number, cmd: string, timeoutMs: number): Promise<string> {
  const script =
    `const s=require('net').connect(${port},'127.0.0.1');const c=[];` +
    `s.setTimeout(${timeoutMs},()=>s.destroy(new Error('timed out')));` +
    `s.on('connect',()=>s.write(${JSON.stringify(cmd)}));s.on('data',(d)=>c.push(d));` +
    `s.on('error',(e)=>{console.error(e.message);process.exitCode=1});` +
    `s.on('close',()=>process.stdout.write(Buffer.concat(c)))`;
  const { stdout } = await run('ip', ['netns', 'exec', host.namespace, process.execPath, '-e', script], {
    timeout: timeoutMs + 2_000,
  });
  return stdout;
}

export interface NetworkedEnsemble {
  readonly ensemble: ZooKeeperEnsemble;
  /** The member hosts, in member id order (member i + 1 on hosts[i]). */
  readonly hosts: readonly Host[];
}

/** How a ZooKeeper server runs on `host`: in its namespace, four-letter words asked from there. */
export function placeOn(network: TestNetwork, host: Host): MemberPlacement {
  return {
    ip: host.ip,
    prefix: network.prefix(host),
    fourLetterWord: (port, cmd, timeoutMs) => fourLetterWord(host, port, cmd, timeoutMs),
  };
}

/** Adds hosts `zk1`..`zkN` to `network` and starts an ensemble on them. */
export async function startNetworkedEnsemble(
  network: TestNetwork,
  options: Omit<StartZooKeeperEnsembleOptions, 'placement'> = {},
): Promise<NetworkedEnsemble> {
  const size = options.size ?? 3;
  const hosts: Host[] = [];
  for (let id = 1; id <= size; id += 1) hosts.push(await network.addHost(`zk${id}`));
  const ensemble = await startZooKeeperEnsemble({
    ...options,
    size,
    placement: (id) => placeOn(network, hosts[id - 1]!),
  });
  return { ensemble, hosts };
}
