import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pino } from 'pino';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { LockClient } from '../../src/client/index.js';
import { loadConfig, serveOptions } from '../../src/server/config.js';
import { startServer, type RunningServer } from '../../src/server/main.js';
import { MemoryStore } from '../../src/server/stores/memory/memory-store.js';
import { deferred } from '../support/lock-caller.js';
import { isRunning } from '../support/is-alive.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { CLI, startServerProcess } from '../support/server-process.js';
import { TcpProxyProcess } from '../support/tcp-proxy-process.js';
import { createTestPki, type TestPki } from '../support/test-pki.js';
import { sha256 } from '../../src/server/security/access-policy.js';
import { EXIT } from '../../src/cli/client-basics.js';
import { scaled } from '../support/timing.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

/** `127.0.0.1:port` where nothing listens: connections to it are refused. */
async function refusingAddress(): Promise<string> {
  const free = createServer();
  await new Promise<void>((resolve) => free.listen(0, '127.0.0.1', resolve));
  const { port } = free.address() as AddressInfo;
  await new Promise((resolve) => free.close(resolve));
  return `127.0.0.1:${port}`;
}

/** One `lockstream` command as its own process, with what it printed so far. */
interface CliRun {
  readonly child: ChildProcess;
  readonly exited: Promise<number>;
  stdout: string;
  stderr: string;
  /** Resolves once stdout (or stderr) has a line matching `pattern`, with its match. */
  line(pattern: RegExp, stream?: 'stdout' | 'stderr'): Promise<RegExpMatchArray>;
}

