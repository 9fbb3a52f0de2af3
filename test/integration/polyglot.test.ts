import { existsSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { LockClient } from '../../src/client/index.js';
import { loadConfig } from '../../src/server/config.js';
import { startServer, type RunningServer } from '../../src/server/main.js';
import { deferred } from '../support/lock-caller.js';
import { InteractiveProcess } from '../support/interactive-process.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { createTestPki, type TestPki } from '../support/test-pki.js';
import { sha256 } from '../../src/server/security/access-policy.js';
import { scaled } from '../support/timing.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));
const repo = fileURLToPath(new URL('../../', import.meta.url));

/** The example programs (scripts/install-test-deps.sh prepares the Go binary and the Python venv). */
function example(
  language: 'go' | 'python' | 'python-session' | 'typescript',
  args: string[],
  env: Readonly<Record<string, string>> = {},
): InteractiveProcess {
  const commands = {
    go: [`${repo}.tmp/bin/lockstream-example-go`],
    python: [`${repo}.venv/bin/python`, `${repo}examples/python/acquire.py`],
    'python-session': [`${repo}.venv/bin/python`, `${repo}examples/python/session.py`],
    typescript: [process.execPath, '--import', 'tsx', `${repo}examples/typescript/acquire.ts`],
  } as const;
  const [command, ...prefix] = commands[language];
  if (!existsSync(command)) throw new Error(`${command} is missing: run scripts/install-test-deps.sh`);
  return new InteractiveProcess(command, [...prefix, ...args], { cwd: repo, env });
}

describe('clients in three languages on one lock', () => {
  let server: RunningServer;
  let address: string;

  beforeAll(async () => {
    const config = loadConfig({}, [
      '--port',
      '0',
      '--root',
      `/polyglot-${randomUUID()}`,
      '--zookeeper',
      connectString,
    ]);
    server = await startServer(config, pino({ level: 'silent' }));
    address = `127.0.0.1:${server.port}`;
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('grants a Python writer, then a TypeScript writer, then a Go reader, in queue order with growing tokens', async () => {
    const name = 'polyglot/report';
    const grants: Array<{ who: string; token: bigint }> = [];
    const client = new LockClient(address);
    const python = example('python', [
      '--address',
      address,
      '--name',
      name,
      '--mode',
      'write',
      '--hold-until-eof',
    ]);
    let go: InteractiveProcess | undefined;
    try {
      const [, pythonToken] = await python.waitFor(/^acquired token=(\d+)$/m);
      grants.push({ who: 'python', token: BigInt(pythonToken!) });

      const tsQueued = deferred<number>();
      const tsLock = client.acquire(name, { mode: 'write', owner: 'typescript', onQueued: tsQueued.resolve });
      expect(await tsQueued.promise).toBe(1);

      go = example('go', ['--address', address, '--name', name, '--mode', 'read', '--work-ms', '0']);
      const [, goAhead] = await go.waitFor(/^queued ahead=(\d+)$/m);
      expect(Number(goAhead)).toBe(2);

      python.endInput();
      await python.waitFor(/^released$/m);
      expect(await python.exited).toBe(0);

      const lock = await tsLock;
      grants.push({ who: 'typescript', token: lock.token });
      expect(go.stdout).not.toMatch(/acquired/);
      await lock.release();

      const [, goToken] = await go.waitFor(/^acquired token=(\d+)$/m);
      grants.push({ who: 'go', token: BigInt(goToken!) });
      await go.waitFor(/^released$/m);
      expect(await go.exited).toBe(0);

      expect(grants.map((g) => g.who)).toEqual(['python', 'typescript', 'go']);
      expect(grants[1]!.token).toBeGreaterThan(grants[0]!.token);
      expect(grants[2]!.token).toBeGreaterThan(grants[1]!.token);
    } finally {
      python.kill();
      go?.kill();
      client.close();
    }
  });

  it('serves a Go and a Python client each holding two locks on one Session stream, one after the other', async () => {
    const [first, second] = ['polyglot/session-1', 'polyglot/session-2'];
    const client = new LockClient(address);
    const blocker = await client.acquire(first, { owner: 'typescript' });
    const go = example('go', [
      '--address',
      address,
      '--session',
      '--name',
      first,
      '--name',
      second,
      '--work-ms',
      '200',
    ]);
    let python: InteractiveProcess | undefined;
    try {
      // Go holds the free lock at once and queues for the held one; the same stream carries both.
      const [, goSecond] = await go.waitFor(/^acquired polyglot\/session-2 token=(\d+)$/m);
      await go.waitFor(/^queued polyglot\/session-1 ahead=1$/m);
      python = example('python-session', [
        '--address',
        address,
        '--name',
        first,
        '--name',
        second,
        '--work-ms',
        '0',
      ]);
      await python.waitFor(/^queued polyglot\/session-1 ahead=2$/m);
      await python.waitFor(/^queued polyglot\/session-2 ahead=1$/m);
      await blocker.release();

      const [, goFirst] = await go.waitFor(/^acquired polyglot\/session-1 token=(\d+)$/m);
      await go.waitFor(/^released polyglot\/session-1$/m);
      await go.waitFor(/^released polyglot\/session-2$/m);
      expect(await go.exited).toBe(0);
      const [, pyFirst] = await python.waitFor(/^acquired polyglot\/session-1 token=(\d+)$/m);
      const [, pySecond] = await python.waitFor(/^acquired polyglot\/session-2 token=(\d+)$/m);
      await python.waitFor(/^released polyglot\/session-2$/m);
      expect(await python.exited).toBe(0);
      // Each lock passed from holder to holder in queue order, with growing tokens.
      expect(BigInt(goFirst!)).toBeGreaterThan(blocker.token);
      expect(BigInt(pyFirst!)).toBeGreaterThan(BigInt(goFirst!));
      expect(BigInt(pySecond!)).toBeGreaterThan(BigInt(goSecond!));
      expect(go.stderr + python.stderr).toBe('');
    } finally {
      go.kill();
      python?.kill();
      client.close();
    }
  });

  it.each(['go', 'python', 'typescript'] as const)(
    'the %s example reports a try-lock on a held lock as DEADLINE_EXCEEDED and exits 1',
    async (language) => {
      const client = new LockClient(address);
      const holder = await client.acquire(`polyglot/busy-${language}`);
      const attempt = example(language, [
        '--address',
        address,
        '--name',
        `polyglot/busy-${language}`,
        '--wait-timeout-ms',
        '0',
      ]);
      try {
        expect(await attempt.exited).toBe(1);
        expect(attempt.stderr).toMatch(/^error: DEADLINE_EXCEEDED: .*is not free/m);
        expect(attempt.stdout).toBe('');
      } finally {
        attempt.kill();
        await holder.release();
        client.close();
      }
    },
  );
});

describe('the examples with credentials', () => {
  const token = 'polyglot-token-e41f';
  let pki: TestPki;
  let tokenServer: RunningServer;
  let certificateServer: RunningServer;

  beforeAll(async () => {
    pki = await createTestPki();
    const policyFile = join(pki.dir, 'access.yaml');
    await writeFile(
      policyFile,
      `callers:\n  - name: examples\n    token_sha256: ${sha256(token).toString('hex')}\n    locks: [{ prefix: polyglot/, modes: [mutex] }]\n`,
    );
    const tls = ['--tls-cert', pki.server.certFile, '--tls-key', pki.server.keyFile];
    tokenServer = await startServer(
      loadConfig({}, ['--port', '0', ...tls, '--auth-file', policyFile]),
      pino({ level: 'silent' }),
    );
    certificateServer = await startServer(
      loadConfig({}, ['--port', '0', ...tls, '--tls-client-ca', pki.ca.certFile]),
      pino({ level: 'silent' }),
    );
  }, scaled(60_000));

  afterAll(async () => {
    await tokenServer?.stop();
    await certificateServer?.stop();
    await pki?.remove();
  });

  it.each(['go', 'python', 'typescript'] as const)(
    'the %s example takes a lock over TLS with a bearer token or a client certificate, and is refused without them',
    async (language) => {
      const name = ['--name', `polyglot/secure-${language}`, '--work-ms', '0'];
      const viaToken = ['--address', `localhost:${tokenServer.port}`, '--ca', pki.ca.certFile, ...name];
      const withToken = example(language, viaToken, { LOCKSTREAM_TOKEN: token });
      expect(await withToken.exited).toBe(0);
      expect(withToken.stdout).toMatch(/^acquired token=\d+\nreleased\n$/);

      const withoutToken = example(language, viaToken);
      expect(await withoutToken.exited).toBe(1);
      expect(withoutToken.stderr).toMatch(/^error: UNAUTHENTICATED: no credentials/m);

      const viaCertificate = [
        '--address',
        `localhost:${certificateServer.port}`,
        '--ca',
        pki.ca.certFile,
        ...name,
      ];
      const certified = example(language, [
        ...viaCertificate,
        '--cert',
        pki.cnClient.certFile,
        '--key',
        pki.cnClient.keyFile,
      ]);
      expect(await certified.exited).toBe(0);
      expect(certified.stdout).toMatch(/^acquired token=\d+\nreleased\n$/);
      const uncertified = example(language, viaCertificate);
      expect(await uncertified.exited).toBe(1);
      expect(uncertified.stderr).toMatch(/^error: UNAVAILABLE/m);
    },
    scaled(60_000),
  );
});
