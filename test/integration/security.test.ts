import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  credentials,
  InterceptingCall,
  Metadata,
  status,
  type ChannelCredentials,
  type Interceptor,
  type StatusObject,
} from '@grpc/grpc-js';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LockClient, LockClientError, type LockMode } from '../../src/client/index.js';
import { LockServiceClient } from '../../src/gen/lockstream/v1/lockstream.js';
import { ElectionServiceClient } from '../../src/gen/lockstream/v1/election.js';
import { ConfigError, loadConfig } from '../../src/server/config.js';
import { sha256 } from '../../src/server/security/access-policy.js';
import { exposureWarnings, startServer, type RunningServer } from '../../src/server/main.js';
import { createTestPki, type Issued, type TestPki } from '../support/test-pki.js';
import { LockCaller } from '../support/lock-caller.js';
import { scaled } from '../support/timing.js';

const TOKENS = {
  billing: 'billing-token-7f3a9c',
  reporter: 'reporter-token-41d2e8',
  prometheus: 'prometheus-token-9e0b17',
  elector: 'elector-token-5b81c0',
} as const;

const POLICY = `
# Who may do what on the test servers.
callers:
  - name: billing
    token_sha256: ${sha256(TOKENS.billing).toString('hex')}
    locks:
      - prefix: billing/
        modes: [mutex, read, write]
  - name: reporter
    token_sha256: ${sha256(TOKENS.reporter).toString('hex')}
    locks:
      - { prefix: billing/, modes: [read] }
      - { prefix: reports/, modes: [mutex] }
  - name: operator
    certificate: spiffe://example.org/ops
    admin: true
    locks:
      - { prefix: "", modes: [read] }
  - name: batch
    certificate: batch-runner
    locks:
      - { prefix: batch/, modes: [mutex] }
  - name: prometheus
    token_sha256: ${sha256(TOKENS.prometheus).toString('hex')}
    http: true
  - name: elector
    token_sha256: ${sha256(TOKENS.elector).toString('hex')}
    locks:
      - { prefix: leaders/, modes: [candidate] }
`;

let pki: TestPki;
let policyFile: string;
beforeAll(async () => {
  pki = await createTestPki();
  policyFile = join(pki.dir, 'access.yaml');
  await writeFile(policyFile, POLICY);
}, scaled(60_000));
afterAll(async () => {
  await pki?.remove();
});

const cleanups: Array<() => Promise<unknown> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function serve(args: string[], logger = pino({ level: 'silent' })): Promise<RunningServer> {
  const server = await startServer(
    loadConfig({}, ['--port', '0', '--max-resume-grace', '0s', ...args]),
    logger,
  );
  cleanups.push(() => server.stop());
  return server;
}

const tlsArgs = (): string[] => ['--tls-cert', pki.server.certFile, '--tls-key', pki.server.keyFile];
const mtlsArgs = (): string[] => [...tlsArgs(), '--tls-client-ca', pki.ca.certFile];

/** TLS trusting the test CA, with `client`'s certificate if given. */
function tls(client?: Issued, trusted: Buffer = pki.ca.cert): ChannelCredentials {
  return credentials.createSsl(trusted, client?.key ?? null, client?.cert ?? null);
}

function lockClient(server: RunningServer, channel: ChannelCredentials, token?: string): LockClient {
  const client = new LockClient(`127.0.0.1:${server.port}`, {
    credentials: channel,
    ...(token === undefined ? {} : { token }),
    unavailableRetries: 0,
    // Each client its own connection: grpc-js would otherwise share one between equal targets.
    channelOptions: { 'grpc.use_local_subchannel_pool': 1 },
  });
  cleanups.push(() => client.close());
  return client;
}

/** The gRPC status an SDK call ends with: OK, or the code it was refused with. */
async function outcome(call: Promise<unknown>): Promise<string> {
  try {
    const result = await call;
    if (result && typeof result === 'object' && 'release' in result) {
      await (result as { release: () => Promise<void> }).release();
    }
    return 'OK';
  } catch (error) {
    if (error instanceof LockClientError) return status[error.code] ?? String(error.code);
    throw error;
  }
}

