import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { appendFile, mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { LockClient, type Lock } from '../../src/client/index.js';
import { goBuild } from '../support/go-build.js';
import { deferred } from '../support/lock-caller.js';
import { InteractiveProcess } from '../support/interactive-process.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { scaled } from '../support/timing.js';

/**
 * The TypeScript SDK, the Go client (clients/go) and the Python client (clients/python) on the
 * same locks of one lockstream process on ZooKeeper. Each holder appends `enter OWNER TOKEN`
 * once granted and `exit OWNER TOKEN` before releasing to one history file: its order is the
 * order things happened in, whoever wrote them.
 */

const connectString = requireZooKeeper(inject('zookeeperConnectString'));
const repo = fileURLToPath(new URL('../../', import.meta.url));
const GO_HOLD = join(repo, '.tmp/bin/lockstream-hold-go');
const PYTHON = join(repo, '.venv/bin/python');
const PYTHON_HOLD = join(repo, 'clients/python/examples/hold.py');

type Language = 'go' | 'python';

/** A Go or Python holder process (clients/*\/examples/hold): see those files for its protocol. */
function holder(
  language: Language,
  address: string,
  name: string,
  options: { mode: 'read' | 'write'; owner: string; history?: string; resumeGrace?: string },
): InteractiveProcess {
  const args = ['--address', address, '--name', name, '--mode', options.mode, '--owner', options.owner];
  if (options.history) args.push('--history', options.history);
  if (options.resumeGrace) args.push('--resume-grace', options.resumeGrace);
  return language === 'go'
    ? new InteractiveProcess(GO_HOLD, args)
    : new InteractiveProcess(PYTHON, [PYTHON_HOLD, ...args]);
}

async function grantedToken(process: InteractiveProcess): Promise<bigint> {
  const [, token] = await process.waitFor(/^acquired token=(\d+)$/m);
  return BigInt(token!);
}

/** The lock's holders' tokens as `process` sees them through its own client. */
async function holdersSeenBy(process: InteractiveProcess): Promise<string> {
  const from = process.stdout.length;
  process.typeLine('describe');
  const [, tokens] = await process.waitFor(/^holders tokens=(\S*)$/m, from);
  return tokens!;
}

async function release(process: InteractiveProcess): Promise<void> {
  process.typeLine('release');
  await process.waitFor(/^released$/m);
  expect(await process.exited).toBe(0);
}

interface Entry {
  readonly event: 'enter' | 'exit';
  readonly owner: string;
  readonly token: bigint;
}

async function readHistory(file: string): Promise<Entry[]> {
  return (await readFile(file, 'utf8'))
    .trim()
    .split('\n')
    .map((line) => {
      const [event, owner, token] = line.split(' ');
      return { event: event as Entry['event'], owner: owner!, token: BigInt(token!) };
    });
}

/** Replays a history: a writer enters only when nobody holds, a reader only when no writer does. */
function checkExclusion(history: readonly Entry[], writers: ReadonlySet<string>): void {
  const holding = new Set<string>();
  for (const { event, owner } of history) {
    if (event === 'exit') {
      expect(holding.delete(owner), `${owner} exits without having entered`).toBe(true);
      continue;
    }
    const writerHolds = [...holding].some((other) => writers.has(other));
    if (writers.has(owner)) expect([...holding], `${owner} (a writer) entered beside`).toEqual([]);
    else expect(writerHolds, `${owner} (a reader) entered beside a writer`).toBe(false);
    holding.add(owner);
  }
  expect([...holding]).toEqual([]);
}

describe('TypeScript, Go and Python clients on one lock', () => {
  let server: ServerProcess;
  let client: LockClient;
  let historyDir: string;

  beforeAll(async () => {
    // Built from the source under test (go caches the build).
    await goBuild(GO_HOLD, './examples/hold', { cwd: join(repo, 'clients/go') });
    if (!existsSync(PYTHON)) throw new Error(`${PYTHON} is missing: run scripts/install-test-deps.sh`);
    // The installed wheel (scripts/test-clients.sh builds and installs it).
    await promisify(execFile)(PYTHON, ['-c', 'import lockstream']).catch((error: unknown) => {
      throw new Error(`the lockstream Python package is not installed in .venv: ${String(error)}`);
    });
    server = await startServerProcess(['--zookeeper', connectString, '--root', `/interop-${randomUUID()}`]);
    client = new LockClient(server.address);
    historyDir = join(repo, '.tmp/interop');
    await mkdir(historyDir, { recursive: true });
  }, scaled(180_000));

  afterAll(async () => {
    client?.close();
    await server?.kill('SIGTERM');
  });

  /** A TypeScript holder writing to the same history. */
  async function typescriptHolds(lock: Lock, owner: string, history: string): Promise<() => Promise<void>> {
    await appendFile(history, `enter ${owner} ${lock.token}\n`);
    return async () => {
      await appendFile(history, `exit ${owner} ${lock.token}\n`);
      await lock.release();
    };
  }

  it(
    'writers take turns in queue order (Python, TypeScript, Go), and every client sees the same tokens',
    async () => {
      const name = `interop/writers/${randomUUID()}`;
      const history = join(historyDir, `${randomUUID()}.history`);
      const python = holder('python', server.address, name, { mode: 'write', owner: 'python', history });
      const pythonToken = await grantedToken(python);

      const tsQueued = deferred<number>();
      const tsLock = client.acquire(name, { mode: 'write', owner: 'typescript', onQueued: tsQueued.resolve });
      expect(await tsQueued.promise).toBe(1);
      const go = holder('go', server.address, name, { mode: 'write', owner: 'go', history });
      await go.waitFor(/^queued ahead=2$/m);

      // The holder as Python, TypeScript and the server's description see it.
      expect(await holdersSeenBy(python)).toBe(pythonToken.toString());
      expect((await client.describe(name)).holders.map((h) => h.token)).toEqual([pythonToken]);

      await release(python);
      const ts = await tsLock;
      const tsRelease = await typescriptHolds(ts, 'typescript', history);
      expect(ts.token).toBeGreaterThan(pythonToken);
      expect((await client.describe(name)).holders.map((h) => h.token)).toEqual([ts.token]);
      await tsRelease();

      const goToken = await grantedToken(go);
      expect(goToken).toBeGreaterThan(ts.token);
      expect(await holdersSeenBy(go)).toBe(goToken.toString());
      expect((await client.describe(name)).holders.map((h) => h.token)).toEqual([goToken]);
      await release(go);

      const entries = await readHistory(history);
      expect(entries).toEqual([
        { event: 'enter', owner: 'python', token: pythonToken },
        { event: 'exit', owner: 'python', token: pythonToken },
        { event: 'enter', owner: 'typescript', token: ts.token },
        { event: 'exit', owner: 'typescript', token: ts.token },
        { event: 'enter', owner: 'go', token: goToken },
        { event: 'exit', owner: 'go', token: goToken },
      ]);
      checkExclusion(entries, new Set(['python', 'typescript', 'go']));
    },
    scaled(60_000),
  );

  it(
    'readers in Go and Python share the lock; a TypeScript writer waits for both, and a reader behind it waits for it',
    async () => {
      const name = `interop/read-write/${randomUUID()}`;
      const history = join(historyDir, `${randomUUID()}.history`);
      const goReader = holder('go', server.address, name, { mode: 'read', owner: 'go-reader', history });
      const goToken = await grantedToken(goReader);
      const pythonReader = holder('python', server.address, name, {
        mode: 'read',
        owner: 'python-reader',
        history,
      });
      const pythonToken = await grantedToken(pythonReader);
      // Both hold at once, and both clients say so.
      const both = [goToken, pythonToken].sort((a, b) => (a < b ? -1 : 1)).join(',');
      expect(await holdersSeenBy(goReader)).toBe(both);
      expect(await holdersSeenBy(pythonReader)).toBe(both);

      const writerQueued = deferred<number>();
      const writer = client.acquire(name, {
        mode: 'write',
        owner: 'ts-writer',
        onQueued: writerQueued.resolve,
      });
      expect(await writerQueued.promise).toBe(2);
      const lateReader = holder('go', server.address, name, {
        mode: 'read',
        owner: 'go-late-reader',
        history,
      });
      await lateReader.waitFor(/^queued ahead=3$/m);

      await release(goReader);
      // The writer still waits for the Python reader; the late reader waits behind the writer.
      expect((await client.describe(name)).holders.map((h) => h.token)).toEqual([pythonToken]);
      await release(pythonReader);
      const writerLock = await writer;
      const writerRelease = await typescriptHolds(writerLock, 'ts-writer', history);
      expect(lateReader.stdout).not.toMatch(/acquired/);
      await writerRelease();
      const lateToken = await grantedToken(lateReader);
      expect(lateToken).toBeGreaterThan(writerLock.token);
      await release(lateReader);

      const entries = await readHistory(history);
      expect(entries.filter((e) => e.event === 'enter').map((e) => e.owner)).toEqual([
        'go-reader',
        'python-reader',
        'ts-writer',
        'go-late-reader',
      ]);
      checkExclusion(entries, new Set(['ts-writer']));
    },
    scaled(60_000),
  );

  it(
    "a server killed under a Go holder fires the Go lock's Lost()",
    async () => {
      const doomed = await startServerProcess([]);
      const go = holder('go', doomed.address, 'interop/doomed', {
        mode: 'write',
        owner: 'go',
        resumeGrace: '1s',
      });
      await grantedToken(go);
      await doomed.kill('SIGKILL');
      await go.waitFor(/^lost .*lock "interop\/doomed" (was )?lost/m);
      expect(await go.exited).toBe(3);
    },
    scaled(60_000),
  );
});
