import { randomUUID } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, inject, it } from 'vitest';
import { LockClient, type Lock } from '../../src/client/index.js';
import type { SessionRequest, SessionResponse } from '../../src/gen/lockstream/v1/lockstream.js';
import { faultFixture } from '../support/fault-fixture.js';
import { deferred, seconds, type CallOutcome } from '../support/lock-caller.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import type { ServerProcess } from '../support/server-process.js';
import { SessionDriver } from '../support/session-driver.js';
import { scaled } from '../support/timing.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

/*
 * A session's instance dies, and its token reaches two other instances at once (a client that
 * resumed on one, its connection broke, and it resumed on the next; or two copies of a client).
 * Both go for the dead instance's ZooKeeper session; one ends up with it. Whatever the other
 * says, it must not be `lockstream-request: ended` (nothing held any more): the session lives
 * on, with every lock, and its client must resume it again to find them.
 */

/**
 * Each round, a new instance is killed under a session and its token sent to two others at
 * once. Rounds go on until a resume has lost the takeover itself (its call ended without
 * `opened`) LOST_RACES times, which about a third of rounds do here; MAX_ROUNDS bounds them.
 */
const LOST_RACES = 2;
const MAX_ROUNDS = 24;
const LOCKS = 3;
/**
 * As LOST_RACES and MAX_ROUNDS, for the SDK's own resume, which goes first and loses the
 * takeover less often (in about one round in eight here).
 */
const SDK_LOST_RACES = 1;
const SDK_MAX_ROUNDS = 40;