/** WatchLock through the generated client (the SDK has no watch): its first reply or status. */
function watchOutcome(
  server: RunningServer,
  channel: ChannelCredentials,
  token?: string,
): (name: string) => Promise<string> {
  const client = new LockServiceClient(`127.0.0.1:${server.port}`, channel);
  cleanups.push(() => client.close());
  return (name) =>
    new Promise((resolve) => {
      const metadata = new Metadata();
      if (token !== undefined) metadata.set('authorization', `Bearer ${token}`);
      const call = client.watchLock({ name }, metadata);
      call.once('data', () => {
        resolve('OK');
        call.cancel();
      });
      call.on('error', () => {});
      call.once('status', (s: StatusObject) => resolve(status[s.code] ?? String(s.code)));
    });
}

describe('TLS on the gRPC port', () => {
  it('serves TLS clients that trust its CA, and no plaintext client or client that does not trust it', async () => {
    const server = await serve(tlsArgs());
    expect(await outcome(lockClient(server, tls()).tryAcquire('anything'))).toBe('OK');
    expect(await outcome(lockClient(server, credentials.createInsecure()).describe('anything'))).toBe(
      'UNAVAILABLE',
    );
    expect(await outcome(lockClient(server, tls(undefined, pki.strangerClient.cert)).describe('x'))).toBe(
      'UNAVAILABLE',
    );
  });

  it('with --tls-client-ca, admits only certificates its CA signed and that are valid now, and records their identity as the owner', async () => {
    const server = await serve(mtlsArgs());
    expect(await outcome(lockClient(server, tls()).describe('x'))).toBe('UNAVAILABLE');
    expect(await outcome(lockClient(server, tls(pki.strangerClient)).describe('x'))).toBe('UNAVAILABLE');
    expect(await outcome(lockClient(server, tls(pki.expiredClient)).describe('x'))).toBe('UNAVAILABLE');

    // Without an access policy every certified caller may do anything; its identity is the owner.
    const ops = lockClient(server, tls(pki.spiffeClient));
    const batch = lockClient(server, tls(pki.cnClient));
    await using _first = await ops.acquire('shared', { mode: 'read' });
    await using _second = await batch.acquire('shared', { mode: 'read', owner: 'named by itself' });
    const described = await ops.describe('shared');
    expect(described.holders.map((h) => h.owner).sort()).toEqual([
      'named by itself',
      'spiffe://example.org/ops',
    ]);
    // An owner given explicitly is kept; the URI SAN wins over the CN; a CN-only certificate names by CN.
    await using _third = await batch.acquire('batch-only');
    expect((await ops.describe('batch-only')).holders[0]?.owner).toBe('batch-runner');
  });
});

