import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LockClient } from '../../src/client/index.js';
import { encodeLockName } from '../../src/server/engine/lock-nodes.js';
import { parseConnectString } from '../../src/server/stores/zookeeper/protocol/connection-options.js';
import { ZooKeeperConnection } from '../../src/server/stores/zookeeper/protocol/connection.js';
import { startZooKeeperEnsemble, type ZooKeeperEnsemble } from '../setup/zookeeper-ensemble.js';
import { interactiveGrpcurl } from '../support/grpcurl.js';
import { InteractiveProcess } from '../support/interactive-process.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { scaled } from '../support/timing.js';

/**
 * Fencing tokens above 2^53, where a double is no longer exact: ZooKeeper starts from an epoch
 * past 2^21, so every zxid is. Each client (the SDK, Go, Python, grpcurl) must show the token
 * equal to the lock node's czxid, digit for digit.
 */

const repo = fileURLToPath(new URL('../../', import.meta.url));
const EPOCH = 3_000_000;
const root = `/large-tokens-${randomUUID()}`;

let ensemble: ZooKeeperEnsemble;
let server: ServerProcess;
let zk: ZooKeeperConnection;

beforeAll(async () => {
  ensemble = await startZooKeeperEnsemble({ size: 1, epoch: EPOCH });
  server = await startServerProcess(['--zookeeper', ensemble.connectString, '--root', root]);
  zk = await ZooKeeperConnection.connect({
    servers: parseConnectString(ensemble.connectString).servers,
    sessionTimeoutMs: 10_000,
  });
}, scaled(120_000));

afterAll(async () => {
  await zk?.close();
  await server?.kill('SIGTERM');
  await ensemble?.stop();
});

/** The czxid of the one node queued for `name`: the token its holder must be shown. */
async function czxidOfHolder(name: string): Promise<bigint> {
  const parent = `${root}/locks/${encodeLockName(name)}`;
  const [child, ...others] = await zk.getChildren(parent);
  expect(others).toEqual([]);
  const stat = await zk.exists(`${parent}/${child}`);
  if (!stat) throw new Error(`${parent}/${child} vanished`);
  return stat.czxid;
}

function example(language: 'go' | 'python', args: string[]): InteractiveProcess {
  const [command, ...prefix] =
    language === 'go'
      ? [`${repo}.tmp/bin/lockstream-example-go`]
      : [`${repo}.venv/bin/python`, `${repo}examples/python/acquire.py`];
  if (!existsSync(command)) throw new Error(`${command} is missing: run scripts/install-test-deps.sh`);
  return new InteractiveProcess(command, [...prefix, ...args], { cwd: repo });
}

describe('fencing tokens above 2^53 (ZooKeeper epoch preset past 2^21)', () => {
  it('reach the SDK as the exact bigint czxid', async () => {
    const client = new LockClient(server.address);
    try {
      const lock = await client.acquire('large/sdk');
      const czxid = await czxidOfHolder('large/sdk');
      expect(czxid).toBeGreaterThan(2n ** 53n);
      expect(lock.token).toBe(czxid);
      await lock.release();
    } finally {
      client.close();
    }
  });

  it.each(['go', 'python'] as const)('reach the %s example exactly', async (language) => {
    const name = `large/${language}`;
    const holder = example(language, ['--address', server.address, '--name', name, '--hold-until-eof']);
    try {
      const [, printed] = await holder.waitFor(/^acquired token=(\d+)$/m);
      const czxid = await czxidOfHolder(name);
      expect(czxid).toBeGreaterThan(2n ** 53n);
      expect(printed).toBe(czxid.toString());
      holder.endInput();
      await holder.waitFor(/^released$/m);
      expect(await holder.exited).toBe(0);
    } finally {
      holder.kill();
    }
  });

  it('reach grpcurl exactly, as the JSON string of a uint64', async () => {
    const session = interactiveGrpcurl([
      '-plaintext',
      '-d',
      '@',
      server.address,
      'lockstream.v1.LockService/Acquire',
    ]);
    try {
      session.type({ start: { name: 'large/grpcurl', mode: 'LOCK_MODE_MUTEX' } });
      const [, printed] = await session.waitFor(/"fencingToken": "(\d+)"/);
      const czxid = await czxidOfHolder('large/grpcurl');
      expect(czxid).toBeGreaterThan(2n ** 53n);
      expect(printed).toBe(czxid.toString());
      session.endInput();
      await session.waitFor(/"released": \{\}/);
    } finally {
      session.kill();
    }
  });
});
