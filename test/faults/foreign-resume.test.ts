import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { sha256 } from '../../src/server/security/access-policy.js';
import { faultFixture } from '../support/fault-fixture.js';
import { LockCaller, seconds, type RequestStream } from '../support/lock-caller.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import type { ServerProcess } from '../support/server-process.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

/*
 * A resume token is `<ZooKeeper session name>.<secret>`, and a token issued on another
 * instance's ZooKeeper session makes an instance take that session over. The name is no
 * secret (every token of the instance carries it, and ZooKeeper's ids are sequential): a
 * resume with a made-up secret, or with someone else's token, must change nothing anywhere,
 * on the instance it is sent to or on the one that owns the session.
 */

const TOKENS = { alice: 'alice-token-2c9e41', bob: 'bob-token-7d03fa', carol: 'carol-token-5b18c6' };
const POLICY = `
callers:
  - name: alice
    token_sha256: ${sha256(TOKENS.alice).toString('hex')}
    locks:
      - { prefix: shared/, modes: [mutex] }
  - name: bob
    token_sha256: ${sha256(TOKENS.bob).toString('hex')}
    locks:
      - { prefix: bob/, modes: [mutex] }
  - name: carol
    token_sha256: ${sha256(TOKENS.carol).toString('hex')}
    locks:
      - { prefix: shared/, modes: [mutex] }
`;

const TOOK_OVER = 'took over the store session of another lockstream instance';

let dir: string;
let policyFile: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'lockstream-foreign-resume-'));
  policyFile = join(dir, 'access.yaml');
  await writeFile(policyFile, POLICY);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('a resume of a session on another instance, by someone it does not belong to', () => {
  const fixture = faultFixture();
  const serve = (root: string): Promise<ServerProcess> =>
    fixture.serve([
      '--zookeeper',
      connectString,
      '--root',
      root,
      '--auth-file',
      policyFile,
      '--max-resume-grace',
      '60s',
    ]);
  /** A raw gRPC client that calls as `who` (its bearer token on every call). */
  const caller = (server: ServerProcess, who: keyof typeof TOKENS): LockCaller => {
    const bearer: grpc.Interceptor = (options, next) =>
      new grpc.InterceptingCall(next(options), {
        start: (metadata, listener, start) => {
          metadata.set('authorization', `Bearer ${TOKENS[who]}`);
          start(metadata, listener);
        },
      });
    const locks = new LockCaller(server.address, {
      interceptors: [bearer],
      'grpc.use_local_subchannel_pool': 1,
    });
    fixture.later(() => locks.close());
    return locks;
  };
  const ended = (stream: RequestStream): boolean => stream.endedAt !== undefined;

  it('a made-up secret, or the owner’s token under another identity, is refused as unknown; the owner’s instance, streams and locks are untouched, and nothing is taken over', async () => {
    const root = `/foreign-resume-${randomUUID()}`;
    const [first, second] = [await serve(root), await serve(root)];

    // Alice holds two locks through the first instance: one resumable, one without a grace.
    const alice = caller(first, 'alice');
    const resumable = alice.open({ name: 'shared/resumable', resumeGrace: seconds(30) });
    const plain = alice.open({ name: 'shared/plain' });
    const { token } = await resumable.resumable();
    const tokens = [await resumable.acquired(), await plain.acquired()];
    const sessionName = token.slice(0, token.indexOf('.'));
    expect(sessionName).toMatch(/^[0-9a-f]{16}$/);

    // Bob, on the second instance: (a) the session's name with a secret of his own making,
    // (b) Alice's real token, under his identity.
    const bob = caller(second, 'bob');
    const forged = bob.resume(`${sessionName}.${randomBytes(24).toString('base64url')}`);
    const forgedOutcome = await forged.outcome;
    const foreign = bob.resume(token);
    const foreignOutcome = await foreign.outcome;
    for (const outcome of [forgedOutcome, foreignOutcome]) {
      expect(grpc.status[outcome.code], outcome.details).toBe('NOT_FOUND');
      expect(outcome.details).toMatch(/no instance has it any more/);
      expect(outcome.requestEnded).toBe(true);
    }
    // Both get the answer a token of a session nobody has any more gets: they learn nothing.
    expect(foreignOutcome.details).toBe(forgedOutcome.details);

    // The second instance logged the end of both calls, and no takeover before them.
    await second.logged(
      (line) => line['msg'] === 'ended' && String(line['details']).includes('no instance has it'),
    );
    await expect
      .poll(() => second.logs.filter((line) => line['msg'] === 'ended').length)
      .toBeGreaterThanOrEqual(2);
    expect.soft(second.logs.filter((line) => line['msg'] === TOOK_OVER)).toEqual([]);

    // Carol, who may take shared/ locks, gets neither: both are still Alice's, with their tokens.
    const carol = caller(second, 'carol');
    for (const [i, name] of ['shared/resumable', 'shared/plain'].entries()) {
      const attempt = await carol.open({ name, waitTimeout: seconds(0) }).outcome;
      expect.soft(grpc.status[attempt.code], `${name}: ${attempt.details}`).toBe('DEADLINE_EXCEEDED');
      const described = await carol.describe(name);
      expect.soft(described.holders.map((holder) => holder.fencingToken)).toEqual([tokens[i]]);
    }

    // Alice's streams on the first instance never ended, were never in doubt, and release as usual.
    for (const stream of [resumable, plain]) {
      expect.soft(ended(stream)).toBe(false);
      expect.soft(stream.messages.map((message) => message.kind?.$case)).not.toContain('inDoubt');
    }
    const released = await plain.release();
    expect.soft(grpc.status[released.code], released.details).toBe('OK');
    expect.soft(plain.messages.map((message) => message.kind?.$case)).toContain('released');
    expect
      .soft(first.logs.filter((line) => String(line['msg']).includes('store session taken over')))
      .toEqual([]);

    // Alice herself, her stream broken, resumes on the second instance: that one takes it over.
    resumable.cancel();
    await resumable.outcome;
    const resumed = caller(second, 'alice').resume(token);
    expect(await resumed.acquired()).toBe(tokens[0]);
    await second.logged((line) => line['msg'] === TOOK_OVER);
    const outcome = await resumed.release();
    expect(grpc.status[outcome.code], outcome.details).toBe('OK');
  });
});