describe('an access policy with bearer tokens (--auth-file, over TLS)', () => {
  let server: RunningServer;
  type Who = keyof typeof TOKENS | 'nobody' | 'forger';
  const tokenOf = (who: Who): string | undefined =>
    who === 'nobody' ? undefined : who === 'forger' ? 'not-a-known-token' : TOKENS[who];
  const as = (who: Who): LockClient => lockClient(server, tls(), tokenOf(who));

  type Rpc = 'acquire' | 'describe' | 'check' | 'revoke' | 'watch' | 'list';
  const cases: Array<
    [who: Parameters<typeof as>[0], rpc: Rpc, name: string, mode: LockMode | '', expected: string]
  > = [
    ['nobody', 'acquire', 'billing/invoice', 'mutex', 'UNAUTHENTICATED'],
    ['nobody', 'describe', 'billing/invoice', '', 'UNAUTHENTICATED'],
    ['nobody', 'list', '', '', 'UNAUTHENTICATED'],
    ['nobody', 'watch', 'billing/invoice', '', 'UNAUTHENTICATED'],
    ['forger', 'acquire', 'billing/invoice', 'mutex', 'UNAUTHENTICATED'],
    ['forger', 'check', 'billing/invoice', '', 'UNAUTHENTICATED'],
    ['billing', 'acquire', 'billing/invoice', 'mutex', 'OK'],
    ['billing', 'acquire', 'billing/invoice', 'write', 'OK'],
    ['billing', 'acquire', 'billing/invoice', 'read', 'OK'],
    ['billing', 'acquire', 'billingx', 'mutex', 'PERMISSION_DENIED'],
    ['billing', 'acquire', 'reports/daily', 'mutex', 'PERMISSION_DENIED'],
    ['billing', 'describe', 'billing/invoice', '', 'OK'],
    ['billing', 'check', 'billing/invoice', '', 'OK'],
    ['billing', 'watch', 'billing/invoice', '', 'OK'],
    ['billing', 'describe', 'reports/daily', '', 'PERMISSION_DENIED'],
    ['billing', 'check', 'reports/daily', '', 'PERMISSION_DENIED'],
    ['billing', 'watch', 'reports/daily', '', 'PERMISSION_DENIED'],
    ['billing', 'revoke', 'billing/invoice', '', 'PERMISSION_DENIED'],
    ['reporter', 'acquire', 'billing/invoice', 'read', 'OK'],
    ['reporter', 'acquire', 'billing/invoice', 'write', 'PERMISSION_DENIED'],
    ['reporter', 'acquire', 'billing/invoice', 'mutex', 'PERMISSION_DENIED'],
    ['reporter', 'acquire', 'reports/daily', 'mutex', 'OK'],
    ['reporter', 'acquire', 'reports/daily', 'read', 'PERMISSION_DENIED'],
    ['reporter', 'describe', 'billing/invoice', '', 'OK'],
    ['reporter', 'revoke', 'reports/daily', '', 'PERMISSION_DENIED'],
  ];

  it.each(cases)('%s: %s %s %s → %s', async (who, rpc, name, mode, expected) => {
    server = await serve([...tlsArgs(), '--auth-file', policyFile]);
    const client = as(who);
    const calls: Record<Rpc, () => Promise<unknown>> = {
      acquire: () => client.tryAcquire(name, { mode: mode || 'mutex' }),
      describe: () => client.describe(name),
      check: () => client.checkToken(name, 1n),
      revoke: () => client.revoke(name),
      list: () => client.list({ prefix: name }),
      watch: async () => {
        const watched = await watchOutcome(server, tls(), tokenOf(who))(name);
        if (watched !== 'OK')
          throw new LockClientError(name, status[watched as keyof typeof status], watched);
      },
    };
    expect(await outcome(calls[rpc]())).toBe(expected);
  });

  it("lists only the locks a caller's grants cover, and denies without saying whether a lock exists", async () => {
    server = await serve([...tlsArgs(), '--auth-file', policyFile]);
    await using _report = await as('reporter').acquire('reports/daily', { owner: 'nightly' });
    await using _invoice = await as('billing').acquire('billing/invoice');
    expect((await as('billing').list()).locks.map((lock) => lock.name)).toEqual(['billing/invoice']);
    expect((await as('reporter').list()).locks.map((lock) => lock.name)).toEqual([
      'billing/invoice',
      'reports/daily',
    ]);

    const refusal = async (name: string): Promise<string> => {
      try {
        await as('billing').describe(name);
        return 'described';
      } catch (error) {
        return error instanceof LockClientError
          ? `${status[error.code]} ${error.details.replace(name, '<name>')}`
          : 'other';
      }
    };
    const held = await refusal('reports/daily');
    expect(held).toMatch(/^PERMISSION_DENIED /);
    expect(await refusal('reports/never-used')).toBe(held);
    // The recorded owner of a request that names none is the caller's name in the policy.
    await using _unnamed = await as('billing').acquire('billing/unnamed', { owner: '' });
    expect((await as('billing').describe('billing/unnamed')).holders[0]?.owner).toBe('billing');
  });
});

