import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { LockClient, type ElectionEvent } from '../../src/client/index.js';
import { goBuild } from '../support/go-build.js';
import { InteractiveProcess } from '../support/interactive-process.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { scaled } from '../support/timing.js';

/**
 * The election example of each client (examples/typescript/election.ts, examples/go with
 * --election, examples/python/election.py): two copies of one on the same election at once, and
 * an observer through the SDK. docs/typescript.md and docs/go.md show their [docs:elections]
 * regions (test/integration/docs-code-blocks.test.ts keeps them the same).
 */

const repo = fileURLToPath(new URL('../../', import.meta.url));
const GO_EXAMPLE = join(repo, '.tmp/bin/lockstream-example-go');
const PYTHON = join(repo, '.venv/bin/python');

type Language = 'go' | 'python' | 'typescript';

function example(language: Language, args: string[]): InteractiveProcess {
  const commands = {
    go: [GO_EXAMPLE, '--election'],
    python: [PYTHON, join(repo, 'examples/python/election.py')],
    typescript: [process.execPath, '--import', 'tsx', join(repo, 'examples/typescript/election.ts')],
  } as const;
  const [command, ...prefix] = commands[language];
  return new InteractiveProcess(command, [...prefix, ...args], { cwd: repo });
}

describe('the election examples', () => {
  let server: ServerProcess;
  let client: LockClient;

  beforeAll(async () => {
    // Built from the source under test, as scripts/install-test-deps.sh does (go caches the build).
    await goBuild(GO_EXAMPLE, './', {
      cwd: join(repo, 'examples/go'),
      env: { ...process.env, GOFLAGS: '-mod=readonly -buildvcs=false' },
    });
    if (!existsSync(PYTHON)) throw new Error(`${PYTHON} is missing: run scripts/install-test-deps.sh`);
    await promisify(execFile)(PYTHON, ['-c', 'import lockstream']).catch((error: unknown) => {
      throw new Error(`the lockstream Python package is not installed in .venv: ${String(error)}`);
    });
    server = await startServerProcess([]);
    client = new LockClient(server.address);
  }, scaled(180_000));

  afterAll(async () => {
    client?.close();
    await server?.kill('SIGTERM');
  });

  it.each(['typescript', 'go', 'python'] as const)(
    'two copies of the %s example lead one after the other, with growing terms, as an observer sees',
    async (language) => {
      const name = `examples/election-${language}`;
      const observer = new AbortController();
      const events: ElectionEvent[] = [];
      const observing = (async () => {
        for await (const event of client.observe(name, { signal: observer.signal })) events.push(event);
      })();
      const candidates = ['a', 'b'].map((who) => ({
        who,
        process: example(language, [
          '--address',
          server.address,
          '--name',
          name,
          '--owner',
          `owner-${who}`,
          '--value',
          `value-${who}`,
          '--proclaim',
          `proclaimed-${who}`,
          '--lead-until-eof',
        ]),
      }));
      try {
        // Exactly one is elected first; the other waits behind it.
        const elected = /^elected term=(\d+)$/m;
        const firstIndex = await Promise.race(
          candidates.map(({ process }, index) => process.waitFor(elected).then(() => index)),
        );
        const first = candidates[firstIndex]!;
        const second = candidates[1 - firstIndex]!;
        const firstTerm = BigInt((await first.process.waitFor(elected))[1]!);
        await first.process.waitFor(/^proclaimed$/m);
        await first.process.waitFor(
          new RegExp(`^leader term=${firstTerm} value=proclaimed-${first.who}$`, 'm'),
        );
        await second.process.waitFor(/^queued ahead=1$/m);
        expect(second.process.stdout).not.toMatch(elected);

        // The first resigns; only then is the second elected, with a larger term.
        first.process.endInput();
        await first.process.waitFor(/^resigned$/m);
        expect(await first.process.exited).toBe(0);
        const secondTerm = BigInt((await second.process.waitFor(elected))[1]!);
        expect(secondTerm).toBeGreaterThan(firstTerm);
        await second.process.waitFor(
          new RegExp(`^leader term=${secondTerm} value=proclaimed-${second.who}$`, 'm'),
        );
        second.process.endInput();
        await second.process.waitFor(/^resigned$/m);
        expect(await second.process.exited).toBe(0);
        for (const { process } of candidates) {
          expect(process.stdout).toMatch(
            /^(queued ahead=\d+\n)*elected term=\d+\nproclaimed\nleader .*\nresigned\n$/,
          );
          expect(process.stderr).toBe('');
        }

        // The observer saw both terms, in order, each with its candidate's values.
        await vi.waitFor(() => expect(events.at(-1)).toEqual({ kind: 'vacant', afterTerm: secondTerm }), {
          timeout: scaled(10_000),
        });
        // A term's event may already carry its proclaimed value (the observer reads the term
        // from the history after the proclamation): then no `proclaimed` follows for it.
        const terms = events.flatMap((event) => (event.kind === 'term' ? [event] : []));
        expect(terms.map((term) => [term.term, term.owner])).toEqual([
          [firstTerm, `owner-${first.who}`],
          [secondTerm, `owner-${second.who}`],
        ]);
        for (const [term, who] of [
          [firstTerm, first.who],
          [secondTerm, second.who],
        ] as const) {
          const values = events.flatMap((event) =>
            (event.kind === 'term' || event.kind === 'proclaimed') && event.term === term
              ? [event.value.toString()]
              : [],
          );
          expect([[`value-${who}`, `proclaimed-${who}`], [`proclaimed-${who}`]]).toContainEqual(values);
        }
      } finally {
        for (const { process } of candidates) process.kill();
        observer.abort();
        await observing;
      }
    },
    scaled(60_000),
  );

  it.each(['typescript', 'go', 'python'] as const)(
    'the %s example prints `lost` when its term is ended from outside, and exits 1 with ABORTED',
    async (language) => {
      const name = `examples/election-lost-${language}`;
      const leader = example(language, ['--address', server.address, '--name', name, '--lead-until-eof']);
      try {
        const [, term] = await leader.waitFor(/^leader term=(\d+) value=10\.0\.0\.7:9443$/m);
        await client.resign(name, BigInt(term!));
        expect(await leader.exited).toBe(1);
        expect(leader.stdout).toMatch(/^lost$/m);
        expect(leader.stdout).not.toMatch(/resigned/);
        expect(leader.stderr).toMatch(/^error: ABORTED: /m);
      } finally {
        leader.kill();
      }
    },
    scaled(30_000),
  );
});