describe('two instances given the same resume token at once', () => {
  const fixture = faultFixture();
  const serve = (root: string): Promise<ServerProcess> =>
    fixture.serve(['--zookeeper', connectString, '--root', root, '--max-resume-grace', '60s']);
  const { caller } = fixture;

  it(
    'the stream that loses never says the session ended, and the locks stay held throughout, on the instance that won',
    async () => {
      const root = `/takeover-race-${randomUUID()}`;
      const contenders = [await serve(root), await serve(root)];
      const callers = contenders.map(caller);
      const rival = callers[0]!;
      /** How every resuming stream that did not keep the session ended, over all rounds. */
      const ends: Array<CallOutcome & { round: number; opened: boolean }> = [];
      const lostRaces = (): number => ends.filter((end) => !end.opened).length;

      for (let round = 0; round < MAX_ROUNDS && lostRaces() < LOST_RACES; round++) {
        const victim = await serve(root);
        const names = Array.from({ length: LOCKS }, (_, i) => `round-${round}/lock-${i}`);
        const holder = SessionDriver.open(caller(victim).client, { resumeGrace: seconds(30) });
        const { token } = await holder.opened();
        names.forEach((name, i) => holder.acquire(i + 1, { name }));
        const tokens = await Promise.all(names.map((_, i) => holder.acquired(i + 1)));
        await victim.kill('SIGKILL');

        /** Nobody else gets any of the locks, and each is held with its token. */
        const stillHeld = async (when: string): Promise<void> => {
          for (const [i, name] of names.entries()) {
            const attempt = await rival.open({ name, waitTimeout: seconds(0) }).outcome;
            expect(grpc.status[attempt.code], `round ${round}, ${when}: ${name}: ${attempt.details}`).toBe(
              'DEADLINE_EXCEEDED',
            );
            const holders = (await rival.describe(name)).holders.map((h) => h.fencingToken);
            expect(holders, `round ${round}, ${when}: ${name}`).toEqual([tokens[i]]);
          }
          for (const server of contenders) expect(server.exitCode(), server.stderr()).toBeNull();
        };

        // The same token, to both at once.
        let streams = callers.map((c) => SessionDriver.resume(c.client, token));
        let attached: SessionDriver | undefined;
        for (let attempt = 0; attempt < 5 && attached === undefined; attempt++) {
          const settled = await Promise.all(
            streams.map((stream) =>
              stream.next(0, 'resumed').then(
                () => 'resumed' as const,
                () => 'ended' as const,
              ),
            ),
          );
          // Two that both resumed: the one taken over from ends (moved), the other keeps it.
          if (settled.every((s) => s === 'resumed')) await Promise.race(streams.map((s) => s.outcome));
          await stillHeld(`race ${attempt}`);
          for (const stream of streams) {
            const end = await Promise.race([stream.outcome, Promise.resolve(undefined)]);
            if (end === undefined) attached = stream;
          }
          for (const stream of streams) {
            if (stream === attached) continue;
            const end = await stream.outcome;
            ends.push({ ...end, round, opened: stream.kinds(0).includes('opened') });
            expect(end.requestEnded, `round ${round}: ${grpc.status[end.code]} ${end.details}`).toBe(false);
            expect(grpc.status[end.code], end.details).toBe('UNAVAILABLE');
          }
          // None kept it: resume again, on the next instance, as the SDK does.
          if (attached === undefined) streams = [SessionDriver.resume(callers[attempt % 2]!.client, token)];
        }
        expect(attached, `round ${round}: no stream kept the session`).toBeDefined();

        // The one that has it reported every lock as held, and releases them all.
        await stillHeld('after the race');
        for (const [i] of names.entries()) {
          expect(attached!.kinds(i + 1), `round ${round}`).toContain('acquired');
          attached!.release(i + 1);
        }
        for (const [i] of names.entries()) {
          expect((await attached!.ended(i + 1)).code, `round ${round}`).toBe(grpc.status.OK);
        }
        attached!.halfClose();
        expect((await attached!.outcome).code).toBe(grpc.status.OK);
      }
      // What the others were told, for the record.
      console.log(
        ends
          .map(({ round, opened, code, details, requestEnded }) =>
            [`round ${round}:`, opened ? 'resumed, then' : 'lost the takeover:', grpc.status[code], details]
              .concat(requestEnded ? ['(lockstream-request: ended)'] : [])
              .join(' '),
          )
          .join('\n'),
      );
      expect(lostRaces(), 'a resume lost the takeover itself in some round').toBeGreaterThanOrEqual(
        LOST_RACES,
      );
    },
    scaled(300_000),
  );

  it(
    'an SDK client whose instance dies while a copy of its token is resumed elsewhere keeps every lock, and is never told one was lost',
    async () => {
      const root = `/takeover-race-sdk-${randomUUID()}`;
      const [second, third] = [await serve(root), await serve(root)];
      const rival = caller(second);
      /** The SDK's resumes that lost the takeover, and how their calls ended. */
      const sdkLost: Array<{ round: number; status: grpc.StatusObject }> = [];
      for (let round = 0; round < SDK_MAX_ROUNDS && sdkLost.length < SDK_LOST_RACES; round++) {
        const victim = await serve(root);
        // The SDK's Session stream, its token read off the wire (the SDK does not show it), and
        // the moment it sends `resume`.
        const tokens: string[] = [];
        const resumeSent = deferred();
        const readToken: grpc.Interceptor = (options, next) => {
          let resuming = false;
          let opened = false;
          return new grpc.InterceptingCall(next(options), {
            start: (metadata, _listener, start) =>
              start(metadata, {
                onReceiveMessage: (message: SessionResponse, pass: (message: SessionResponse) => void) => {
                  if (message.kind?.$case === 'opened') {
                    opened = true;
                    tokens.push(message.kind.value.resumeToken);
                  }
                  pass(message);
                },
                onReceiveStatus: (status: grpc.StatusObject, pass: (status: grpc.StatusObject) => void) => {
                  // A resume of the SDK's that did not get its session (it lost the takeover).
                  if (resuming && !opened) sdkLost.push({ round, status });
                  pass(status);
                },
              }),
            sendMessage: (message: SessionRequest, send: (message: SessionRequest) => void) => {
              send(message);
              if (message.kind?.$case === 'resume') {
                resuming = true;
                resumeSent.resolve();
              }
            },
          });
        };
        const client = new LockClient([victim.address, second.address, third.address], {
          resumeGraceMs: 30_000,
          channelOptions: { interceptors: [readToken], 'grpc.use_local_subchannel_pool': 1 },
        });
        fixture.later(() => client.close());
        const names = Array.from({ length: LOCKS }, (_, i) => `sdk-round-${round}/lock-${i}`);
        const locks: Lock[] = [];
        for (const name of names) locks.push(await client.acquire(name));
        const token = tokens[0]!;
        expect(token).toBeDefined();

        // The instance dies; the SDK resumes on the next one, and as it does, a copy of its token
        // is resumed on the third: two takeovers at once.
        await victim.kill('SIGKILL');
        await resumeSent.promise;
        const copy = SessionDriver.resume(caller(third).client, token);
        // The copy's call ends once the SDK has the session (or lost the takeover to the SDK);
        // before the fix, the SDK could be told its locks were lost instead, and give up.
        const lostOne = new Promise<unknown>((resolve) => {
          for (const lock of locks) {
            lock.lost.addEventListener('abort', () => resolve(lock.lost.reason), { once: true });
          }
        });
        const copyEnd = await Promise.race([
          copy.outcome,
          lostOne.then((reason) => {
            throw new Error(`round ${round}: the SDK was told a lock was lost: ${String(reason)}`);
          }),
        ]);
        for (const server of [second, third]) expect(server.exitCode(), server.stderr()).toBeNull();
        console.log(
          `round ${round}: the copy ${copy.kinds(0).includes('opened') ? 'resumed, then' : 'lost the takeover:'} ${grpc.status[copyEnd.code]} ${copyEnd.details}`,
        );
        // The copy lost the race, or won it and then lost the session to the SDK's resume.
        expect
          .soft(copyEnd.requestEnded, `round ${round}: ${grpc.status[copyEnd.code]} ${copyEnd.details}`)
          .toBe(false);

        for (const [i, lock] of locks.entries()) {
          const attempt = await rival.open({ name: names[i]!, waitTimeout: seconds(0) }).outcome;
          expect(grpc.status[attempt.code], `round ${round}: ${names[i]}: ${attempt.details}`).toBe(
            'DEADLINE_EXCEEDED',
          );
          expect(lock.lost.aborted, `round ${round}: ${names[i]}: ${String(lock.lost.reason)}`).toBe(false);
          expect((await rival.describe(names[i]!)).holders.map((h) => h.fencingToken)).toEqual([lock.token]);
        }
        for (const lock of locks) await lock.release();
        for (const lock of locks) expect(lock.lost.aborted).toBe(false);
        for (const server of [second, third]) expect(server.exitCode(), server.stderr()).toBeNull();
        client.close();
      }
      for (const { round, status } of sdkLost) {
        const ended = status.metadata.get('lockstream-request').includes('ended');
        console.log(
          `round ${round}: the SDK's resume lost the takeover: ${grpc.status[status.code]} ${status.details}${ended ? ' (lockstream-request: ended)' : ''}`,
        );
      }
      expect(sdkLost.length, "the SDK's resume lost the takeover in some round").toBeGreaterThanOrEqual(
        SDK_LOST_RACES,
      );
    },
    scaled(300_000),
  );
});