describe('elections under an access policy', () => {
  it('let only a caller granted `candidate` campaign, proclaim and resign; one that may see the name observes and asks for the leader', async () => {
    const server = await serve([...tlsArgs(), '--auth-file', policyFile]);
    const client = new ElectionServiceClient(`127.0.0.1:${server.port}`, tls());
    cleanups.push(() => client.close());
    const as = (who: keyof typeof TOKENS | 'nobody'): Metadata => {
      const metadata = new Metadata();
      if (who !== 'nobody') metadata.set('authorization', `Bearer ${TOKENS[who]}`);
      return metadata;
    };
    const unaryCode = (call: (done: (error: { code: number } | null) => void) => void): Promise<string> =>
      new Promise((resolve) => call((error) => resolve(error ? (status[error.code] ?? '?') : 'OK')));
    /** A Campaign's first message (its $case), or the status it ended with. */
    const campaign = (who: keyof typeof TOKENS, name: string): Promise<{ first: string; term?: bigint }> =>
      new Promise((resolve) => {
        const call = client.campaign(as(who));
        cleanups.push(() => call.cancel());
        call.on('error', () => {});
        call.once('data', (message: { kind?: { $case: string; value: { term?: bigint } } }) =>
          resolve({
            first: message.kind!.$case,
            ...(message.kind?.value.term === undefined ? {} : { term: message.kind.value.term }),
          }),
        );
        call.once('status', (s: StatusObject) => resolve({ first: status[s.code] ?? '?' }));
        call.write({
          kind: {
            $case: 'start',
            value: {
              name,
              value: Buffer.alloc(0),
              owner: '',
              waitTimeout: undefined,
              resumeGrace: undefined,
              heartbeatInterval: undefined,
            },
          },
        });
      });
    const observeFirst = (who: keyof typeof TOKENS | 'nobody', name: string): Promise<string> =>
      new Promise((resolve) => {
        const call = client.observe({ name }, as(who));
        call.on('error', () => {});
        call.once('data', (message: { kind?: { $case: string } }) => {
          resolve(message.kind!.$case);
          call.cancel();
        });
        call.once('status', (s: StatusObject) => resolve(status[s.code] ?? '?'));
      });

    expect((await campaign('billing', 'leaders/db')).first).toBe('PERMISSION_DENIED');
    expect((await campaign('elector', 'billing/db')).first).toBe('PERMISSION_DENIED');
    const elected = await campaign('elector', 'leaders/db');
    expect(elected.first).toBe('elected');
    const term = elected.term!;
    expect(await observeFirst('nobody', 'leaders/db')).toBe('UNAUTHENTICATED');
    expect(await observeFirst('billing', 'leaders/db')).toBe('PERMISSION_DENIED');
    expect(await observeFirst('elector', 'leaders/db')).toBe('term');
    expect(await unaryCode((done) => client.leader({ name: 'leaders/db' }, as('billing'), done))).toBe(
      'PERMISSION_DENIED',
    );
    expect(await unaryCode((done) => client.leader({ name: 'leaders/db' }, as('elector'), done))).toBe('OK');
    for (const who of ['billing', 'reporter'] as const) {
      expect(
        await unaryCode((done) =>
          client.proclaim({ name: 'leaders/db', term, value: Buffer.from('x') }, as(who), done),
        ),
      ).toBe('PERMISSION_DENIED');
      expect(await unaryCode((done) => client.resign({ name: 'leaders/db', term }, as(who), done))).toBe(
        'PERMISSION_DENIED',
      );
    }
    expect(
      await unaryCode((done) =>
        client.proclaim({ name: 'leaders/db', term, value: Buffer.from('x') }, as('elector'), done),
      ),
    ).toBe('OK');
    expect(await unaryCode((done) => client.resign({ name: 'leaders/db', term }, as('elector'), done))).toBe(
      'OK',
    );
  });
});

describe('guarded records under an access policy', () => {
  it("let a caller write a lock's records only as a holder it may be, and read them only where it may see the lock", async () => {
    const server = await serve([...tlsArgs(), '--auth-file', policyFile]);
    const billing = lockClient(server, tls(), TOKENS.billing);
    const reporter = lockClient(server, tls(), TOKENS.reporter);
    const elector = lockClient(server, tls(), TOKENS.elector);
    const lock = await billing.acquire('billing/ledger');
    cleanups.push(() => lock.release().catch(() => {}));
    expect(await billing.records(lock.name, lock.token).put('total', '120')).toBe(1n);
    // reporter may see billing/ (it may read-lock it): it reads the record.
    const read = await reporter.getRecord('billing/ledger', 'total');
    expect(Buffer.from(read?.value ?? []).toString()).toBe('120');
    // With billing's token in hand it still may not write: it may not hold billing/ as a mutex.
    expect(await outcome(reporter.records(lock.name, lock.token).put('total', '0'))).toBe(
      'PERMISSION_DENIED',
    );
    // elector may not even see billing/.
    expect(await outcome(elector.getRecord('billing/ledger', 'total'))).toBe('PERMISSION_DENIED');
    expect(await outcome(elector.records(lock.name, lock.token).put('total', '0'))).toBe('PERMISSION_DENIED');
    expect(Buffer.from((await billing.getRecord('billing/ledger', 'total'))?.value ?? []).toString()).toBe(
      '120',
    );
  });
});