function lockstream(args: string[], env: Record<string, string> = {}): CliRun {
  const child = spawn(process.execPath, ['--import', 'tsx', CLI, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const waiters: Array<() => void> = [];
  const run: CliRun = {
    child,
    // 'close', not 'exit': only then has everything it printed been read.
    exited: once(child, 'close').then(
      ([code, signal]) => (code as number | null) ?? 128 + (signal === 'SIGKILL' ? 9 : 15),
    ),
    stdout: '',
    stderr: '',
    line: async (pattern, stream = 'stdout') => {
      for (;;) {
        const match = pattern.exec(run[stream]);
        if (match) return match;
        if (child.exitCode !== null)
          throw new Error(`exited before printing ${pattern}: ${run.stdout}${run.stderr}`);
        await new Promise<void>((resolve) => waiters.push(resolve));
      }
    },
  };
  const wake = (): void => {
    for (const resolve of waiters.splice(0)) resolve();
  };
  child.stdout.on('data', (chunk: Buffer) => {
    run.stdout += chunk.toString();
    wake();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    run.stderr += chunk.toString();
    wake();
  });
  child.once('close', wake);
  return run;
}

describe('the lockstream command as a client', () => {
  let server: RunningServer;
  let client: LockClient;
  let env: Record<string, string>;

  beforeAll(async () => {
    server = await startServer(loadConfig({}, ['--port', '0']), pino({ level: 'silent' }));
    client = new LockClient(`127.0.0.1:${server.port}`);
    env = { LOCKSTREAM_SERVER: `127.0.0.1:${server.port}` };
  });

  afterAll(async () => {
    client.close();
    await server.stop();
  });

  it('ls, describe, check and revoke print tables for people and JSON for scripts', async () => {
    const asked = deferred<string>();
    const lock = await client.acquire('cli/report', {
      owner: 'reporter',
      onRevokeRequested: (r) => asked.resolve(r.reason),
    });
    const ls = lockstream(['ls', 'cli/'], env);
    expect(await ls.exited).toBe(0);
    expect(ls.stdout).toBe('NAME        HOLDERS  WAITERS  MODE\ncli/report  1        0        mutex\n');
    const lsJson = lockstream(['ls', '--json'], env);
    expect(await lsJson.exited).toBe(0);
    expect(JSON.parse(lsJson.stdout)).toEqual({
      name: 'cli/report',
      holders: 1,
      waiters: 0,
      heldMode: 'mutex',
      limit: 0,
      usedWeight: 0,
    });

    const described = lockstream(['describe', 'cli/report', '--server', `127.0.0.1:${server.port}`]);
    expect(await described.exited).toBe(0);
    expect(described.stdout).toMatch(/^lock "cli\/report": 1 holding, 0 waiting\n/);
    expect(described.stdout).toMatch(
      new RegExp(`holds\\s+mutex\\s+reporter\\s+${lock.token}\\s+-\\s+\\d{4}-`),
    );
    const describedJson = lockstream(['describe', 'cli/report', '--json'], env);
    expect(await describedJson.exited).toBe(0);
    expect(JSON.parse(describedJson.stdout)).toMatchObject({
      name: 'cli/report',
      holders: [{ mode: 'mutex', owner: 'reporter', token: lock.token.toString() }],
      waiters: [],
    });

    const held = lockstream(['check', 'cli/report', lock.token.toString()], env);
    expect([await held.exited, held.stdout]).toEqual([0, 'held\n']);
    const notHeld = lockstream(['check', 'cli/report', String(lock.token + 1n), '--json'], env);
    expect(await notHeld.exited).toBe(1);
    expect(JSON.parse(notHeld.stdout)).toEqual({
      name: 'cli/report',
      token: String(lock.token + 1n),
      held: false,
    });

    const revoke = lockstream(['revoke', 'cli/report', '--reason', 'maintenance'], env);
    expect([await revoke.exited, revoke.stdout]).toEqual([
      0,
      'asked 1 holder of "cli/report" to release it\n',
    ]);
    expect(await asked.promise).toBe('maintenance');
    await lock.release();

    const bad = lockstream(['describe', ''], env);
    expect(await bad.exited).toBe(69);
    expect(bad.stderr).toMatch(/^error: INVALID_ARGUMENT: .*name is empty/);
  });

  it('leader publishes --value while its command runs; watch prints the leader and its value as they change', async () => {
    const watch = lockstream(['watch', 'cli/group'], env);
    await watch.line(/"cli\/group": no holder \(0 waiting\)\n/);
    // The first leader runs until told to stop (a line on its stdin would do; a file is simpler).
    const first = lockstream(
      [
        'leader',
        'cli/group',
        '--value',
        '10.0.0.1:8080',
        '--owner',
        'node-1',
        '--',
        'sh',
        '-c',
        'echo leading; sleep 30',
      ],
      env,
    );
    await first.line(/^leading$/m);
    const [, firstToken] = await watch.line(/held by node-1 \(token (\d+), value "10\.0\.0\.1:8080"\)\n/);
    // describe shows the value too, as text and (for scripts) as base64 and text.
    const described = lockstream(['describe', 'cli/group'], env);
    expect(await described.exited).toBe(0);
    // `leader` is `elect`: its group is an election, whose leader holds as a candidate.
    expect(described.stdout).toMatch(/holds\s+candidate\s+node-1\s+\d+\s+10\.0\.0\.1:8080\s+\d{4}-/);
    const describedJson = lockstream(['describe', 'cli/group', '--json'], env);
    expect(await describedJson.exited).toBe(0);
    expect(JSON.parse(describedJson.stdout)).toMatchObject({
      holders: [
        {
          owner: 'node-1',
          value: Buffer.from('10.0.0.1:8080').toString('base64'),
          valueText: '10.0.0.1:8080',
        },
      ],
    });

    const second = lockstream(
      [
        'leader',
        'cli/group',
        '--value',
        '10.0.0.2:8080',
        '--owner',
        'node-2',
        '--',
        'sh',
        '-c',
        'echo leading; sleep 30',
      ],
      env,
    );
    for await (const state of client.watch('cli/group')) if (state.waiters.length === 1) break;
    // The first leader steps down (its command ends): the second is elected and says where it is.
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(143);
    const [, secondToken] = await watch.line(/held by node-2 \(token (\d+), value "10\.0\.0\.2:8080"\)\n/);
    expect(BigInt(secondToken!)).toBeGreaterThan(BigInt(firstToken!));
    await second.line(/^leading$/m);
    second.child.kill('SIGTERM');
    await second.exited;
    await watch.line(/held by node-2[^\n]*\n[^\n]*no holder/);
    watch.child.kill('SIGINT');
    expect(await watch.exited).toBe(0);
    // Each change is one line: no line repeats the one before it.
    const lines = watch.stdout
      .trim()
      .split('\n')
      .map((line) => line.replace(/^\S+\s+/, ''));
    expect(lines.filter((line, i) => line === lines[i - 1])).toEqual([]);

    const noValue = lockstream(['leader', 'cli/group', '--', 'true'], env);
    expect(await noValue.exited).not.toBe(0);
    expect(noValue.stderr).toMatch(/--value/);
  });

  it('elect runs the command while leading, with the term in LOCKSTREAM_TERM; observe prints each term and the vacancies', async () => {
    const name = `cli/election-${randomUUID()}`;
    const observe = lockstream(['observe', name], env);
    await observe.line(/: nobody leads\n/);
    const leader = lockstream(
      [
        'elect',
        name,
        '--value',
        '10.0.0.9:7000',
        '--owner',
        'node-9',
        '--',
        'sh',
        '-c',
        'echo "term=$LOCKSTREAM_TERM"; sleep 30',
      ],
      env,
    );
    const [, term] = await leader.line(/^term=(\d+)$/m);
    await observe.line(new RegExp(`: term ${term} led by node-9, value "10\\.0\\.0\\.9:7000"\\n`));
    expect((await client.leader(name))?.term).toBe(BigInt(term!));
    leader.child.kill('SIGTERM');
    expect(await leader.exited).toBe(143);
    await observe.line(new RegExp(`: nobody leads \\(term ${term} is over\\)\\n`));
    observe.child.kill('SIGINT');
    expect(await observe.exited).toBe(0);

    const replay = lockstream(['observe', name, '--from-term', term!, '--json'], env);
    const [line] = await replay.line(/^\{.*"kind":"term".*\}$/m);
    expect(JSON.parse(line)).toMatchObject({
      kind: 'term',
      term,
      owner: 'node-9',
      valueText: '10.0.0.9:7000',
    });
    replay.child.kill('SIGINT');
    await replay.exited;
  });

  it('run holds the lock while the command runs, passes name and token, and exits with its code', async () => {
    const run = lockstream(
      [
        'run',
        'cli/job',
        '--owner',
        'nightly',
        '--',
        'sh',
        '-c',
        'echo "token=$LOCKSTREAM_FENCING_TOKEN name=$LOCKSTREAM_LOCK_NAME"; read _ < /dev/null; exit 7',
      ],
      env,
    );
    expect(await run.exited).toBe(7);
    const [, token] = /token=(\d+) name=cli\/job/.exec(run.stdout) ?? [];
    expect(token).toBeDefined();
    // Released when the command exited: free again.
    const after = await client.tryAcquire('cli/job');
    expect(after?.token).toBeGreaterThan(BigInt(token!));
    await after?.release();
  });

  it('run downgrades a write lock to read when the command signals SIGUSR1 to $LOCKSTREAM_RUN_PID', async () => {
    const run = lockstream(
      [
        'run',
        'cli/cache',
        '--mode',
        'write',
        '--',
        'sh',
        '-c',
        'echo "token=$LOCKSTREAM_FENCING_TOKEN"; kill -USR1 "$LOCKSTREAM_RUN_PID"; sleep 30',
      ],
      env,
    );
    const [, token] = await run.line(/token=(\d+)/);
    // The reader queued behind the writer is granted once the command asked to downgrade,
    // while the command still runs; the run's hold is a read hold with the same token.
    const reader = await client.acquire('cli/cache', { mode: 'read' });
    const described = await client.describe('cli/cache');
    expect(described.holders.map((h) => [h.mode, h.token.toString()])).toEqual([
      ['read', token],
      ['read', reader.token.toString()],
    ]);
    expect(run.child.exitCode).toBeNull();
    await reader.release();
    run.child.kill('SIGTERM');
    expect(await run.exited).toBe(143);
    expect(run.stderr).toContain('lock "cli/cache" downgraded to read');
  });

  it(
    'run --limit N holds one of N slots: two runs hold at once, a third waits for one of them to end',
    async () => {
      const hold = ['sh', '-c', 'echo "token=$LOCKSTREAM_FENCING_TOKEN"; exec sleep 30'];
      const runs = [1, 2].map(() => lockstream(['run', 'cli/slots', '--limit', '2', '--', ...hold], env));
      const tokens = await Promise.all(runs.map(async (run) => (await run.line(/token=(\d+)/))[1]));
      const watch = client.watch('cli/slots');
      const third = lockstream(['run', 'cli/slots', '--limit', '2', '--', ...hold], env);
      for await (const state of watch) {
        if (state.waiters.length === 1) {
          expect([state.limit, state.usedWeight, state.holders.length]).toEqual([2, 2, 2]);
          break;
        }
      }
      expect(third.stdout).toBe('');
      // Operators see the capacity in use.
      // Three commands at once: each is a Node.js process to start.
      const [ls, described, json] = [
        ['ls', 'cli/slots'],
        ['describe', 'cli/slots'],
        ['describe', 'cli/slots', '--json'],
      ].map((args) => lockstream(args, env)) as [CliRun, CliRun, CliRun];
      expect(await ls.exited).toBe(0);
      expect(ls.stdout).toBe(
        'NAME       HOLDERS  WAITERS  MODE\ncli/slots  2        1        semaphore 2/2\n',
      );
      expect(await described.exited).toBe(0);
      expect(described.stdout).toMatch(
        /^lock "cli\/slots": a semaphore of limit 2, 2 in use; 2 holding, 1 waiting\n/,
      );
      expect(described.stdout.match(/^(holds|#1)\s+semaphore×1\s/gm)).toEqual([
        'holds  semaphore×1 ',
        'holds  semaphore×1 ',
        '#1     semaphore×1 ',
      ]);
      expect(await json.exited).toBe(0);
      expect(JSON.parse(json.stdout)).toMatchObject({
        limit: 2,
        usedWeight: 2,
        waiters: [{ mode: 'semaphore', weight: 1 }],
      });
      runs[0]!.child.kill('SIGTERM');
      const [, token] = await third.line(/token=(\d+)/);
      expect(BigInt(token!)).toBeGreaterThan(BigInt(tokens[1]!));
      for (const run of [runs[1]!, third]) run.child.kill('SIGTERM');
      expect(await Promise.all([...runs, third].map((run) => run.exited))).toEqual([143, 143, 143]);
      // Six lockstream processes in turn: a loaded machine needs more than the default 30 s.
    },
    scaled(90_000),
  );

  it('run --and takes several locks as one multi-lock and passes every token in $LOCKSTREAM_FENCING_TOKENS', async () => {
    const run = lockstream(
      [
        'run',
        'cli/accounts/1',
        '--and',
        'cli/accounts/2',
        '--and',
        'cli/ledger',
        '--mode',
        'write',
        '--',
        'sh',
        '-c',
        'echo "tokens=$LOCKSTREAM_FENCING_TOKENS"; sleep 30',
      ],
      env,
    );
    const [, json] = await run.line(/tokens=(.*)\n/);
    const tokens = JSON.parse(json!) as Record<string, string>;
    expect(Object.keys(tokens)).toEqual(['cli/accounts/1', 'cli/accounts/2', 'cli/ledger']);
    for (const [name, token] of Object.entries(tokens)) {
      expect((await client.describe(name)).holders.map((h) => [h.mode, h.token.toString()])).toEqual([
        ['write', token],
      ]);
    }
    run.child.kill('SIGTERM');
    expect(await run.exited).toBe(143);
    for (const name of Object.keys(tokens)) expect((await client.describe(name)).holders).toEqual([]);
  });

  it.each([
    [['--weight', '2'], /--weight needs --limit/],
    [['--mode', 'semaphore'], /--mode semaphore needs --limit N/],
    [['--limit', '3', '--mode', 'read'], /--limit makes a semaphore: it cannot be taken in read mode/],
    [['--limit', '0'], /--limit "0": expected a whole number of 1 or more/],
    [['--limit', '2', '--weight', '3'], /weight 3 is more than the limit 2/],
  ])('run %j says what is wrong with its mode options and runs nothing', async (flags, message) => {
    const run = lockstream(['run', 'cli/bad-slots', ...flags, '--', 'sh', '-c', 'echo ran'], env);
    expect(await run.exited).not.toBe(0);
    expect(run.stderr).toMatch(message);
    expect(run.stdout).toBe('');
  });

  it('run forwards signals to the command and exits with what the command does about them', async () => {
    const run = lockstream(
      [
        'run',
        'cli/signals',
        '--',
        'sh',
        '-c',
        'trap "echo got TERM; exit 3" TERM; echo ready; while true; do sleep 0.05; done',
      ],
      env,
    );
    await run.line(/ready/);
    expect((await client.describe('cli/signals')).holders).toHaveLength(1);
    run.child.kill('SIGTERM');
    expect(await run.exited).toBe(3);
    expect(run.stdout).toMatch(/got TERM/);
    expect((await client.describe('cli/signals')).holders).toEqual([]);
  });

  it('run stops the whole command, grandchildren included, when the lock is revoked or lost, and exits 74', async () => {
    const revoked = lockstream(
      ['run', 'cli/revoked', '--', 'sh', '-c', 'sleep 300 & echo "grandchild=$!"; wait'],
      env,
    );
    const [, grandchild] = await revoked.line(/grandchild=(\d+)/);
    expect(await client.revoke('cli/revoked', { reason: 'deploy' })).toBe(1);
    expect(await revoked.exited).toBe(74);
    expect(revoked.stderr).toMatch(/lock "cli\/revoked" was revoked: deploy; stopping the command/);
    expect(isRunning(Number(grandchild))).toBe(false);

    const lost = lockstream(['run', 'cli/lost', '--', 'sh', '-c', 'echo started; sleep 300'], env);
    await lost.line(/started/);
    if (!(server.store instanceof MemoryStore)) throw new Error('INVARIANT: embedded store');
    server.store.expireSession();
    expect(await lost.exited).toBe(74);
    expect(lost.stderr).toMatch(/"cli\/lost" was lost/);
  });

  it('run keeps the lock through a broken connection for --resume-grace only: 0 stops the command at once', async () => {
    // A server of its own, in its own process, to kill.
    const doomed = await startServerProcess([]);
    const doomedEnv = { LOCKSTREAM_SERVER: doomed.address };
    const script = ['--', 'sh', '-c', 'echo started; sleep 300'];
    const noGrace = lockstream(['run', 'cli/blip-0', '--resume-grace', '0', ...script], doomedEnv);
    const shortGrace = lockstream(['run', 'cli/blip-300', '--resume-grace', '300ms', ...script], doomedEnv);
    await Promise.all([noGrace.line(/started/), shortGrace.line(/started/)]);
    await doomed.kill('SIGKILL');
    expect(await noGrace.exited).toBe(74);
    expect(await shortGrace.exited).toBe(74);
    expect(noGrace.stderr).toMatch(
      /"cli\/blip-0": the stream holding it ended \(Connection dropped\); the lock must be assumed lost; stopping the command/,
    );
    expect(noGrace.stderr).not.toMatch(/resumed within/);
    expect(shortGrace.stderr).toMatch(
      /could not be resumed within its 300 ms grace \(counted from the last message from the server\)\); the lock must be assumed lost/,
    );
  });

  it('run keeps its command running across a failover: with two --server endpoints and the first killed, the lock is confirmed through the second with the same token', async () => {
    // One instance behind two proxies: two endpoints that reach the same session.
    const instance = await startServerProcess([]);
    const first = await TcpProxyProcess.start(instance.address);
    const second = await TcpProxyProcess.start(instance.address);
    const direct = new LockClient(instance.address);
    try {
      const servers = `${first.address},${second.address}`;
      const run = lockstream([
        'run',
        'cli/failover',
        '--server',
        servers,
        '--',
        'sh',
        '-c',
        // Ends cleanly, with its sleep, on SIGTERM to the shell alone.
        `trap 'kill $!; exit 0' TERM; echo "pid=$$ token=$LOCKSTREAM_FENCING_TOKEN server=$LOCKSTREAM_SERVER"; sleep 300 & wait`,
      ]);
      const [, pid, token, server] = await run.line(/pid=(\d+) token=(\d+) server=(\S+)/);
      expect(server).toBe(servers);
      await first.close();
      await run.line(/session resumed; lock "cli\/failover" confirmed/, 'stderr');
      expect(run.child.exitCode).toBeNull();
      expect((await direct.describe('cli/failover')).holders.map((h) => h.token.toString())).toEqual([token]);
      process.kill(Number(pid), 'SIGTERM');
      expect(await run.exited).toBe(0);
      expect(run.stderr).toMatch(/lock "cli\/failover" is in doubt while the session is resumed/);
      expect(run.stderr).not.toMatch(/lost|stopping the command/);
      expect((await direct.describe('cli/failover')).holders).toEqual([]);
    } finally {
      direct.close();
      await Promise.all([first.close(), second.close()]);
      await instance.kill('SIGTERM');
    }
  });

  it('--server takes comma-separated endpoints: a refusing first one is passed over, and a bad list is a usage error', async () => {
    const refusing = await refusingAddress();
    const holder = await client.acquire('cli/endpoints');
    try {
      const ls = lockstream(['ls', 'cli/endpoints', '--server', `${refusing},127.0.0.1:${server.port}`]);
      expect(await ls.exited).toBe(0);
      expect(ls.stdout).toMatch(/^cli\/endpoints\s+1\s+0\s+mutex$/m);
    } finally {
      await holder.release();
    }
    const duplicate = lockstream(['ls', '--server', `${refusing}, ${refusing}`]);
    expect(await duplicate.exited).toBe(EXIT.usage);
    expect(duplicate.stderr).toBe(
      `error: --server "${refusing}, ${refusing}": addresses[1] "${refusing}" is the same endpoint as addresses[0]\n`,
    );
    const empty = lockstream(['run', 'cli/endpoints', '--server', `${refusing},`, '--', 'true']);
    expect(await empty.exited).toBe(EXIT.usage);
    expect(empty.stderr).toMatch(/^lockstream run: --server "[^"]+": addresses\[1\] "" is not "host:port"/);
  });

  it('run escalates to SIGKILL after --kill-after when the command ignores SIGTERM', async () => {
    // `trap "" TERM` makes sh and everything it starts ignore SIGTERM.
    const run = lockstream(
      [
        'run',
        'cli/stubborn',
        '--kill-after',
        '300ms',
        '--',
        'sh',
        '-c',
        'trap "" TERM; sleep 300 & echo "grandchild=$!"; wait',
      ],
      env,
    );
    const [, grandchild] = await run.line(/grandchild=(\d+)/);
    const revokedAt = performance.now();
    await client.revoke('cli/stubborn', { reason: 'now' });
    expect(await run.exited).toBe(74);
    expect(performance.now() - revokedAt).toBeGreaterThanOrEqual(300);
    expect(isRunning(Number(grandchild))).toBe(false);
    expect((await client.describe('cli/stubborn')).holders).toEqual([]);
  });

  it('run shows on a terminal that it is waiting and how many are ahead', async () => {
    const holder = await client.acquire('cli/tty');
    // script(1) gives the command a terminal; its output is what that terminal shows.
    const command = `${process.execPath} --import tsx ${CLI} run cli/tty -- sh -c 'echo ran'`;
    const run = spawn('script', ['-qfec', command, '/dev/null'], { env: { ...process.env, ...env } });
    let screen = '';
    const waiting = deferred();
    run.stdout.on('data', (chunk: Buffer) => {
      screen += chunk.toString();
      if (/waiting for lock "cli\/tty": 1 ahead/.test(screen)) waiting.resolve();
    });
    await waiting.promise;
    await holder.release();
    const [code] = (await once(run, 'close')) as [number];
    expect(code).toBe(0);
    expect(screen).toMatch(/ran/);
  });

  it('run gives up with exit 75 when the lock is not acquired within --wait, without running the command', async () => {
    const holder = await client.acquire('cli/busy');
    const run = lockstream(['run', 'cli/busy', '--wait', '200ms', '--', 'sh', '-c', 'echo ran'], env);
    expect(await run.exited).toBe(75);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/DEADLINE_EXCEEDED: lock "cli\/busy" was not acquired within/);
    await holder.release();
  });
});

describe('the lockstream command across two instances on one ZooKeeper', () => {
  const servers: RunningServer[] = [];
  beforeAll(async () => {
    const root = `/cli-${randomUUID()}`;
    for (let i = 0; i < 2; i += 1) {
      const args = ['--port', '0', '--zookeeper', connectString, '--root', root];
      servers.push(await startServer(loadConfig({}, args), pino({ level: 'silent' })));
    }
  });
  afterAll(async () => {
    for (const server of servers) await server.stop();
  });

  it('a run through one instance is listed, described and revoked through the other', async () => {
    const [a, b] = servers.map((server) => `127.0.0.1:${server.port}`);
    const run = lockstream([
      'run',
      'shared/job',
      '--server',
      a!,
      '--owner',
      'batch',
      '--',
      'sh',
      '-c',
      'echo started; sleep 300',
    ]);
    await run.line(/started/);
    const described = lockstream(['describe', 'shared/job', '--json', '--server', b!]);
    expect(await described.exited).toBe(0);
    expect(JSON.parse(described.stdout)).toMatchObject({
      holders: [{ owner: 'batch', mode: 'mutex' }],
      waiters: [],
    });
    const listed = lockstream(['ls', 'shared/', '--server', b!]);
    expect(await listed.exited).toBe(0);
    expect(listed.stdout).toMatch(/^shared\/job\s+1\s+0\s+mutex$/m);
    const revoke = lockstream(['revoke', 'shared/job', '--reason', 'failover', '--server', b!]);
    expect(await revoke.exited).toBe(0);
    expect(await run.exited).toBe(74);
    expect(run.stderr).toMatch(/revoked: failover/);
    const after = lockstream(['ls', 'shared/', '--server', b!]);
    expect(await after.exited).toBe(0);
    expect(after.stdout).toBe('NAME  HOLDERS  WAITERS  MODE\n');
  });
});

describe('lockstream --help', () => {
  it('lists every command, and serve --help every flag with its environment variable', async () => {
    const top = lockstream(['--help']);
    expect(await top.exited).toBe(0);
    for (const command of [
      'serve',
      'ls',
      'describe',
      'watch',
      'observe',
      'check',
      'revoke',
      'run',
      'elect',
    ]) {
      expect(top.stdout).toMatch(new RegExp(`^  ${command}\\b`, 'm'));
    }
    // `leader` is another name of `elect`.
    expect(top.stdout).toMatch(/^ {2}elect\|leader\b/m);
    const serve = lockstream(['serve', '--help']);
    expect(await serve.exited).toBe(0);
    const flat = serve.stdout.replace(/\s+/g, ' ');
    for (const option of serveOptions({})) {
      expect(flat).toContain(option.long!);
      expect(flat).toContain(/\(env: (\w+)\)/.exec(option.description)![1]);
    }
    // Durations are shown as they are written, never as milliseconds.
    expect(flat).toContain('(default: "10s")');
    for (const command of ['run', 'elect', 'leader']) {
      const help = lockstream([command, '--help']);
      expect(await help.exited).toBe(0);
      const text = help.stdout.replace(/\s+/g, ' ');
      expect(text).toContain('after this long (default: 10s)');
      expect(text).toMatch(/end at once \(default: 5s\)/);
      expect(text).not.toMatch(/default: \d{4,}/);
    }
  });
});

describe('the lockstream command against a server with TLS and an access policy', () => {
  let pki: TestPki;
  let server: RunningServer;
  let tokenFile: string;
  const token = 'cli-test-token-5b1e';

  beforeAll(async () => {
    pki = await createTestPki();
    tokenFile = join(pki.dir, 'token');
    await writeFile(tokenFile, `${token}\n`);
    const policyFile = join(pki.dir, 'access.yaml');
    await writeFile(
      policyFile,
      [
        'callers:',
        '  - name: deployer',
        `    token_sha256: ${sha256(token).toString('hex')}`,
        '    locks: [{ prefix: deploy/, modes: [mutex] }]',
        '  - name: batch',
        '    certificate: batch-runner',
        '    locks: [{ prefix: batch/, modes: [mutex] }]',
      ].join('\n'),
    );
    server = await startServer(
      loadConfig({}, [
        '--port',
        '0',
        '--tls-cert',
        pki.server.certFile,
        '--tls-key',
        pki.server.keyFile,
        '--tls-client-ca',
        pki.ca.certFile,
        '--auth-file',
        policyFile,
      ]),
      pino({ level: 'silent' }),
    );
  }, scaled(60_000));

  afterAll(async () => {
    await server?.stop();
    await pki?.remove();
  });

  it('takes the CA, client certificate and token from flags or the environment, and says what is wrong', async () => {
    const address = `127.0.0.1:${server.port}`;
    const tlsFlags = ['--server', address, '--ca', pki.ca.certFile, '--cert', pki.cnClient.certFile];
    const withKey = [...tlsFlags, '--key', pki.cnClient.keyFile];

    const asBatch = lockstream([
      'run',
      'batch/nightly',
      ...withKey,
      '--',
      'sh',
      '-c',
      'echo "token=$LOCKSTREAM_FENCING_TOKEN"',
    ]);
    expect(await asBatch.exited).toBe(0);
    expect(asBatch.stdout).toMatch(/^token=\d+$/m);

    // The token names the caller; the environment works as the flags do.
    const env = {
      LOCKSTREAM_SERVER: address,
      LOCKSTREAM_CA: pki.ca.certFile,
      LOCKSTREAM_CERT: pki.cnClient.certFile,
      LOCKSTREAM_KEY: pki.cnClient.keyFile,
    };
    const asDeployer = lockstream(['describe', 'deploy/web', '--token-file', tokenFile], env);
    expect(await asDeployer.exited).toBe(0);
    expect(asDeployer.stdout).toBe('lock "deploy/web": 0 holding, 0 waiting\n');
    const fromVariable = lockstream(['describe', 'deploy/web'], { ...env, LOCKSTREAM_TOKEN: token });
    expect(await fromVariable.exited).toBe(0);

    const outsideGrant = lockstream(['describe', 'batch/nightly', '--token-file', tokenFile], env);
    expect(await outsideGrant.exited).toBe(EXIT.failed);
    expect(outsideGrant.stderr).toMatch(
      /^error: PERMISSION_DENIED: caller "deployer" may not see lock "batch\/nightly"/,
    );

    const noKey = lockstream(['ls', ...tlsFlags]);
    expect(await noKey.exited).toBe(EXIT.usage);
    expect(noKey.stderr).toBe('error: --cert and --key: give both, or neither\n');
    const missingCa = lockstream(['ls', '--ca', join(pki.dir, 'nope.crt')], env);
    expect(await missingCa.exited).toBe(EXIT.usage);
    expect(missingCa.stderr).toMatch(/^error: --ca ".*nope\.crt": cannot read it \(ENOENT\)/);
    const plaintext = lockstream(['ls', '--server', address]);
    expect(await plaintext.exited).toBe(EXIT.failed);
    expect(plaintext.stderr).toMatch(/^error: UNAVAILABLE: No connection established/);
  });
});

describe('lockstream token', () => {
  it('makes a random token with the policy line for it, and hashes a token read from stdin', async () => {
    const made = lockstream(['token', 'new']);
    expect(await made.exited).toBe(0);
    const [, token, digest] =
      /^token: ([A-Za-z0-9_-]{43})\ntoken_sha256: ([0-9a-f]{64})\n$/.exec(made.stdout) ?? [];
    expect(digest).toBe(sha256(token ?? '').toString('hex'));
    expect((await lockstream(['token', 'new']).line(/^token: (\S+)$/m))[1]).not.toBe(token);

    const hashed = spawnSync(process.execPath, ['--import', 'tsx', CLI, 'token', 'hash'], {
      input: `${token}\n`,
    });
    expect(hashed.status).toBe(0);
    expect(hashed.stdout.toString()).toBe(`token_sha256: ${digest}\n`);
  });
});
