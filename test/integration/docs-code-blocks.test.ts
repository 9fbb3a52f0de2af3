import { execFile, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { randomUUID } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import { parseFencingToken } from '../../src/fencing/index.js';
import { fencingTableSql } from '../../src/fencing/postgres.js';
import { sha256, AccessPolicy } from '../../src/server/security/access-policy.js';
import {
  checkedBlock,
  consoleCommands,
  docBlocks,
  docFiles,
  exampleText,
  repo,
} from '../support/doc-blocks.js';
import { CLI } from '../support/server-process.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { killOnExit } from '../setup/zookeeper-process.js';
import { scaled } from '../support/timing.js';

/*
 * Every fenced code block of README.md and docs/*.md is kept true by a test: it is the text of an
 * example under examples/ that a test runs, or a test reads it by its name and runs or checks it
 * (the marks are described in test/support/doc-blocks.ts). A block without a mark, or a mark
 * that does not hold, fails here. The blocks this file checks itself are at the end.
 */

const text = (file: string): string => readFileSync(join(repo, file), 'utf8');

describe('the code blocks of README.md and docs/', () => {
  const blocks = docFiles().flatMap(docBlocks);

  it('are found: README.md and every page have some', () => {
    expect(blocks.length).toBeGreaterThan(30);
  });

  it.each(blocks.map((block) => [`${block.file}:${block.line}`, block] as const))(
    '%s is marked, and its mark holds',
    (where, block) => {
      const { mark } = block;
      if (mark.kind === 'none') {
        throw new Error(
          `${where}: a code block without a mark (${mark.comment ?? 'no comment before it'}): ` +
            'include it from an example (<!-- example: examples/...; run by test/... -->) or name ' +
            'the test that checks it (<!-- checked by test/...: name -->)',
        );
      }
      expect(existsSync(join(repo, mark.runner)), `${where}: ${mark.runner} exists`).toBe(true);
      const runner = text(mark.runner);
      if (mark.kind === 'example') {
        expect(mark.path, `${where}: examples live under examples/`).toMatch(/^examples\//);
        expect(block.body, `${where} is ${mark.path}${mark.region ? `#${mark.region}` : ''} verbatim`).toBe(
          exampleText(mark.path, mark.region),
        );
        expect(
          runner.includes(mark.path) || runner.includes(dirname(mark.path)),
          `${where}: ${mark.runner} runs ${mark.path} (names it or its directory)`,
        ).toBe(true);
      } else {
        expect(runner, `${where}: ${mark.runner} reads ${block.file}`).toContain(block.file);
        if (mark.name !== undefined)
          expect(runner, `${where}: ${mark.runner} reads the block named ${mark.name}`).toContain(mark.name);
        const named = blocks.filter(
          (other) =>
            other.file === block.file &&
            other.mark.kind === 'checked' &&
            other.mark.runner === mark.runner &&
            other.mark.name === mark.name,
        );
        expect(
          named,
          `${where}: the name ${mark.name ?? '(none)'} is used once in ${block.file}`,
        ).toHaveLength(1);
      }
    },
  );
});

/** Starts `command` (a shell line) at the repository's root; resolves with its first log lines once one says it listens. */
async function serverStarted(command: string): Promise<{ logs: string; stop: () => Promise<void> }> {
  const child = spawn('bash', ['-c', `exec ${command}`], {
    cwd: repo,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LOCKSTREAM_LOG_FORMAT: 'json' },
    // Its own process group: npm, the shell it starts and the server stop together.
    detached: true,
  });
  const untrack = killOnExit(child);
  let logs = '';
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${command} did not listen: ${logs}`)), scaled(60_000));
    const read = (chunk: Buffer): void => {
      logs += chunk.toString();
      if (logs.includes('lockstream listening on ')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    void exited.then(() => reject(new Error(`${command} exited: ${logs}`)));
  });
  return {
    logs,
    stop: async () => {
      process.kill(-child.pid!, 'SIGTERM');
      await exited;
      untrack();
    },
  };
}

describe('the blocks this file checks (<!-- checked by test/integration/docs-code-blocks.test.ts: ... -->)', () => {
  it(
    "README.md's quick-start: `npm ci && npm start` starts a server on the embedded store, and says so first",
    async () => {
      expect(checkedBlock('README.md', 'quick-start')).toBe('npm ci && npm start');
      // npm ci has run (this suite runs from it); the server on a free port rather than 50051.
      const server = await serverStarted('npm start --silent -- --port 0');
      try {
        const [first] = server.logs.split('\n');
        expect(first).toContain(
          'using the embedded in-memory store: single process, locks do not survive a restart',
        );
        expect(server.logs).toMatch(/lockstream listening on 127\.0\.0\.1:\d+/);
      } finally {
        await server.stop();
      }
    },
    scaled(90_000),
  );

  it(
    "README.md's quick-start-zookeeper: the same command line on a ZooKeeper ensemble",
    async () => {
      const connectString = requireZooKeeper(inject('zookeeperConnectString'));
      const command = checkedBlock('README.md', 'quick-start-zookeeper');
      expect(command).toBe('npm start -- --zookeeper zk1:2181,zk2:2181,zk3:2181 --port 50051');
      const server = await serverStarted(
        `${command.replace('zk1:2181,zk2:2181,zk3:2181', connectString).replace('--port 50051', '--port 0')} --root /docs-${randomUUID()}`,
      );
      try {
        expect(server.logs).toMatch(/"backend":"zookeeper"[^\n]*lockstream listening on 127\.0\.0\.1:\d+/);
      } finally {
        await server.stop();
      }
    },
    scaled(90_000),
  );

  it("README.md's test-command is what CI runs (.ci/run)", () => {
    const command = checkedBlock('README.md', 'test-command');
    expect(command).toBe('bash scripts/test.sh');
    expect(text('.ci/run')).toMatch(new RegExp(`^exec ${command.replace('.', '\\.')}$`, 'm'));
    expect(existsSync(join(repo, 'scripts/test.sh'))).toBe(true);
  });

  it("docs/fencing.md's fencing-header example is a header value the parser reads as the lock and token shown", () => {
    const [format, example] = checkedBlock('docs/fencing.md', 'fencing-header').split('\n');
    expect(format).toBe(
      'lockstream-fencing-token: <lock name, percent-encoded as encodeURIComponent does>:<token in decimal>',
    );
    const value = example!.replace('lockstream-fencing-token: ', '');
    expect(parseFencingToken(value)).toEqual({ name: 'orders/42', token: 7205759403792793601n });
  });

  it("docs/fencing.md's fencing-table is fencingTableSql() (the comments aside)", () => {
    const shown = checkedBlock('docs/fencing.md', 'fencing-table')
      .split('\n')
      .map((line) => line.replace(/\s+--.*$/, ''))
      .join('\n');
    expect(shown).toBe(fencingTableSql());
  });

  it("docs/fencing.md's fencing-statement is the statement the adapter sends (the table named)", () => {
    const squeeze = (sql: string): string => sql.replace(/\s+/g, ' ').trim();
    const shown = squeeze(checkedBlock('docs/fencing.md', 'fencing-statement'));
    const source = squeeze(text('src/fencing/postgres-marks.ts')).replaceAll(
      '${table}',
      'lockstream_fencing',
    );
    expect(source).toContain(shown);
  });

  /*
   * docs/security.md's worked example: its openssl commands run as shown and make a CA and
   * certificates that verify, its token and policy agree and load, and every command of the
   * server and the clients uses flags the CLI has. (The whole sequence against a ZooKeeper with
   * a chroot and the name locks.internal is not run here.)
   */
  it("docs/security.md's security-setup: the certificates, the token and the policy", async () => {
    const exec = promisify(execFile);
    const commands = consoleCommands(checkedBlock('docs/security.md', 'security-setup'));
    const dir = await mkdtemp(join(tmpdir(), 'lockstream-security-'));
    try {
      for (const { command } of commands.filter((c) => /^(openssl|printf) /.test(c.command)))
        await exec('bash', ['-c', command], { cwd: dir });
      const verified = await exec(
        'openssl',
        ['verify', '-CAfile', 'ca.crt', 'server.crt', 'ops.crt', 'billing.crt'],
        {
          cwd: dir,
        },
      );
      expect(verified.stdout).toBe('server.crt: OK\nops.crt: OK\nbilling.crt: OK\n');

      const token = commands.find((c) => c.command.startsWith('lockstream token new'))!;
      const [tokenLine, hashLine] = token.output;
      const shown = /^token: (\S+)$/.exec(tokenLine!)![1]!;
      const hash = /^token_sha256: ([0-9a-f]{64})$/.exec(hashLine!)![1]!;
      expect(sha256(shown).toString('hex'), "the hash shown is the token's").toBe(hash);
      const made = (await exec(process.execPath, ['--import', 'tsx', CLI, 'token', 'new'], { cwd: repo }))
        .stdout;
      expect(made).toMatch(/^token: \S+\ntoken_sha256: [0-9a-f]{64}\n$/);

      const policy = commands.find((c) => c.command === 'cat access.yaml')!.output.join('\n');
      expect(policy).toContain(`token_sha256: ${hash}`);
      expect(() => AccessPolicy.parse(policy, 'docs/security.md')).not.toThrow();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("docs/security.md's security-setup and security-clients: every lockstream command's flags exist", async () => {
    const exec = promisify(execFile);
    const commands = [
      ...consoleCommands(checkedBlock('docs/security.md', 'security-setup')),
      ...consoleCommands(checkedBlock('docs/security.md', 'security-clients')),
    ]
      .map((c) => c.command.replace(/^(LOCKSTREAM_TOKEN=\S+ )/, ''))
      .filter((command) => command.startsWith('lockstream '));
    expect(commands.length).toBeGreaterThanOrEqual(4);
    for (const command of commands) {
      const subcommand = command.split(' ')[1]!;
      const help = (
        await exec(process.execPath, ['--import', 'tsx', CLI, subcommand, '--help'], { cwd: repo })
      ).stdout;
      for (const flag of command.match(/ --[a-z-]+/g) ?? [])
        expect(help, `${command}: ${flag}`).toContain(flag.trim());
    }
  });

  it("docs/performance.md's bench-commands: each is a script of package.json, with options bench/run.ts reads", () => {
    const scripts = (JSON.parse(text('package.json')) as { scripts: Record<string, string> }).scripts;
    const runner = text('bench/run.ts');
    const lines = checkedBlock('docs/performance.md', 'bench-commands').split('\n');
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) {
      const [, script, options] = /^npm run (\S+)(?: -- (.*))?$/.exec(line) ?? [];
      expect(scripts[script ?? ''], line).toBeDefined();
      for (const option of options?.match(/--[a-z-]+/g) ?? []) {
        const name = option.slice(2);
        expect(
          [`${name}:`, `'${name}':`].some((key) => runner.includes(key)),
          `${line}: ${option}`,
        ).toBe(true);
      }
    }
  });
});