describe('resume tokens under an access policy', () => {
  it('resume a request only for a caller that may take its lock; anyone else learns nothing', async () => {
    const server = await serve([...tlsArgs(), '--auth-file', policyFile, '--max-resume-grace', '10s']);
    const caller = (token?: string): LockCaller => {
      const bearer: Interceptor = (options, next) =>
        new InterceptingCall(next(options), {
          start: (metadata, listener, proceed) => {
            if (token !== undefined) metadata.set('authorization', `Bearer ${token}`);
            proceed(metadata, listener);
          },
        });
      const made = new LockCaller(
        `127.0.0.1:${server.port}`,
        { interceptors: [bearer], 'grpc.use_local_subchannel_pool': 1 },
        tls(),
      );
      cleanups.push(() => made.close());
      return made;
    };
    const billing = caller(TOKENS.billing);
    const stream = billing.open({ name: 'billing/resumable', resumeGrace: { seconds: 10n, nanos: 0 } });
    const { token: resumeToken } = await stream.resumable();
    const fencingToken = await stream.acquired();
    stream.cancel(); // an abnormal end: the request is kept for its grace

    // A well-formed token of this instance that was never issued.
    const neverIssued = `${resumeToken.slice(0, resumeToken.indexOf('.'))}.never-issued`;
    const unknown = await caller(TOKENS.billing).resume(neverIssued).outcome;
    const foreign = await caller(TOKENS.reporter).resume(resumeToken).outcome;
    expect(foreign).toMatchObject({ code: status.NOT_FOUND, details: unknown.details });
    expect((await caller().resume(resumeToken).outcome).code).toBe(status.UNAUTHENTICATED);

    const resumed = billing.resume(resumeToken);
    expect(await resumed.acquired()).toBe(fencingToken);
    expect((await resumed.release()).code).toBe(status.OK);
  });
});

describe('secrets', () => {
  it('never appear in the log, even at trace level, whether the token is known or not', async () => {
    let logged = '';
    const logger = pino({ level: 'trace' }, { write: (line: string) => (logged += line) });
    const server = await serve([...tlsArgs(), '--auth-file', policyFile], logger);
    await using _held = await lockClient(server, tls(), TOKENS.billing).acquire('billing/logged');
    await outcome(lockClient(server, tls(), 'forged-secret-3c9d').describe('billing/logged'));
    await outcome(lockClient(server, tls(), TOKENS.reporter).revoke('billing/logged'));
    expect(logged).toContain('billing/logged');
    for (const secret of [TOKENS.billing, TOKENS.reporter, 'forged-secret-3c9d'])
      expect(logged).not.toContain(secret);
  });
});

describe('an access policy with client certificates (--auth-file with --tls-client-ca)', () => {
  it('knows callers by certificate identity, lets only admins revoke, and lets a token name a certified caller', async () => {
    const logged: Array<Record<string, unknown>> = [];
    const logger = pino(
      { level: 'info' },
      { write: (line: string) => logged.push(JSON.parse(line) as Record<string, unknown>) },
    );
    const server = await serve([...mtlsArgs(), '--auth-file', policyFile], logger);
    const operator = lockClient(server, tls(pki.spiffeClient));
    const batch = lockClient(server, tls(pki.cnClient));
    const intruder = lockClient(server, tls(pki.unknownClient));

    expect(await outcome(batch.tryAcquire('batch/nightly'))).toBe('OK');
    expect(await outcome(batch.tryAcquire('billing/invoice'))).toBe('PERMISSION_DENIED');
    expect(await outcome(batch.revoke('batch/nightly'))).toBe('PERMISSION_DENIED');
    expect(await outcome(intruder.describe('batch/nightly'))).toBe('UNAUTHENTICATED');
    expect(await outcome(operator.tryAcquire('batch/nightly', { mode: 'mutex' }))).toBe('PERMISSION_DENIED');
    expect(await outcome(operator.tryAcquire('batch/nightly', { mode: 'read' }))).toBe('OK');

    const held = await batch.acquire('batch/nightly');
    expect((await operator.describe('batch/nightly')).holders[0]?.owner).toBe('batch');
    expect(await operator.revoke('batch/nightly', { reason: 'maintenance', forceAfter: 0 })).toBe(1);
    // The log says who revoked what.
    expect(logged).toContainEqual(
      expect.objectContaining({
        msg: 'revocation asked',
        lock: 'batch/nightly',
        caller: 'operator',
        reason: 'maintenance',
      }),
    );
    await expect(
      new Promise((resolve) =>
        held.lost.addEventListener('abort', () => resolve(held.lost.reason), { once: true }),
      ),
    ).resolves.toMatchObject({ name: 'LockLostError' });

    // A token on a certified connection names the caller: the token's grants apply.
    const billingOverBatchCert = lockClient(server, tls(pki.cnClient), TOKENS.billing);
    expect(await outcome(billingOverBatchCert.tryAcquire('billing/invoice'))).toBe('OK');
    expect(await outcome(billingOverBatchCert.tryAcquire('batch/nightly'))).toBe('PERMISSION_DENIED');
  });
});

