import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { status } from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { findFreePorts } from '../setup/zookeeper-ports.js';
import { LockCaller } from '../support/lock-caller.js';
import { httpPortOf, probe } from '../support/probes.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { CLI, startServerProcess, type ServerProcess } from '../support/server-process.js';

/** The example file docs/configuration.md shows. */
const EXAMPLE_FILE = fileURLToPath(new URL('../../examples/config/lockstream.yaml', import.meta.url));

const connectString = requireZooKeeper(inject('zookeeperConnectString'));
const run = promisify(execFile);

describe('lockstream serve --config', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'lockstream-config-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const cleanups: Array<() => Promise<unknown> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function file(name: string, text: string): Promise<string> {
    const path = join(dir, name);
    await writeFile(path, text);
    return path;
  }

  async function serve(args: string[], env: Record<string, string> = {}): Promise<ServerProcess> {
    const server = await startServerProcess(args, env);
    cleanups.push(() => (server.exitCode() === null ? server.kill('SIGKILL') : undefined));
    return server;
  }

  function caller(server: ServerProcess): LockCaller {
    const lockCaller = new LockCaller(server.address);
    cleanups.push(() => lockCaller.close());
    return lockCaller;
  }

  /** `lockstream serve` that must refuse to start: resolves with its exit code and what it printed. */
  async function refused(
    args: string[],
    env: Record<string, string> = {},
  ): Promise<{ code: number; stderr: string }> {
    const failure = await run(process.execPath, ['--import', 'tsx', CLI, 'serve', ...args], {
      env: { ...process.env, ...env },
    }).then(
      () => {
        throw new Error('lockstream serve started');
      },
      (error: unknown) => error as { code: number; stderr: string },
    );
    return { code: failure.code, stderr: failure.stderr };
  }

  it('takes a setting from the file unless an environment variable or a flag gives it (flag > env > file > default)', async () => {
    const [fromFile, fromEnv] = (await findFreePorts(2)) as [number, number];
    const config = await file(
      'precedence.yaml',
      [
        '# only here: the file wins over the default (10000)',
        'max-waiters-per-lock: 1',
        '# here and in LOCKSTREAM_HTTP_PORT: the environment wins',
        `http-port: ${fromFile}`,
        '# here, in LOCKSTREAM_LOG_LEVEL and as --log-level debug (the test harness): the flag wins',
        'log-level: error',
      ].join('\n'),
    );
    const server = await serve(['--config', config], {
      LOCKSTREAM_HTTP_PORT: String(fromEnv),
      LOCKSTREAM_LOG_LEVEL: 'warn',
    });

    expect(await httpPortOf(server)).toBe(fromEnv);
    expect((await probe(fromEnv, '/readyz')).status).toBe(200);
    const locks = caller(server);
    const holder = locks.open({ name: 'crowded' });
    await holder.acquired();
    expect(await locks.open({ name: 'crowded' }).queued()).toBe(1);
    expect(await locks.open({ name: 'crowded' }).outcome).toMatchObject({
      code: status.RESOURCE_EXHAUSTED,
      details: 'lock "crowded" has 2 requests ahead; this server allows 1',
    });
    // Debug lines: the flag's level, not the environment's (warn) or the file's (error).
    expect(await server.logged((line) => line['level'] === 20)).toBeDefined();
  });

  it('refuses an unknown key with exit code 2, naming the key and the file', async () => {
    const config = await file('unknown.yaml', 'port: 0\nprot: 50051\n');
    const { code, stderr } = await refused(['--config', config]);
    expect(code).toBe(2);
    expect(stderr).toContain(`${config}: unknown key "prot" (did you mean port?)`);
  });

  it('refuses bad values with exit code 2, naming each key, its value and the file', async () => {
    const config = await file(
      'bad.yaml',
      'port: 70000\nsession-timeout: soon\non-stop: linger\nlog-level: [debug]\n',
    );
    const { code, stderr } = await refused(['--config', config]);
    expect(code).toBe(2);
    for (const problem of [
      `${config}: log-level ["debug"]: expected one value (text, a number, true or false), not a list`,
      `${config}: port "70000": expected a port number from 0 to 65535`,
      `${config}: on-stop "linger": expected one of hand-over, release`,
      `${config}: session-timeout "soon": expected a duration of at least 1 ms, e.g. 10s or 500ms`,
    ]) {
      expect(stderr).toContain(problem);
    }
  });

  it('refuses a missing file with exit code 2, naming it and where it was named', async () => {
    const missing = join(dir, 'missing.yaml');
    const byFlag = await refused(['--config', missing]);
    expect(byFlag.code).toBe(2);
    expect(byFlag.stderr).toContain(
      `--config ${JSON.stringify(missing)}: cannot read the configuration file: no such file`,
    );
    const byEnv = await refused([], { LOCKSTREAM_CONFIG: missing });
    expect(byEnv.code).toBe(2);
    expect(byEnv.stderr).toContain(
      `LOCKSTREAM_CONFIG ${JSON.stringify(missing)}: cannot read the configuration file: no such file`,
    );
  });

  it('serves on the defaults from an empty file', async () => {
    const server = await serve(['--config', await file('empty.yaml', '')]);
    expect(server.logs.find((l) => String(l['msg']).startsWith('lockstream listening'))).toMatchObject({
      backend: 'memory',
      host: '127.0.0.1',
    });
    const holder = caller(server).open({ name: 'empty-config' });
    await holder.acquired();
    expect((await holder.release()).code).toBe(status.OK);
  });

  it('runs the example file of docs/configuration.md, with flags for this machine', async () => {
    const root = `/config-example-${randomUUID()}`;
    const server = await serve([
      '--config',
      EXAMPLE_FILE,
      ...['--host', '127.0.0.1', '--http-host', '127.0.0.1', '--http-port', '0'],
      ...['--zookeeper', connectString, '--root', root],
    ]);
    expect(server.logs).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ zookeeper: connectString, root }),
        expect.objectContaining({
          backend: 'zookeeper',
          msg: expect.stringMatching(/^lockstream listening/),
        }),
      ]),
    );
    const port = await httpPortOf(server);
    expect((await probe(port, '/readyz')).body).toEqual({ ready: true, reasons: [] });
    // The file's drain delay, which nothing overrides: not ready at once, for 5 s.
    void server.kill('SIGTERM');
    expect(await server.logged((line) => line['msg'] === 'shutting down')).toMatchObject({
      drainDelayMs: 5_000,
    });
    expect((await probe(port, '/readyz')).status).toBe(503);
  });
});
