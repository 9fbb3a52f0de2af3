import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LockClient } from '../../src/client/index.js';
import { checkedBlock, consoleCommands, repo } from '../support/doc-blocks.js';
import { CLI, startServerProcess, type ServerProcess } from '../support/server-process.js';
import { scaled } from '../support/timing.js';

/*
 * The example programs the README and docs/ show whole or in part, run as a reader runs them,
 * against a server on the embedded store; and the console sessions of docs/typescript.md and
 * docs/grpcurl.md that run the command-line examples, replayed command by command with the
 * output compared (fencing tokens are whatever the server gives).
 */

const run = promisify(execFile);

/** What a reader sees: stdout then stderr, fencing tokens made `T`. */
const normalized = (output: string): string[] =>
  output
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => line.replace(/token=\d+/g, 'token=T'));

describe('the examples of the README and docs/', () => {
  let server: ServerProcess;

  beforeAll(async () => {
    server = await startServerProcess([]);
  }, scaled(60_000));

  afterAll(async () => {
    await server?.kill('SIGTERM');
  });

  const example = async (file: string): Promise<string> => {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', join(repo, file)], {
      cwd: repo,
      env: { ...process.env, LOCKSTREAM_SERVER: server.address },
      timeout: scaled(60_000),
    });
    return stdout;
  };

  it('examples/typescript/quick-start.ts (README.md) holds billing/invoices and prints its token', async () => {
    expect(await example('examples/typescript/quick-start.ts')).toMatch(
      /^issuing invoices with fencing token \d+\n$/,
    );
  });

  it('examples/typescript/tour.ts (docs/typescript.md) runs every step, and leaves nothing held', async () => {
    const out = await example('examples/typescript/tour.ts');
    expect(out.split('\n').filter(Boolean)).toEqual([
      expect.stringMatching(/^charged inv-42 with token \d+$/),
      'built the daily report',
      '[] 0 waiting',
      expect.stringMatching(/^leader at 10\.0\.0\.7:9443 \(token \d+\)$/),
      expect.stringMatching(/^cache rebuilt with token \d+$/),
      'served from the cache',
      'gpu/memory: 6 of 8 in use',
      expect.stringMatching(/^trained with token \d+$/),
      expect.stringMatching(/^moved 100 with tokens \d+ and \d+$/),
      'done',
    ]);
  });

  /*
   * A console block's commands, one after the other, at the repository's root: each pointed at
   * the test's server (`--address`), each's output as shown.
   */
  it.each([
    ['docs/typescript.md', 'typescript-acquire'],
    ['docs/grpcurl.md', 'examples-acquire'],
    ['docs/grpcurl.md', 'examples-session'],
  ])(
    '%s, %s: the commands print what the page shows',
    async (file, name) => {
      if (!existsSync(join(repo, '.venv/bin/python')))
        throw new Error('.venv is missing: see docs/grpcurl.md');
      const commands = consoleCommands(checkedBlock(file, name));
      expect(commands.length).toBeGreaterThan(0);
      for (const { command, output } of commands) {
        const pointed = command.replace(/(--name \S+)/, `--address ${server.address} $1`);
        const { stdout, stderr } = await run('bash', ['-c', pointed], {
          cwd: repo,
          env: { ...process.env, GOFLAGS: '-mod=readonly -buildvcs=false' },
          timeout: scaled(120_000),
        });
        expect(normalized(stdout + stderr), command).toEqual(normalized(output.join('\n')));
      }
    },
    scaled(240_000),
  );

  /*
   * docs/operating.md's CLI sessions, with `lockstream` on PATH as an installed server puts it
   * there and LOCKSTREAM_SERVER pointing at the test's server. What differs from run to run
   * (tokens, times, instance ids, peers, and so the columns' widths) is compared by its shape.
   */
  describe('the CLI sessions of docs/operating.md', () => {
    let bin: string;
    beforeAll(async () => {
      bin = await mkdtemp(join(tmpdir(), 'lockstream-bin-'));
      await writeFile(
        join(bin, 'lockstream'),
        `#!/bin/sh\nexec "${process.execPath}" --import tsx "${CLI}" "$@"\n`,
      );
      await chmod(join(bin, 'lockstream'), 0o755);
    });
    afterAll(async () => {
      if (bin) await rm(bin, { recursive: true, force: true });
    });

    const shape = (output: string): string[] =>
      output
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map((line) =>
          line
            .replace(/\d{4}-\d\d-\d\dT[\d:.]+Z/g, 'TIME')
            .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, 'ID')
            .replace(/\b\d+\.\d+\.\d+\.\d+:\d+/g, 'PEER')
            .replace(/\b\d{4,}\b/g, 'N')
            .replace(/\s+/g, ' ')
            .trim(),
        );
    const shell = async (command: string): Promise<string> => {
      const { stdout, stderr } = await run('bash', ['-c', command], {
        cwd: repo,
        env: { ...process.env, PATH: `${bin}:${process.env['PATH']}`, LOCKSTREAM_SERVER: server.address },
        timeout: scaled(60_000),
      });
      return stdout + stderr;
    };

    it('cli-inspect: ls, describe, check and revoke of a lock with a holder and a waiter', async () => {
      const holderClient = new LockClient(server.address);
      const waiterClient = new LockClient(server.address);
      try {
        const holder = await holderClient.acquire('jobs/nightly', { mode: 'write', owner: 'invoicer' });
        const queued = new Promise<void>((resolve) => {
          void waiterClient
            .acquire('jobs/nightly', { mode: 'read', owner: 'reporter', onQueued: () => resolve() })
            .then((lock) => lock.release())
            .catch(() => undefined); // closed below, whether or not it was granted by then
        });
        await queued;
        const commands = consoleCommands(checkedBlock('docs/operating.md', 'cli-inspect'));
        expect(commands.map((c) => c.command.split(' ')[1])).toEqual(['ls', 'describe', 'check', 'revoke']);
        for (const { command, output } of commands) {
          const actual = await shell(command.replace(' 4711 ', ` ${holder.token} `));
          expect(shape(actual), command).toEqual(shape(output.join('\n')));
        }
        await holder.release();
      } finally {
        holderClient.close();
        waiterClient.close();
      }
    });

    it('cli-run: a semaphore share and a multi-lock held while a command runs', async () => {
      const commands = consoleCommands(checkedBlock('docs/operating.md', 'cli-run'));
      expect(commands).toHaveLength(3);
      for (const { command, output } of commands) {
        expect(normalized(await shell(command)), command).toEqual(normalized(output.join('\n')));
      }
    });
  });
});
