import { createRequire } from 'node:module';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { checkedBlock, consoleCommands } from '../support/doc-blocks.js';
import { grpcurl, interactiveGrpcurl } from '../support/grpcurl.js';
import { LockCaller } from '../support/lock-caller.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

/**
 * What an operator does with grpcurl and no .proto files at hand: everything goes through
 * server reflection, against a real `lockstream serve` process.
 */
describe('grpcurl through server reflection', () => {
  let server: ServerProcess;
  let caller: LockCaller;

  beforeAll(async () => {
    server = await startServerProcess([]);
    caller = new LockCaller(server.address);
  });

  afterAll(async () => {
    caller?.close();
    await server?.kill('SIGTERM');
  });

  it('lists the lock, election and record services, health checking and both reflection services', async () => {
    const services = (await grpcurl(['-plaintext', server.address, 'list'])).trim().split('\n');
    expect(services.sort()).toEqual([
      'grpc.health.v1.Health',
      'grpc.reflection.v1.ServerReflection',
      'grpc.reflection.v1alpha.ServerReflection',
      'lockstream.v1.ElectionService',
      'lockstream.v1.LockService',
      'lockstream.v1.RecordService',
    ]);
  });

  it('answers health checks for the server and for the lock, election and record services', async () => {
    for (const service of [
      '',
      'lockstream.v1.LockService',
      'lockstream.v1.ElectionService',
      'lockstream.v1.RecordService',
    ]) {
      const answer = await grpcurl([
        '-plaintext',
        '-d',
        JSON.stringify({ service }),
        server.address,
        'grpc.health.v1.Health/Check',
      ]);
      expect(JSON.parse(answer)).toEqual({ status: 'SERVING' });
    }
  });

  it('describes the service and its messages with their comments, imports resolved', async () => {
    const service = await grpcurl(['-plaintext', server.address, 'describe', 'lockstream.v1.LockService']);
    expect(service).toContain(
      'rpc Acquire ( stream .lockstream.v1.AcquireRequest ) returns ( stream .lockstream.v1.AcquireResponse )',
    );
    expect(service).toContain('holds it for as long as this stream stays open');
    const start = await grpcurl(['-plaintext', server.address, 'describe', 'lockstream.v1.AcquireStart']);
    expect(start).toContain('.google.protobuf.Duration wait_timeout = 3;');
    expect(start).toContain('.lockstream.v1.LockMode mode = 2;');
    const modes = await grpcurl(['-plaintext', server.address, 'describe', 'lockstream.v1.LockMode']);
    for (const mode of ['LOCK_MODE_MUTEX', 'LOCK_MODE_READ', 'LOCK_MODE_WRITE'])
      expect(modes).toContain(mode);
  });

  it('acquires a lock typed on stdin, holds it while stdin is open, and releases it on Ctrl-D', async () => {
    const session = interactiveGrpcurl([
      '-plaintext',
      '-d',
      '@',
      server.address,
      'lockstream.v1.LockService/Acquire',
    ]);
    try {
      session.type({ start: { name: 'grpcurl/demo', mode: 'LOCK_MODE_MUTEX', owner: 'operator' } });
      const [, token] = await session.waitFor(/"fencingToken": "(\d+)"/);

      // Held: another client has to queue behind the grpcurl session.
      const waiter = caller.open({ name: 'grpcurl/demo' });
      expect(await waiter.queued()).toBe(1);

      session.endInput();
      await session.waitFor(/"released": \{\}/);
      expect(await session.exited).toBe(0);
      expect(await waiter.acquired()).toBeGreaterThan(BigInt(token!));
      expect((await waiter.release()).code).toBe(grpc.status.OK);
    } finally {
      session.kill();
    }
  });

  it('campaigns, observes and asks for the leader by hand, as the README shows', async () => {
    const observer = interactiveGrpcurl([
      '-plaintext',
      '-d',
      '{"name":"grpcurl/election"}',
      server.address,
      'lockstream.v1.ElectionService/Observe',
    ]);
    const candidate = interactiveGrpcurl([
      '-plaintext',
      '-d',
      '@',
      server.address,
      'lockstream.v1.ElectionService/Campaign',
    ]);
    try {
      await observer.waitFor(/"vacant": \{\}/);
      candidate.type({
        start: { name: 'grpcurl/election', value: Buffer.from('10.0.0.7:8080').toString('base64') },
      });
      const [, term] = await candidate.waitFor(/"elected": \{\s*"term": "(\d+)"/);
      await observer.waitFor(new RegExp(`"term": \\{\\s*"term": "${term}"`));
      const leader = JSON.parse(
        await grpcurl([
          '-plaintext',
          '-d',
          '{"name":"grpcurl/election"}',
          server.address,
          'lockstream.v1.ElectionService/Leader',
        ]),
      ) as { leader: { term: string; value: string } };
      expect(leader.leader.term).toBe(term);
      expect(Buffer.from(leader.leader.value, 'base64').toString()).toBe('10.0.0.7:8080');
      candidate.endInput();
      await candidate.waitFor(/"resigned": \{\}/);
      expect(await candidate.exited).toBe(0);
      await observer.waitFor(new RegExp(`"vacant": \\{\\s*"afterTerm": "${term}"`));
    } finally {
      candidate.kill();
      observer.kill();
    }
  });

  it("writes a guarded record by hand with a held lock's token, as the README shows; a stale token is refused", async () => {
    const holder = interactiveGrpcurl([
      '-plaintext',
      '-d',
      '@',
      server.address,
      'lockstream.v1.LockService/Acquire',
    ]);
    const put = (token: string): Promise<string> =>
      grpcurl([
        '-plaintext',
        '-d',
        JSON.stringify({
          name: 'grpcurl/job',
          key: 'checkpoint',
          value: Buffer.from('batch 7').toString('base64'),
          fencingToken: token,
        }),
        server.address,
        'lockstream.v1.RecordService/PutRecord',
      ]);
    try {
      holder.type({ start: { name: 'grpcurl/job', mode: 'LOCK_MODE_MUTEX' } });
      const [, token] = await holder.waitFor(/"fencingToken": "(\d+)"/);
      expect(JSON.parse(await put(token!))).toEqual({ revision: '1' });
      const read = JSON.parse(
        await grpcurl([
          '-plaintext',
          '-d',
          '{"name":"grpcurl/job","key":"checkpoint"}',
          server.address,
          'lockstream.v1.RecordService/GetRecord',
        ]),
      ) as { found: boolean; value: string; revision: string };
      expect({ ...read, value: Buffer.from(read.value, 'base64').toString() }).toEqual({
        found: true,
        value: 'batch 7',
        revision: '1',
      });
      holder.endInput();
      expect(await holder.exited).toBe(0);
      await expect(put(token!)).rejects.toThrow(
        /Code: FailedPrecondition[\s\S]*does not hold lock "grpcurl\/job"/,
      );
    } finally {
      holder.kill();
    }
  });

  it('holds two locks on one Session stream, as the README shows, and releases them one by one', async () => {
    const session = interactiveGrpcurl([
      '-plaintext',
      '-d',
      '@',
      server.address,
      'lockstream.v1.LockService/Session',
    ]);
    try {
      session.type({ open: {} });
      session.type({ acquire: { requestId: 1, name: 'grpcurl/a', mode: 'LOCK_MODE_MUTEX' } });
      session.type({ acquire: { requestId: 2, name: 'grpcurl/b', mode: 'LOCK_MODE_READ' } });
      const acquired = /"requestId": (\d),\s*"acquired": \{\s*"fencingToken": "(\d+)"/g;
      await session.waitFor(/"requestId": 2,\s*"acquired"/);
      await session.waitFor(/"requestId": 1,\s*"acquired"/);
      expect(session.stdout).toMatch(/^\{\s*"opened": \{\}\s*\}/);
      const tokens = new Map([...session.stdout.matchAll(acquired)].map((m) => [m[1], BigInt(m[2]!)]));
      // Both held on one stream: another client queues for either.
      const waiter = caller.open({ name: 'grpcurl/a' });
      expect(await waiter.queued()).toBe(1);

      session.type({ release: { requestId: 1 } });
      await session.waitFor(/"requestId": 1,\s*"ended": \{\}/);
      expect(await waiter.acquired()).toBeGreaterThan(tokens.get('1')!);
      expect(session.stdout).toMatch(/"requestId": 1,\s*"released": \{\}/);
      session.type({ release: { requestId: 2 } });
      await session.waitFor(/"requestId": 2,\s*"ended": \{\}/);
      session.endInput();
      expect(await session.exited).toBe(0);
      expect((await waiter.release()).code).toBe(grpc.status.OK);
    } finally {
      session.kill();
    }
  });

  it('publishes a value typed as base64, changes it with setValue, and shows it in DescribeLock', async () => {
    const session = interactiveGrpcurl([
      '-plaintext',
      '-d',
      '@',
      server.address,
      'lockstream.v1.LockService/Acquire',
    ]);
    const base64 = (text: string): string => Buffer.from(text).toString('base64');
    const describedValue = async (): Promise<string | undefined> => {
      const described = JSON.parse(
        await grpcurl([
          '-plaintext',
          '-d',
          '{"name":"grpcurl/leader"}',
          server.address,
          'lockstream.v1.LockService/DescribeLock',
        ]),
      ) as { holders: Array<{ value?: string }> };
      return described.holders[0]?.value;
    };
    try {
      session.type({
        start: { name: 'grpcurl/leader', mode: 'LOCK_MODE_MUTEX', value: base64('10.0.0.1:8080') },
      });
      await session.waitFor(/"fencingToken"/);
      expect(await describedValue()).toBe(base64('10.0.0.1:8080'));
      session.type({ setValue: { value: base64('10.0.0.2:8080') } });
      await session.waitFor(/"valueSet": \{\}/);
      expect(await describedValue()).toBe(base64('10.0.0.2:8080'));
      session.type({ release: {} });
      session.endInput();
      expect(await session.exited).toBe(0);
    } finally {
      session.kill();
    }
  });

  it('reports a try-lock on a held lock as DeadlineExceeded with the lock named', async () => {
    const holder = caller.open({ name: 'grpcurl/busy' });
    await holder.acquired();
    const failed = grpcurl([
      '-plaintext',
      '-d',
      '{"start":{"name":"grpcurl/busy","mode":"LOCK_MODE_WRITE","waitTimeout":"0s"}}',
      server.address,
      'lockstream.v1.LockService/Acquire',
    ]);
    await expect(failed).rejects.toMatchObject({
      stderr: expect.stringMatching(/Code: DeadlineExceeded[\s\S]*"grpcurl\/busy" is not free/),
    });
    await holder.release();
  });

  it('answers the older v1alpha reflection protocol too', async () => {
    const require = createRequire(import.meta.url);
    const protoDir = path.join(path.dirname(require.resolve('@grpc/reflection/package.json')), 'build/proto');
    const definition = protoLoader.loadSync('grpc/reflection/v1alpha/reflection.proto', {
      includeDirs: [protoDir],
    });
    const loaded = grpc.loadPackageDefinition(definition) as unknown as {
      grpc: { reflection: { v1alpha: { ServerReflection: grpc.ServiceClientConstructor } } };
    };
    const Reflection = loaded.grpc.reflection.v1alpha.ServerReflection;
    const client = new Reflection(server.address, grpc.credentials.createInsecure());
    try {
      type ListServicesResponse = { listServicesResponse?: { service: Array<{ name: string }> } };
      const open = client['ServerReflectionInfo'] as () => grpc.ClientDuplexStream<
        unknown,
        ListServicesResponse
      >;
      const call = open.call(client);
      const answer = new Promise<string[]>((resolve, reject) => {
        call.once('data', (response: ListServicesResponse) =>
          resolve(response.listServicesResponse?.service.map((s) => s.name) ?? []),
        );
        call.once('error', reject);
      });
      call.write({ listServices: '' });
      expect(await answer).toContain('lockstream.v1.LockService');
      call.end();
    } finally {
      client.close();
    }
  });
});

/*
 * The try-lock one-liners of the README, whose input ends as soon as the request is sent: the
 * half-close comes before the answer on a store that takes a round trip to give it (ZooKeeper),
 * and the try still gets its answer, the same on both stores.
 */
describe.each([
  ['embedded', (): string[] => []],
  ['zookeeper', (): string[] => ['--zookeeper', connectString, '--root', `/grpcurl-try-${randomUUID()}`]],
])('a try-lock by grpcurl whose input ends at once, on the %s store', (_store, backend) => {
  let server: ServerProcess;
  let caller: LockCaller;

  beforeAll(async () => {
    server = await startServerProcess(backend());
    caller = new LockCaller(server.address);
  });
  afterAll(async () => {
    caller?.close();
    await server?.kill('SIGTERM');
  });

  const tryLock = (name: string): Promise<string> =>
    grpcurl([
      '-plaintext',
      '-d',
      JSON.stringify({ start: { name, mode: 'LOCK_MODE_MUTEX', waitTimeout: '0s' } }),
      server.address,
      'lockstream.v1.LockService/Acquire',
    ]);

  it('on a held lock: DeadlineExceeded, the lock named as not free', async () => {
    const holder = caller.open({ name: 'grpcurl/try-busy' });
    await holder.acquired();
    await expect(tryLock('grpcurl/try-busy')).rejects.toMatchObject({
      stderr: expect.stringMatching(/Code: DeadlineExceeded[\s\S]*"grpcurl\/try-busy" is not free/),
    });
    await holder.release();
  });

  it('on a free lock: acquired, then released by the half-close, and OK', async () => {
    const out = await tryLock('grpcurl/try-free');
    expect(out).toMatch(/"acquired": \{\s*"fencingToken": "\d+"/);
    expect((await caller.describe('grpcurl/try-free')).holders).toEqual([]);
  });

  it('on a Session stream: the try ends with DEADLINE_EXCEEDED (code 4), not CANCELLED', async () => {
    const holder = caller.open({ name: 'grpcurl/try-session' });
    await holder.acquired();
    const out = await grpcurl([
      '-plaintext',
      '-d',
      [
        JSON.stringify({ open: {} }),
        JSON.stringify({
          acquire: { requestId: 1, name: 'grpcurl/try-session', mode: 'LOCK_MODE_MUTEX', waitTimeout: '0s' },
        }),
      ].join('\n'),
      server.address,
      'lockstream.v1.LockService/Session',
    ]);
    expect(out).toMatch(
      /"requestId": 1,\s*"ended": \{\s*"code": 4,\s*"message": "lock \\"grpcurl\/try-session\\" is not free/,
    );
    await holder.release();
  });
});

/*
 * The grpcurl sessions of the README and docs/ (README.md readme-acquire; docs/grpcurl.md
 * grpcurl-list, grpcurl-acquire, grpcurl-try-lock, grpcurl-session; docs/elections.md
 * grpcurl-election), replayed as written: each command with the server's address, each typed
 * line typed, `^D` as Ctrl-D, and the answers compared with those shown (tokens and terms are
 * whatever the server gives).
 */

/** A command line's words, as a shell splits them (single quotes only), the address replaced. */
function argv(command: string, address: string): string[] {
  const words = [...command.matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2]!);
  expect(words[0]).toBe('grpcurl');
  return words.slice(1).map((word) => (word === '127.0.0.1:50051' ? address : word));
}

/** The JSON objects in grpcurl's output (or a page's), one after the other, tokens and terms made N. */
function objects(text: string): string[] {
  const found: string[] = [];
  let depth = 0;
  let start = -1;
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '\\') i++;
      else if (c === '"') quoted = false;
    } else if (c === '"') quoted = true;
    else if (c === '{' && depth++ === 0) start = i;
    else if (c === '}' && --depth === 0) found.push(text.slice(start, i + 1));
  }
  return found.map((json) =>
    JSON.stringify(JSON.parse(json)).replace(/"(fencingToken|term|afterTerm)":"\d+"/g, '"$1":"N"'),
  );
}