describe('the HTTP port with --http-auth on', () => {
  it('answers only callers the policy lets read it, by Bearer token or Basic name and token, but the probes to anyone', async () => {
    const server = await serve(['--auth-file', policyFile, '--http-port', '0', '--http-auth', 'on']);
    const get = async (path: string, authorization?: string): Promise<Response> =>
      fetch(`http://127.0.0.1:${server.httpPort}${path}`, {
        headers: authorization === undefined ? {} : { authorization },
      });
    const basic = (user: string, password: string): string =>
      `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

    const anonymous = await get('/metrics');
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBe('Basic realm="lockstream", charset="UTF-8"');
    expect((await get('/metrics', `Bearer ${TOKENS.prometheus}`)).status).toBe(200);
    expect((await get('/', basic('prometheus', TOKENS.prometheus))).status).toBe(200);
    expect((await get('/api/locks', basic('prometheus', TOKENS.prometheus))).status).toBe(200);
    // A known caller without `http: true`, a name that is not the token's, an unknown token.
    expect((await get('/metrics', `Bearer ${TOKENS.billing}`)).status).toBe(401);
    expect((await get('/metrics', basic('billing', TOKENS.prometheus))).status).toBe(401);
    expect((await get('/metrics', 'Bearer not-a-known-token')).status).toBe(401);
    expect((await get('/api/events', 'Basic %%%')).status).toBe(401);
    // The probes tell nothing of the locks, and a kubelet sends no credentials.
    expect((await get('/livez')).status).toBe(200);
    expect((await get('/readyz')).status).toBe(200);
  });
});

describe('start-up warnings', () => {
  const config = (args: string[]) => loadConfig({}, args);
  const open = { tls: false, authenticated: false, admitsHttp: undefined };
  const secured = { tls: true, authenticated: true, admitsHttp: () => true };

  it('say so when a port is reachable beyond loopback without TLS, authentication or HTTP auth', () => {
    expect(exposureWarnings(config([]), open)).toEqual([]);
    expect(exposureWarnings(config(['--http-port', '9464']), open)).toEqual([]);
    expect(
      exposureWarnings(config(['--host', '0.0.0.0', '--http-port', '9464', '--http-host', '::']), open),
    ).toEqual([
      'listening on 0.0.0.0 beyond loopback without TLS (--tls-cert, --tls-key) or authentication (--auth-file or --tls-client-ca): anyone who can reach this port can take, hold and revoke any lock',
      'HTTP port on :: beyond loopback without --http-auth: anyone who can reach it sees every lock, owner and peer',
    ]);
    expect(exposureWarnings(config(['--host', '10.0.0.5']), { ...open, tls: true })).toEqual([
      expect.stringMatching(/without authentication \(--auth-file or --tls-client-ca\)/),
    ]);
    expect(
      exposureWarnings(config(['--host', '0.0.0.0', '--http-host', '0.0.0.0', '--http-port', '0']), secured),
    ).toEqual([]);
  });
});

describe('security configuration', () => {
  it('reports unreadable files, a malformed policy and half a TLS setup at start-up, every problem at once', async () => {
    const broken = join(pki.dir, 'broken.yaml');
    await writeFile(
      broken,
      'callers:\n  - name: a\n    token_sha256: abc\n    locks: [{ prefix: x, modes: [exclusive] }]\n  - name: b\n',
    );
    const problems = async (args: string[]): Promise<readonly string[]> => {
      try {
        await serve(args);
      } catch (error) {
        if (error instanceof ConfigError) return error.problems;
        throw error;
      }
      return [];
    };
    expect(
      await problems([
        '--auth-file',
        broken,
        '--tls-cert',
        join(pki.dir, 'missing.crt'),
        '--tls-key',
        pki.server.keyFile,
      ]),
    ).toEqual([
      expect.stringMatching(/^--tls-cert ".*missing\.crt": cannot read it \(ENOENT\)$/),
      expect.stringMatching(/callers\[0\]\.token_sha256: expected the 64 hex digits/),
      expect.stringMatching(/callers\[0\]\.locks\[0\]\.modes\[0\]:/),
      expect.stringMatching(/callers\[1\]: a caller needs token_sha256, certificate, or both/),
    ]);
    expect(() => loadConfig({}, ['--tls-cert', pki.server.certFile])).toThrow(/give both/);
    expect(await problems(['--tls-cert', pki.server.certFile, '--tls-key', pki.cnClient.keyFile])).toEqual([
      expect.stringMatching(/^--tls-cert\/--tls-key: /),
    ]);
  });
});
