/** A lockstream instance on a test host of a TestNetwork, on a ZooKeeper ensemble of test hosts. */
import type { EnsembleMember } from '../../setup/zookeeper-ensemble.js';
import { startServerProcess, type ServerProcess } from '../../support/server-process.js';
import type { Host, TestNetwork } from './test-network.js';

export interface HostedServerOptions {
  /** The members in its connect string, in order. */
  readonly members: readonly EnsembleMember[];
  readonly sessionTimeoutMs: number;
  /** lockstream's root node: instances that share it share their locks. */
  readonly root: string;
  /** More `serve` options, after these (of an option given twice, the last counts). */
  readonly args?: readonly string[];
  readonly env?: Record<string, string>;
}

/** Runs `lockstream serve` inside `host`, listening on its address; resolves once it listens. */
export function serveOnHost(
  network: TestNetwork,
  host: Host,
  options: HostedServerOptions,
): Promise<ServerProcess> {
  return startServerProcess(
    [
      '--zookeeper',
      options.members.map((member) => member.connectString).join(','),
      '--session-timeout',
      `${options.sessionTimeoutMs}ms`,
      '--root',
      options.root,
      ...(options.args ?? []),
    ],
    options.env ?? {},
    { ip: host.ip, prefix: network.prefix(host) },
  );
}