/** The steps of a console command: lines to type, `^D`, and the answers to wait for. */
function steps(block: string, index = 0): { args: (address: string) => string[]; script: string[] } {
  const command = consoleCommands(block)[index]!;
  const lines = block.split('\n');
  const from = lines.findIndex(
    (line) => line.startsWith('$ ') && line.includes(command.command.slice(0, 40)),
  );
  const script: string[] = [];
  for (const line of lines.slice(from + 1)) {
    if (line.startsWith('$ ')) break;
    if (line.startsWith('    ') && script.length === 0 && !line.trim().startsWith('{')) continue; // a continuation
    script.push(line);
  }
  return { args: (address) => argv(command.command, address), script };
}

describe('the grpcurl sessions of README.md and docs/, replayed', () => {
  let server: ServerProcess;
  let caller: LockCaller;

  beforeAll(async () => {
    server = await startServerProcess([]);
    caller = new LockCaller(server.address);
  });
  afterAll(async () => {
    caller?.close();
    await server?.kill('SIGTERM');
  });

  /** Types and waits as the script says; `during` runs once the first answer has come. */
  async function replay(
    args: string[],
    script: string[],
    during: () => Promise<void> = async () => {},
  ): Promise<{ stdout: string; exited: Promise<number | null> }> {
    const session = interactiveGrpcurl(args);
    let expected: string[] = [];
    let answered = 0;
    const settle = async (): Promise<void> => {
      const shown = objects(expected.join('\n'));
      expected = [];
      if (shown.length === 0) return;
      answered += shown.length;
      await vi.waitFor(
        () =>
          expect(objects(session.stdout).slice(0, answered).sort()).toEqual(
            [...objects(session.stdout).slice(0, answered - shown.length), ...shown].sort(),
          ),
        { timeout: 10_000 },
      );
      if (answered === shown.length) await during();
    };
    try {
      for (const line of script) {
        if (/^\{".*\}$/.test(line)) {
          await settle();
          session.type(JSON.parse(line));
        } else if (line === '^D') {
          await settle();
          session.endInput();
        } else expected.push(line);
      }
      await settle();
      if (script.includes('^D')) expect(await session.exited).toBe(0);
      return { stdout: session.stdout, exited: session.exited };
    } finally {
      if (script.includes('^D')) session.kill();
      else session.endInput();
    }
  }

  it.each([
    ['README.md', 'readme-acquire'],
    ['docs/grpcurl.md', 'grpcurl-acquire'],
  ])('%s %s: a lock typed on stdin, held until Ctrl-D, others queued meanwhile', async (file, name) => {
    const { args, script } = steps(checkedBlock(file, name));
    await replay(args(server.address), script, async () => {
      const waiter = caller.open({ name: 'grpcurl/demo' });
      expect(await waiter.queued()).toBe(1);
      void waiter.acquired().then(() => waiter.release());
    });
  });

  it('docs/grpcurl.md grpcurl-list: the services, and the description shown', async () => {
    const [list, describeService] = consoleCommands(checkedBlock('docs/grpcurl.md', 'grpcurl-list'));
    const services = await grpcurl(argv(list!.command, server.address));
    expect(services.trim().split('\n').sort()).toEqual(list!.output.filter(Boolean));
    const described = (await grpcurl(argv(describeService!.command, server.address)))
      .split('\n')
      .map((l) => l.trim());
    for (const line of describeService!.output.filter((l) => l && !l.includes('...')))
      expect(described, line).toContain(line.trim());
  });

  it('docs/grpcurl.md grpcurl-try-lock: refused while grpcurl/demo is held, in the words shown', async () => {
    const [tryLock] = consoleCommands(checkedBlock('docs/grpcurl.md', 'grpcurl-try-lock'));
    const holder = caller.open({ name: 'grpcurl/demo' });
    await holder.acquired();
    try {
      const failed = grpcurl(argv(tryLock!.command, server.address));
      const error = (await failed.then(
        () => undefined,
        (e: unknown) => e,
      )) as { stderr: string } | undefined;
      expect(error?.stderr.trim().split('\n')).toEqual(tryLock!.output.filter(Boolean));
    } finally {
      await holder.release();
    }
  });

  it('docs/grpcurl.md grpcurl-session: two locks on one Session stream, released one by one', async () => {
    const { args, script } = steps(checkedBlock('docs/grpcurl.md', 'grpcurl-session'));
    await replay(args(server.address), [...script, '^D']);
  });

  it('docs/elections.md grpcurl-election: observe, campaign, ask for the leader, resign', async () => {
    const block = checkedBlock('docs/elections.md', 'grpcurl-election');
    const [observe, campaign, leader] = consoleCommands(block);
    expect([observe, campaign, leader].map((c) => c!.command.split('/').at(-1))).toEqual([
      'Observe',
      'Campaign',
      'Leader',
    ]);
    const observer = interactiveGrpcurl(argv(observe!.command, server.address));
    const candidate = interactiveGrpcurl(argv(campaign!.command, server.address));
    try {
      await vi.waitFor(() => expect(objects(observer.stdout)).toEqual(objects(observe!.output.join('\n'))));
      for (const line of campaign!.typed) candidate.type(JSON.parse(line));
      await vi.waitFor(() => expect(objects(candidate.stdout)).toEqual(objects(campaign!.output.join('\n'))));
      const [, term] = /"term": "(\d+)"/.exec(candidate.stdout)!;
      const answer = JSON.parse(await grpcurl(argv(leader!.command, server.address))) as {
        leader: { term: string; value: string };
      };
      expect(answer.leader.term).toBe(term);
      const typedValue = (JSON.parse(campaign!.typed[0]!) as { start: { value: string } }).start.value;
      expect(answer.leader.value).toBe(typedValue);
      candidate.endInput();
      await candidate.waitFor(/"resigned": \{\}/);
      await observer.waitFor(new RegExp(`"vacant": \\{\\s*"afterTerm": "${term}"`));
    } finally {
      candidate.kill();
      observer.kill();
    }
  });
});
