import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { Writable } from 'node:stream';
import { pino, type Level } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { LockClient, LockTimeoutError } from '../../src/client/index.js';
import { loadConfig } from '../../src/server/config.js';
import { startServer, type RunningServer } from '../../src/server/main.js';
import { deferred } from '../support/lock-caller.js';
import { CLI } from '../support/server-process.js';

type LogLine = Record<string, unknown>;

/** A server whose JSON log lines are collected, at `level`. */
async function serveCollecting(level: Level): Promise<{ server: RunningServer; lines: LogLine[] }> {
  const lines: LogLine[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n'))
        if (line.trim() !== '') lines.push(JSON.parse(line) as LogLine);
      done();
    },
  });
  const server = await startServer(loadConfig({}, ['--port', '0']), pino({ level }, sink));
  return { server, lines };
}

describe('structured logs', () => {
  const cleanups: Array<() => Promise<unknown> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it('say, per event, the lock, mode, owner, token and outcome (debug level)', async () => {
    const { server, lines } = await serveCollecting('debug');
    const client = new LockClient(`127.0.0.1:${server.port}`);
    cleanups.push(
      () => server.stop(),
      () => client.close(),
    );
    const lock = await client.acquire('logged', { mode: 'write', owner: 'auditor' });
    await expect(client.acquire('logged', { waitTimeout: 1, owner: 'impatient' })).rejects.toBeInstanceOf(
      LockTimeoutError,
    );
    await lock.release();
    await server.whenIdle();
    const token = lock.token.toString();
    expect(lines).toContainEqual(
      expect.objectContaining({ msg: 'granted', lock: 'logged', mode: 'write', owner: 'auditor', token }),
    );
    expect(lines).toContainEqual(
      expect.objectContaining({ msg: 'released', lock: 'logged', owner: 'auditor', token }),
    );
    expect(lines).toContainEqual(
      expect.objectContaining({
        msg: 'ended',
        lock: 'logged',
        owner: 'impatient',
        status: 'DEADLINE_EXCEEDED',
      }),
    );
  });

  it('at the default level, say nothing per grant, release or waiter (no log herd)', async () => {
    const { server, lines } = await serveCollecting('info');
    const client = new LockClient(`127.0.0.1:${server.port}`);
    cleanups.push(
      () => server.stop(),
      () => client.close(),
    );
    const before = lines.length;
    const holder = await client.acquire('quiet');
    const waiters = Array.from({ length: 20 }, () => {
      const queued = deferred();
      const lock = client.acquire('quiet', { onQueued: () => queued.resolve() });
      return { queued: queued.promise, lock };
    });
    await Promise.all(waiters.map((w) => w.queued));
    await holder.release();
    for (const waiter of waiters) await (await waiter.lock).release();
    expect(lines.slice(before)).toEqual([]);
  });

  /**
   * `lockstream serve` run as its own process until it listens, then stopped: what it printed.
   * `terminal`: stdout is a pseudo-terminal (script(1)), as when a person runs it.
   */
  async function serveOutput(args: string[], terminal: boolean): Promise<string> {
    const command = [process.execPath, '--import', 'tsx', CLI, 'serve', '--port', '0', ...args];
    const child = terminal
      ? spawn('script', ['-qfec', command.map((word) => `'${word}'`).join(' '), '/dev/null'], {
          stdio: ['pipe', 'pipe', 'inherit'],
        })
      : spawn(command[0]!, command.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    const listening = deferred();
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('lockstream listening on')) listening.resolve();
    });
    await listening.promise;
    child.kill('SIGTERM');
    await once(child, 'close');
    return output;
  }

  it('are lines for people on a terminal (or with --log-format pretty), JSON otherwise', async () => {
    const onTerminal = await serveOutput([], true);
    expect(onTerminal).toMatch(/\d\d:\d\d:\d\d\.\d{3}.*INFO.*lockstream listening on 127\.0\.0\.1:\d+/);
    expect(onTerminal).not.toMatch(/^\{/m);
    const pretty = await serveOutput(['--log-format', 'pretty'], false);
    expect(pretty).toMatch(/INFO.*lockstream listening on/);
    // Not a terminal: no colours either.
    expect(pretty).not.toContain('\u001b[');
    const piped = await serveOutput([], false);
    for (const line of piped.trim().split('\n')) expect(() => JSON.parse(line) as unknown).not.toThrow();
    const json = await serveOutput(['--log-format', 'json'], true);
    const messages = json
      .trim()
      .split(/\r?\n/)
      .map((line) => (JSON.parse(line) as { msg: string }).msg);
    expect(messages.some((msg) => msg.startsWith('lockstream listening on'))).toBe(true);
  });
});
