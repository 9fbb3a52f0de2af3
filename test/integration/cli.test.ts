import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { status } from '@grpc/grpc-js';
import { describe, expect, inject, it } from 'vitest';
import { LockCaller } from '../support/lock-caller.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { CLI, startServerProcess } from '../support/server-process.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));
const run = promisify(execFile);

describe('lockstream serve', () => {
  it('runs on the embedded store without --zookeeper and says so in its first log line', async () => {
    const server = await startServerProcess([]);
    try {
      expect(server.logs[0]).toMatchObject({
        level: 40,
        msg: expect.stringMatching(/embedded in-memory store.*single process.*--zookeeper/),
      });
      expect(server.logs.find((l) => String(l['msg']).startsWith('lockstream listening'))).toMatchObject({
        backend: 'memory',
        host: '127.0.0.1',
      });
      const caller = new LockCaller(server.address);
      const holder = caller.open({ name: 'cli' });
      await holder.acquired();
      await holder.release();
      caller.close();
    } finally {
      await server.kill('SIGTERM');
    }
  });

  it('takes its settings from LOCKSTREAM_* variables, and logs what it is connected to', async () => {
    const server = await startServerProcess([], {
      LOCKSTREAM_ZOOKEEPER: connectString,
      LOCKSTREAM_ROOT: '/cli-env',
    });
    try {
      expect(server.logs).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ zookeeper: connectString, root: '/cli-env' }),
          expect.objectContaining({ msg: 'ZooKeeper session established' }),
          expect.objectContaining({
            backend: 'zookeeper',
            msg: expect.stringMatching(/^lockstream listening/),
          }),
        ]),
      );
    } finally {
      await server.kill('SIGTERM');
    }
  });

  it('releases held locks and exits 0 on SIGTERM', async () => {
    const server = await startServerProcess([]);
    const caller = new LockCaller(server.address);
    const holder = caller.open({ name: 'sigterm' });
    await holder.acquired();
    expect(await server.kill('SIGTERM')).toBe(0);
    expect((await holder.outcome).code).toBe(status.UNAVAILABLE);
    expect(server.logs.at(-1)).toMatchObject({ msg: 'stopped' });
    caller.close();
  });

  it('reports every configuration problem at once and exits 2', async () => {
    const failure = run(process.execPath, [
      '--import',
      'tsx',
      CLI,
      'serve',
      '--port',
      '70000',
      '--root',
      'relative',
      '--log-level',
      'loud',
      '--session-timeout',
      'soon',
    ]);
    await expect(failure).rejects.toMatchObject({ code: 2 });
    const { stderr } = (await failure.catch((error: unknown) => error)) as { stderr: string };
    for (const flag of [
      '--port "70000"',
      '--root "relative"',
      '--log-level "loud"',
      '--session-timeout "soon"',
    ]) {
      expect(stderr).toContain(flag);
    }
  });
});
