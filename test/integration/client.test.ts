import { createServer, type AddressInfo } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  LockClient,
  LockClientClosedError,
  LockClientError,
  LockLostError,
  LockTimeoutError,
  Status,
  type Lock,
  type LockClientOptions,
} from '../../src/client/index.js';
import {
  LockServiceClient,
  LockServiceService,
  type AcquireRequest,
  type AcquireResponse,
} from '../../src/gen/lockstream/v1/lockstream.js';
import { loadConfig } from '../../src/server/config.js';
import { startServer, type RunningServer } from '../../src/server/main.js';
import { MemoryStore } from '../../src/server/stores/memory/memory-store.js';
import { deferred } from '../support/lock-caller.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';
import { TcpProxyProcess } from '../support/tcp-proxy-process.js';

function embeddedStore(server: RunningServer): MemoryStore {
  if (!(server.store instanceof MemoryStore)) throw new Error('INVARIANT: not the embedded store');
  return server.store;
}

/** Resolves with the signal's reason once it aborts. */
function reasonOf(signal: AbortSignal): Promise<unknown> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve(signal.reason);
    else signal.addEventListener('abort', () => resolve(signal.reason), { once: true });
  });
}

/** `127.0.0.1:port` where nothing listens: connections to it are refused. */
async function refusingAddress(): Promise<string> {
  const free = createServer();
  await new Promise<void>((resolve) => free.listen(0, '127.0.0.1', resolve));
  const { port } = free.address() as AddressInfo;
  await new Promise((resolve) => free.close(resolve));
  return `127.0.0.1:${port}`;
}

/** Starts `acquire` and resolves once the server reports the request queued, with `ahead`. */
async function queue(
  client: LockClient,
  name: string,
  options: Parameters<LockClient['acquire']>[1] = {},
): Promise<{ ahead: number; lock: Promise<Lock> }> {
  const queued = deferred<number>();
  const lock = client.acquire(name, { ...options, onQueued: (ahead) => queued.resolve(ahead) });
  lock.catch(() => {});
  const ahead = await Promise.race([
    queued.promise,
    lock.then(() => {
      throw new Error(`"${name}" was granted instead of queued`);
    }),
  ]);
  return { ahead, lock };
}

// Every case runs on both ways the SDK can carry a lock: a request on the client's Session
// stream (the default), and an Acquire stream per lock (streamPerLock, for older servers).
for (const transport of ['session', 'acquire'] as const) {
  const newClient = (address: string | string[], options: LockClientOptions = {}): LockClient =>
    new LockClient(address, { ...options, streamPerLock: transport === 'acquire' });
  describe(`the TypeScript client against a lockstream server (${transport})`, () => {
    let server: RunningServer;
    let client: LockClient;

    beforeEach(async () => {
      server = await startServer(loadConfig({}, ['--port', '0']), pino({ level: 'silent' }));
      client = newClient(`127.0.0.1:${server.port}`);
    });

    afterEach(async () => {
      client.close();
      await server.stop();
    });

    it('acquires with a bigint token, queues the next caller, and hands over on release', async () => {
      const lock = await client.acquire('billing/invoice-42', {
        mode: 'write',
        waitTimeout: 5_000,
        owner: 'invoicer',
      });
      expect(typeof lock.token).toBe('bigint');
      expect(lock).toMatchObject({ name: 'billing/invoice-42', mode: 'write' });
      const next = await queue(client, 'billing/invoice-42', { mode: 'read' });
      expect(next.ahead).toBe(1);
      await lock.release();
      await lock.release(); // idempotent
      const reader = await next.lock;
      expect(reader.token).toBeGreaterThan(lock.token);
      expect(lock.lost.aborted).toBe(false);
      await reader.release();
    });

    it('releases on scope exit with `await using`', async () => {
      {
        await using lock = await client.acquire('scoped');
        expect(await client.tryAcquire('scoped')).toBeNull();
        expect(lock.lost.aborted).toBe(false);
      }
      const again = await client.tryAcquire('scoped');
      expect(again).not.toBeNull();
      await again?.release();
    });

    it('withLock runs the callback under the lock, returns its result and always releases', async () => {
      const result = await client.withLock('with', {}, async (signal, lock) => {
        expect(signal).toBe(lock.lost);
        expect(await client.tryAcquire('with')).toBeNull();
        return 42;
      });
      expect(result).toBe(42);
      const failure = new Error('the work failed');
      await expect(
        client.withLock('with', {}, () => {
          throw failure;
        }),
      ).rejects.toBe(failure);
      const free = await client.tryAcquire('with');
      expect(free).not.toBeNull();
      await free?.release();
    });

    it('tryAcquire returns null on a held lock without leaving anything queued', async () => {
      const holder = await client.acquire('try');
      expect(await client.tryAcquire('try', { mode: 'read' })).toBeNull();
      // Had the try left a request behind, this waiter would have two ahead.
      expect((await queue(client, 'try')).ahead).toBe(1);
      await holder.release();
    });

    it('rejects with LockTimeoutError naming the lock once waitTimeout passes, leaving the queue', async () => {
      const holder = await client.acquire('slow');
      const impatient = client.acquire('slow', { waitTimeout: 150 });
      await expect(impatient).rejects.toBeInstanceOf(LockTimeoutError);
      await expect(impatient).rejects.toMatchObject({
        code: Status.DEADLINE_EXCEEDED,
        lockName: 'slow',
        message: expect.stringMatching(/"slow".*150 ms/),
      });
      expect((await queue(client, 'slow')).ahead).toBe(1);
      await holder.release();
    });

    it('leaves the queue cleanly when the signal aborts while waiting, rejecting with its reason', async () => {
      const holder = await client.acquire('abort');
      const controller = new AbortController();
      const waiting = await queue(client, 'abort', { signal: controller.signal });
      expect(waiting.ahead).toBe(1);
      const behind = await queue(client, 'abort');
      expect(behind.ahead).toBe(2);
      const reason = new Error('the caller gave up');
      controller.abort(reason);
      await expect(waiting.lock).rejects.toBe(reason);
      await holder.release();
      const next = await behind.lock;
      expect(next.token).toBeGreaterThan(holder.token);
      await next.release();
    });

    it('withdraws hundreds of waits that share one signal, with one listener on it', async () => {
      const holder = await client.acquire('shared-signal');
      const controller = new AbortController();
      const warnings: Error[] = [];
      const onWarning = (warning: Error): number => warnings.push(warning);
      process.on('warning', onWarning);
      try {
        const waits = await Promise.all(
          Array.from({ length: 500 }, () => queue(client, 'shared-signal', { signal: controller.signal })),
        );
        const reason = new Error('the caller gave up on all of them');
        controller.abort(reason);
        for (const wait of waits) await expect(wait.lock).rejects.toBe(reason);
        await holder.release();
        expect(await client.tryAcquire('shared-signal')).not.toBeNull();
        expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
      } finally {
        process.off('warning', onWarning);
      }
    });

    it('rejects calls on a closed client with LockClientClosedError (CANCELLED)', async () => {
      const closed = newClient(`127.0.0.1:${server.port}`);
      closed.close();
      for (const call of [closed.acquire('after-close'), closed.tryAcquire('after-close')]) {
        const error: unknown = await call.catch((e: unknown) => e);
        expect(error).toBeInstanceOf(LockClientClosedError);
        expect(error).toMatchObject({
          code: Status.CANCELLED,
          message: expect.stringMatching(/"after-close".*closed/),
        });
      }
    });

    it('rejects the inspection calls of a closed client with CANCELLED too', async () => {
      const closed = newClient(`127.0.0.1:${server.port}`);
      closed.close();
      const refused = {
        name: 'LockClientClosedError',
        code: Status.CANCELLED,
        message: expect.stringMatching(/closed/),
      };
      await expect(closed.describe('after-close')).rejects.toMatchObject(refused);
      await expect(closed.list()).rejects.toMatchObject(refused);
      await expect(closed.checkToken('after-close', 1n)).rejects.toMatchObject(refused);
      await expect(closed.revoke('after-close')).rejects.toMatchObject(refused);
      await expect(closed.watch('after-close').next()).rejects.toMatchObject(refused);
    });

    it('close() gives up what the client holds and waits for: `lost` fires, the wait rejects with LockClientClosedError, the next waiter is granted', async () => {
      const closing = newClient(`127.0.0.1:${server.port}`);
      const held = await closing.acquire('closing/held');
      const lost = reasonOf(held.lost);
      const blocker = await client.acquire('closing/blocked');
      const waiting = await queue(closing, 'closing/blocked');
      const next = await queue(client, 'closing/held');
      closing.close();
      expect(await lost).toMatchObject({ name: 'LockLostError', lockName: 'closing/held' });
      await expect(waiting.lock).rejects.toBeInstanceOf(LockClientClosedError);
      await expect(waiting.lock).rejects.toMatchObject({
        code: Status.CANCELLED,
        message: expect.stringMatching(/"closing\/blocked".*closed/),
      });
      await expect(held.release()).rejects.toBe(await lost);
      const taken = await next.lock;
      expect(taken.token).toBeGreaterThan(held.token);
      await taken.release();
      await blocker.release();
    });

    it('rejects at once when the signal has already aborted', async () => {
      await expect(client.acquire('x', { signal: AbortSignal.abort(new Error('no')) })).rejects.toThrow('no');
    });

    it('reports a malformed request as LockClientError with INVALID_ARGUMENT and the reason', async () => {
      const failure = client.acquire('bad\nname');
      await expect(failure).rejects.toBeInstanceOf(LockClientError);
      await expect(failure).rejects.toMatchObject({
        code: Status.INVALID_ARGUMENT,
        message: expect.stringMatching(/control character U\+000A/),
      });
      await expect(client.acquire('x', { mode: 'exclusive' as 'write' })).rejects.toThrow(/mode must be/);
      await expect(client.acquire('x', { waitTimeout: -1 })).rejects.toThrow(/waitTimeout/);
    });

    it('fails a 10 KiB name, a 5 KiB value and other bad arguments alone: another lock of the client stays held', async () => {
      const kept = await client.acquire('kept', { owner: 'keeper' });
      const refusals: Array<[Promise<unknown>, string]> = [
        [
          client.acquire('n'.repeat(10_240)),
          'invalid lock name: name is 10240 bytes of UTF-8; the limit is 512',
        ],
        [
          client.acquire('valued', { value: Buffer.alloc(5 * 1024) }),
          'value is 5120 bytes; the limit is 1024',
        ],
        [
          client.acquireAll(Array.from({ length: 17 }, (_, i) => `set/${i}`)),
          'locks names 17 locks: a multi-lock takes 2 to 16',
        ],
        [client.withLock('o'.repeat(513), {}, () => 'never run'), 'invalid lock name: name is 513 bytes'],
      ];
      for (const [refusal, details] of refusals) {
        await expect(refusal).rejects.toMatchObject({
          name: 'LockClientError',
          code: Status.INVALID_ARGUMENT,
          details: expect.stringContaining(details),
        });
      }
      // The message shows the start of a long name once, not all of it.
      const long = await client.acquire('n'.repeat(10_240)).catch((error: unknown) => error);
      expect((long as Error).message).toBe(
        `INVALID_ARGUMENT: lock "${'n'.repeat(64)}…" (10240 bytes): invalid lock name: name is 10240 bytes of UTF-8; the limit is 512`,
      );
      expect(kept.lost.aborted).toBe(false);
      expect(kept.inDoubt).toBe(false);
      expect((await client.describe('kept')).holders.map((h) => [h.owner, h.token])).toEqual([
        ['keeper', kept.token],
      ]);
      await kept.release();
      expect(await client.checkToken('kept', kept.token)).toBe(false);
    });

    it('fires `lost` with LockLostError (ABORTED) when the server loses the lock, and release() reports it', async () => {
      const lock = await client.acquire('fragile');
      const lost = reasonOf(lock.lost);
      embeddedStore(server).expireSession();
      const reason = await lost;
      expect(reason).toBeInstanceOf(LockLostError);
      expect(reason).toMatchObject({
        code: Status.ABORTED,
        message: expect.stringMatching(/"fragile" was lost/),
      });
      await expect(lock.release()).rejects.toBe(reason);
      await expect(lock[Symbol.asyncDispose]()).resolves.toBeUndefined();
    });

    it('tells the holder when its lock is in doubt and confirmed again, and whenConfirmed waits for it', async () => {
      const events: string[] = [];
      const inDoubt = deferred();
      const lock = await client.acquire('doubtful', {
        onInDoubt: () => {
          events.push('in doubt');
          inDoubt.resolve();
        },
        onConfirmed: () => events.push('confirmed'),
      });
      await expect(lock.whenConfirmed()).resolves.toBeUndefined();
      embeddedStore(server).setSessionConfirmed(false);
      await inDoubt.promise;
      expect(lock.inDoubt).toBe(true);
      const confirmed = lock.whenConfirmed().then(() => events.push('whenConfirmed resolved'));
      embeddedStore(server).setSessionConfirmed(true);
      await confirmed;
      expect(events).toEqual(['in doubt', 'confirmed', 'whenConfirmed resolved']);
      expect(lock.inDoubt).toBe(false);
      await lock.release();
    });

    it('rejects whenConfirmed with LockLostError when the doubt ends in a loss', async () => {
      const inDoubt = deferred();
      const lock = await client.acquire('doomed-doubt', { onInDoubt: () => inDoubt.resolve() });
      embeddedStore(server).setSessionConfirmed(false);
      await inDoubt.promise;
      const confirmation = lock.whenConfirmed();
      embeddedStore(server).expireSession();
      await expect(confirmation).rejects.toBeInstanceOf(LockLostError);
      await expect(lock.whenConfirmed()).rejects.toBeInstanceOf(LockLostError);
    });

    it('describes, lists, checks tokens and revokes, and the holder hears of the revocation', async () => {
      const asked = deferred<{ reason: string; forceAt: Date | undefined }>();
      const lock = await client.acquire('ops/report', {
        owner: 'reporter',
        onRevokeRequested: asked.resolve,
      });
      const waiting = await queue(client, 'ops/report', { mode: 'read', owner: 'reader' });
      const described = await client.describe('ops/report');
      expect(described.holders.map((h) => [h.mode, h.owner, h.token])).toEqual([
        ['mutex', 'reporter', lock.token],
      ]);
      expect(described.waiters.map((w) => [w.mode, w.owner])).toEqual([['read', 'reader']]);
      expect(await client.list({ prefix: 'ops/' })).toEqual({
        locks: [{ name: 'ops/report', holders: 1, waiters: 1, heldMode: 'mutex', limit: 0, usedWeight: 0 }],
        nextPageToken: '',
      });
      expect(await client.checkToken('ops/report', lock.token)).toBe(true);

      expect(await client.revoke('ops/report', { reason: 'shutting the host down' })).toBe(1);
      expect(await asked.promise).toEqual({ reason: 'shutting the host down', forceAt: undefined });
      expect(lock.revokeRequested).toEqual({ reason: 'shutting the host down', forceAt: undefined });
      await lock.release();
      const reader = await waiting.lock;
      expect(await client.checkToken('ops/report', lock.token)).toBe(false);
      await reader.release();
      await expect(client.describe('')).rejects.toMatchObject({
        name: 'LockClientError',
        code: Status.INVALID_ARGUMENT,
      });
    });

    it('watches a lock: its state now and after every change, ending cleanly on abort or when the loop is left', async () => {
      const stop = new AbortController();
      const states = client.watch('ops/watched', { signal: stop.signal });
      /** The next state `accept` takes; states in between (changes close together) are passed over. */
      const next = async (accept: (holders: string[], waiters: string[]) => boolean): Promise<void> => {
        for (;;) {
          const { value, done } = await states.next();
          if (done) throw new Error('the watch ended early');
          if (
            accept(
              value.holders.map((h) => h.owner),
              value.waiters.map((w) => w.owner),
            )
          )
            return;
        }
      };
      await next((holders, waiters) => holders.length === 0 && waiters.length === 0);
      const lock = await client.acquire('ops/watched', { owner: 'first' });
      await next((holders) => holders.join() === 'first');
      const waiting = await queue(client, 'ops/watched', { owner: 'second' });
      await next((holders, waiters) => holders.join() === 'first' && waiters.join() === 'second');
      await lock.release();
      const second = await waiting.lock;
      await next((holders, waiters) => holders.join() === 'second' && waiters.length === 0);
      stop.abort();
      expect(await states.next()).toEqual({ value: undefined, done: true });

      // Leaving the loop early ends the watch too; a bad name fails it at once.
      for await (const state of client.watch('ops/watched')) {
        expect(state.holders.map((h) => h.owner)).toEqual(['second']);
        break;
      }
      await second.release();
      await expect(client.watch('').next()).rejects.toMatchObject({
        name: 'LockClientError',
        code: Status.INVALID_ARGUMENT,
      });
    });

    it('publishes a value with acquire and setValue, in order; describe and watch show it from the moment it resolves', async () => {
      const lock = await client.acquire('leader/api', { value: '10.0.0.1:8080' });
      const valueOf = async (): Promise<string> =>
        (await client.describe('leader/api')).holders[0]!.value.toString();
      expect(await valueOf()).toBe('10.0.0.1:8080');
      const watched: string[] = [];
      const watchStarted = deferred();
      const watching = (async () => {
        for await (const state of client.watch('leader/api')) {
          watched.push(state.holders[0]?.value.toString() ?? '');
          watchStarted.resolve();
          if (watched.at(-1) === 'last') return;
        }
      })();
      await watchStarted.promise;
      // Many at once: each resolves once its value is published, and the last one sent wins.
      const sets = Array.from({ length: 5 }, (_, i) => lock.setValue(`10.0.0.${i + 2}:8080`));
      const order: number[] = [];
      await Promise.all(sets.map((set, i) => set.then(() => order.push(i))));
      expect(order).toEqual([0, 1, 2, 3, 4]);
      expect(await valueOf()).toBe('10.0.0.6:8080');
      await lock.setValue(Uint8Array.of(0x6c, 0x61, 0x73, 0x74)); // "last", as bytes
      await watching;
      expect(watched[0]).toBe('10.0.0.1:8080');
      expect(watched.at(-1)).toBe('last');
      // Checked before anything is sent: the lock is not disturbed.
      await expect(lock.setValue('x'.repeat(1025))).rejects.toMatchObject({
        code: Status.INVALID_ARGUMENT,
        message: expect.stringMatching(/value is 1025 bytes; the limit is 1024/),
      });
      await expect(client.acquire('leader/other', { value: Buffer.alloc(2048) })).rejects.toThrow(
        /value is 2048 bytes; the limit is 1024/,
      );
      expect(await valueOf()).toBe('last');
      await lock.release();
      await expect(lock.setValue('after')).rejects.toMatchObject({ code: Status.FAILED_PRECONDITION });
    });

    it('downgrades a write lock to a read lock: same token, a queued reader granted, a queued writer kept waiting', async () => {
      const writer = await client.acquire('reports/cache', { mode: 'write' });
      const reader = await queue(client, 'reports/cache', { mode: 'read' });
      await writer.downgrade();
      expect(writer.mode).toBe('read');
      const read = await reader.lock;
      const nextWriter = await queue(client, 'reports/cache', { mode: 'write' });
      expect(nextWriter.ahead).toBe(2);
      const described = await client.describe('reports/cache');
      expect(described.holders.map((h) => [h.mode, h.token])).toEqual([
        ['read', writer.token],
        ['read', read.token],
      ]);
      await writer.downgrade(); // again: nothing changes
      await writer.release();
      await read.release();
      const next = await nextWriter.lock;
      expect(next.token).toBeGreaterThan(read.token);
      // Nothing is upgraded, and a mutex is not a write lock: refused without asking the server.
      await expect(next.downgrade()).resolves.toBeUndefined();
      await next.release();
      const mutex = await client.acquire('reports/cache');
      await expect(mutex.downgrade()).rejects.toMatchObject({
        code: Status.FAILED_PRECONDITION,
        message: expect.stringMatching(/only a write lock can be downgraded, not a mutex lock/),
      });
      expect(mutex.lost.aborted).toBe(false);
      await mutex.release();
    });

    it('takes a semaphore: as many holders as their weights fit the limit, in order, each with its token; describe shows the capacity', async () => {
      const first = await client.acquire('render/slots', { limit: 3, weight: 2, owner: 'first' });
      expect(first.mode).toBe('semaphore');
      const heavy = await queue(client, 'render/slots', { limit: 3, weight: 2, owner: 'heavy' });
      // Fits beside `first`, but waits behind `heavy`: no overtaking.
      const light = await queue(client, 'render/slots', { limit: 3, owner: 'light' });
      expect([heavy.ahead, light.ahead]).toEqual([1, 2]);
      const described = await client.describe('render/slots');
      expect([described.limit, described.usedWeight]).toEqual([3, 2]);
      expect(described.waiters.map((w) => [w.owner, w.mode, w.weight])).toEqual([
        ['heavy', 'semaphore', 2],
        ['light', 'semaphore', 1],
      ]);
      await first.release();
      const [second, third] = await Promise.all([heavy.lock, light.lock]);
      expect(third.token).toBeGreaterThan(second.token);
      expect(second.token).toBeGreaterThan(first.token);
      expect((await client.list({ prefix: 'render/' })).locks).toMatchObject([
        { name: 'render/slots', holders: 2, heldMode: 'semaphore', limit: 3, usedWeight: 3 },
      ]);
      // Another limit for the same name is refused by the server, naming both.
      await expect(client.acquire('render/slots', { limit: 5 })).rejects.toMatchObject({
        code: Status.FAILED_PRECONDITION,
        message: expect.stringMatching(
          /a semaphore of limit 3; this request asks for a semaphore of limit 5/,
        ),
      });
      await expect(client.acquire('render/slots', { limit: 3, weight: 1.5 })).rejects.toThrow(
        /weight must be a whole number, not 1.5/,
      );
      await second.release();
      await third.release();
    });

    it('takes several locks at once with acquireAll: all or none, a token per lock, one release', async () => {
      const from = await client.acquire('accounts/1', { owner: 'other transfer' });
      const to = await client.acquire('accounts/2', { owner: 'audit' });
      const queued = deferred<number>();
      const set = client.acquireAll(
        ['accounts/1', { name: 'accounts/2', mode: 'write' }, { name: 'ledger', mode: 'read' }],
        { owner: 'transfer', onQueued: (ahead) => queued.resolve(ahead) },
      );
      expect(await queued.promise).toBeGreaterThan(0);
      await from.release();
      // accounts/1 is free, but the set waits for accounts/2: nothing of it is held alone.
      expect((await client.describe('accounts/2')).waiters.map((w) => w.owner)).toEqual(['transfer']);
      await to.release();
      const lock = await set;
      expect(lock.name).toBe('accounts/1 + accounts/2 + ledger');
      expect(lock.tokens.map((t) => t.name)).toEqual(['accounts/1', 'accounts/2', 'ledger']);
      expect(lock.token).toBe(lock.tokens[0]!.token);
      for (const { name, token } of lock.tokens) {
        expect(token).toBeGreaterThan(to.token > from.token ? to.token : from.token);
        expect(await client.checkToken(name, token)).toBe(true);
      }
      expect((await client.describe('ledger')).holders.map((h) => [h.owner, h.mode])).toEqual([
        ['transfer', 'read'],
      ]);
      await lock.release();
      expect((await client.describe('accounts/1')).holders).toEqual([]);
      // A try takes the set only if every lock is free now; a bad set is refused.
      const held = await client.acquire('accounts/2');
      await expect(
        client.acquireAll(['accounts/1', 'accounts/2'], { waitTimeout: 0 }),
      ).rejects.toBeInstanceOf(LockTimeoutError);
      await held.release();
      await expect(client.acquireAll(['accounts/1', 'accounts/1'])).rejects.toMatchObject({
        code: Status.INVALID_ARGUMENT,
        message: expect.stringMatching(/locks\[1\]: "accounts\/1" is named twice/),
      });
      expect((await client.describe('accounts/1')).waiters).toEqual([]);
    });

    it('withLock rejects with LockLostError when the lock was lost during the work, even if the work succeeded', async () => {
      const outcome = client.withLock('lost-work', {}, async (signal) => {
        embeddedStore(server).expireSession();
        await reasonOf(signal);
        return 'done anyway';
      });
      await expect(outcome).rejects.toBeInstanceOf(LockLostError);
    });
  });

  describe(`the TypeScript client when the server or the network fails (${transport})`, () => {
    it('puts the lock in doubt, then fires `lost` with UNAVAILABLE, when the server process dies', async () => {
      const server = await startServerProcess([]);
      const client = newClient(server.address, { resumeGraceMs: 1_000 });
      try {
        const events: string[] = [];
        const lock = await client.acquire('doomed', { onInDoubt: () => events.push('in doubt') });
        const lost = reasonOf(lock.lost);
        await server.kill('SIGKILL');
        expect(await lost).toMatchObject({
          name: 'LockLostError',
          code: Status.UNAVAILABLE,
          lockName: 'doomed',
          message: expect.stringMatching(/could not be resumed within its 1000 ms grace/),
        });
        expect(events).toEqual(['in doubt']);
      } finally {
        client.close();
      }
    });

    it('notices a silent network through keepalive and fires `lost`', async () => {
      const server = await startServer(loadConfig({}, ['--port', '0']), pino({ level: 'silent' }));
      const proxy = await TcpProxyProcess.start(`127.0.0.1:${server.port}`);
      const client = newClient(proxy.address, {
        keepaliveTimeMs: 300,
        keepaliveTimeoutMs: 300,
        heartbeatIntervalMs: 0,
        resumeGraceMs: 0,
      });
      try {
        const lock = await client.acquire('silent');
        const lost = reasonOf(lock.lost);
        // Nothing comes back from the server any more, and the connection is not closed either.
        await proxy.holdReplies();
        expect(await lost).toMatchObject({ name: 'LockLostError', code: Status.UNAVAILABLE });
      } finally {
        client.close();
        await proxy.close();
        await server.stop();
      }
    });

    it('with default options, a holder cut off for good is lost before the server can free the lock: the grace is counted from the last message heard', async () => {
      // The server's grants as it logs them: `time` is its clock (this process's) at the grant.
      const grants: Array<{ lock: string; token: string; time: number }> = [];
      const log = new Writable({
        write(chunk: Buffer, _encoding, done) {
          for (const line of chunk.toString().split('\n')) {
            if (line === '') continue;
            const entry = JSON.parse(line) as { msg: string; lock: string; token: string; time: number };
            if (entry.msg === 'granted') grants.push(entry);
          }
          done();
        },
      });
      const server = await startServer(loadConfig({}, ['--port', '0']), pino({ level: 'debug' }, log));
      const proxy = await TcpProxyProcess.start(`127.0.0.1:${server.port}`);
      const holder = newClient(proxy.address);
      const other = newClient(`127.0.0.1:${server.port}`);
      try {
        const events: string[] = [];
        const lock = await holder.acquire('cut-for-good', { onInDoubt: () => events.push('in doubt') });
        const lost = reasonOf(lock.lost).then((reason) => ({ reason, at: Date.now() }));
        const next = await queue(other, 'cut-for-good');
        // Both sides see the connection end at once: the server starts the grace now, so this
        // is the case with the least room (the client's margin, less the way of the last message).
        await proxy.close();
        const { reason, at: lostAt } = await lost;
        const granted = await next.lock;
        const grant = grants.find((g) => g.lock === 'cut-for-good' && g.token === String(granted.token));
        // Lost at the latest 4 s (the 5 s grace less its 1 s margin) after the last heartbeat,
        // which is at most 1 s old, while the server frees the lock 5 s after the cut: at least
        // the margin before, less what late timers on a busy machine take.
        expect(grant!.time - lostAt).toBeGreaterThan(500);
        expect(reason).toMatchObject({
          name: 'LockLostError',
          code: Status.UNAVAILABLE,
          message: expect.stringMatching(/grace \(counted from the last message from the server\)/),
        });
        expect(events).toEqual(['in doubt']);
        await granted.release();
      } finally {
        holder.close();
        other.close();
        await proxy.close();
        await server.stop();
      }
    });

    it('gives up with UNAVAILABLE after its retries when no server answers', async () => {
      const server = await startServer(loadConfig({}, ['--port', '0']), pino({ level: 'silent' }));
      const address = `127.0.0.1:${server.port}`;
      await server.stop();
      const client = newClient(address, { unavailableRetries: 1 });
      try {
        await expect(client.acquire('nobody-home')).rejects.toMatchObject({ code: Status.UNAVAILABLE });
      } finally {
        client.close();
      }
    });
  });

  describe(`the TypeScript client resuming its requests after a broken stream (${transport})`, () => {
    let server: RunningServer;
    let proxy: TcpProxyProcess;
    const clients: LockClient[] = [];
    /** A client of its own connection through the proxy (grpc-js would otherwise share one). */
    const throughProxy = (options: ConstructorParameters<typeof LockClient>[1] = {}): LockClient => {
      const client = newClient(proxy.address, {
        ...options,
        channelOptions: { 'grpc.use_local_subchannel_pool': 1 },
      });
      clients.push(client);
      return client;
    };
    const direct = (): LockClient => {
      const client = newClient(`127.0.0.1:${server.port}`, {
        channelOptions: { 'grpc.use_local_subchannel_pool': 1 },
      });
      clients.push(client);
      return client;
    };

    beforeEach(async () => {
      server = await startServer(loadConfig({}, ['--port', '0']), pino({ level: 'silent' }));
      proxy = await TcpProxyProcess.start(`127.0.0.1:${server.port}`);
    });

    afterEach(async () => {
      for (const client of clients.splice(0)) client.close();
      await proxy.close();
      await server.stop();
    });

    it('rides out a cut connection: in doubt, then confirmed with the same token, and nobody else holds the lock meanwhile', async () => {
      const events: string[] = [];
      const confirmed = deferred();
      const lock = await throughProxy({ resumeGraceMs: 10_000 }).acquire('blip', {
        onInDoubt: () => events.push('in doubt'),
        onConfirmed: () => {
          events.push('confirmed');
          confirmed.resolve();
        },
      });
      const other = await queue(direct(), 'blip');
      expect(other.ahead).toBe(1);
      let otherGranted = false;
      void other.lock.then(() => (otherGranted = true));
      await proxy.severAll();
      await confirmed.promise;
      expect(events).toEqual(['in doubt', 'confirmed']);
      expect(lock.inDoubt).toBe(false);
      expect(lock.lost.aborted).toBe(false);
      expect(otherGranted).toBe(false);
      await lock.release();
      const otherLock = await other.lock;
      expect(otherLock.token).toBeGreaterThan(lock.token);
      await otherLock.release();
      expect(server.sessions.size).toBe(0);
    });

    it('publishes a value set while the connection is cut once the request is resumed', async () => {
      const confirmed = deferred();
      const lock = await throughProxy({ resumeGraceMs: 10_000 }).acquire('blip/value', {
        value: 'before',
        onConfirmed: () => confirmed.resolve(),
      });
      await proxy.severAll();
      // Sent on the broken stream (or held back while resuming): sent again once resumed.
      await lock.setValue('after');
      await confirmed.promise;
      const described = await direct().describe('blip/value');
      expect(described.holders.map((h) => [h.token, h.value.toString()])).toEqual([[lock.token, 'after']]);
      await lock.release();
      expect(server.sessions.size).toBe(0);
    });

    it("keeps a waiter's place in the queue across a cut connection", async () => {
      const holder = await direct().acquire('line');
      const first = await queue(throughProxy({ resumeGraceMs: 10_000 }), 'line');
      const second = await queue(direct(), 'line');
      expect([first.ahead, second.ahead]).toEqual([1, 2]);
      await proxy.severAll();
      await holder.release();
      const firstLock = await first.lock;
      let secondGranted = false;
      void second.lock.then(() => (secondGranted = true));
      await firstLock.whenConfirmed();
      expect(secondGranted).toBe(false);
      await firstLock.release();
      expect((await second.lock).token).toBeGreaterThan(firstLock.token);
    });

    it('fires `lost` once the grace passes without a resume; the server frees the lock only after the holder was told it is in doubt', async () => {
      const events: Array<{ what: string; at: number }> = [];
      const lock = await throughProxy({ resumeGraceMs: 1_000, heartbeatIntervalMs: 200 }).acquire('cut-off', {
        onInDoubt: () => events.push({ what: 'in doubt', at: performance.now() }),
      });
      const other = await queue(direct(), 'cut-off');
      const lost = reasonOf(lock.lost);
      // Nothing passes either way and nothing is closed: only the heartbeats can tell.
      await proxy.freeze();
      const otherLock = await other.lock;
      events.push({ what: 'granted to the other client', at: performance.now() });
      expect(await lost).toMatchObject({
        name: 'LockLostError',
        code: Status.UNAVAILABLE,
        message: expect.stringMatching(/no message from the server for 600 ms/),
      });
      expect(events.map((e) => e.what)).toEqual(['in doubt', 'granted to the other client']);
      expect(otherLock.token).toBeGreaterThan(lock.token);
      await otherLock.release();
    });

    it('keeps a quiet lock alive through a proxy that cuts idle connections, with heartbeats', async () => {
      // No HTTP/2 pings within the test: only the lockstream heartbeats make traffic.
      const quiet = { keepaliveTimeMs: 60_000, keepaliveTimeoutMs: 60_000 };
      await proxy.cutIdleAfter(1_000);
      const events: string[] = [];
      const withHeartbeats = await throughProxy({ ...quiet, heartbeatIntervalMs: 200 }).acquire('busy', {
        onInDoubt: () => events.push('in doubt'),
      });
      const without = await throughProxy({ ...quiet, heartbeatIntervalMs: 0, resumeGraceMs: 0 }).acquire(
        'idle',
      );
      // The stream without heartbeats is cut after a second of silence...
      expect(await reasonOf(without.lost)).toMatchObject({ name: 'LockLostError', code: Status.UNAVAILABLE });
      // ...while the one with heartbeats, as old, was never cut.
      expect(events).toEqual([]);
      expect(withHeartbeats.lost.aborted).toBe(false);
      await withHeartbeats.release();
    });
  });

  describe(`the TypeScript client failing over between endpoints (${transport})`, () => {
    // One server in its own process behind two (or three) proxies: endpoints that reach the same
    // instance, so a resume through any of them finds the session, as it will on any instance of
    // one back end once instances take sessions over.
    let server: ServerProcess;
    const cleanups: Array<() => unknown> = [];
    const proxies = async (count: number): Promise<TcpProxyProcess[]> => {
      const started = await Promise.all(
        Array.from({ length: count }, () => TcpProxyProcess.start(server.address)),
      );
      for (const proxy of started) cleanups.push(() => proxy.close());
      return started;
    };
    const clientOf = (address: string | string[]): LockClient => {
      const client = newClient(address);
      cleanups.push(() => client.close());
      return client;
    };

    beforeAll(async () => {
      server = await startServerProcess([]);
    });

    afterAll(async () => {
      await server.kill('SIGTERM');
    });

    afterEach(async () => {
      for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    });

    /** Holds `name` through the first of `endpoints`, with a second client queued behind it. */
    async function holdWithWaiter(
      endpoints: TcpProxyProcess[],
      name: string,
    ): Promise<{
      client: LockClient;
      lock: Lock;
      events: string[];
      inDoubt: Promise<void>;
      confirmed: Promise<void>;
      next: { ahead: number; lock: Promise<Lock> };
      nextGranted: () => boolean;
    }> {
      const events: string[] = [];
      const inDoubt = deferred();
      const confirmed = deferred();
      const client = clientOf(endpoints.map((proxy) => proxy.address));
      const lock = await client.acquire(name, {
        onInDoubt: () => {
          events.push('in doubt');
          inDoubt.resolve();
        },
        onConfirmed: () => {
          events.push('confirmed');
          confirmed.resolve();
        },
      });
      const next = await queue(clientOf(server.address), name);
      let granted = false;
      void next.lock.then(() => (granted = true));
      return {
        client,
        lock,
        events,
        inDoubt: inDoubt.promise,
        confirmed: confirmed.promise,
        next,
        nextGranted: () => granted,
      };
    }

    it('resumes through the second endpoint when the first one dies: in doubt, then confirmed with the same token; nobody else is granted the lock meanwhile', async () => {
      const [first, second] = await proxies(2);
      const held = await holdWithWaiter([first!, second!], `failover/killed/${transport}`);
      expect(held.next.ahead).toBe(1);
      // Its connections reset and its port refuses: only the second endpoint reaches the server.
      await first!.close();
      await held.confirmed;
      expect(held.events).toEqual(['in doubt', 'confirmed']);
      expect(held.lock.lost.aborted).toBe(false);
      expect(held.nextGranted()).toBe(false);
      // The release goes through the resumed stream: the server took it as the holder's.
      await held.lock.release();
      const nextLock = await held.next.lock;
      expect(nextLock.token).toBeGreaterThan(held.lock.token);
      await nextLock.release();
      const record = server.logs
        .filter((line) => line['lock'] === `failover/killed/${transport}` && line['msg'] === 'granted')
        .map((line) => line['token']);
      expect(new Set(record)).toEqual(new Set([String(held.lock.token), String(nextLock.token)]));
    });

    it('resumes past a frozen endpoint too: a silent first endpoint, and a frozen second one that gets no more than its share of the grace (default options)', async () => {
      const [first, second, third] = await proxies(3);
      const name = `failover/frozen/${transport}`;
      const held = await holdWithWaiter([first!, second!, third!], name);
      // No byte passes and nothing closes: the first endpoint is noticed by its silence, the
      // second (connections accepted, never answered) by the resume attempt's deadline.
      await Promise.all([first!.freeze(), second!.freeze()]);
      await held.inDoubt;
      // A request made while the client fails over waits for the session, then goes through.
      const during = held.client.acquire(`${name}/during`);
      await held.confirmed;
      expect(held.events).toEqual(['in doubt', 'confirmed']);
      expect(held.lock.lost.aborted).toBe(false);
      expect(held.nextGranted()).toBe(false);
      const duringLock = await during;
      await duringLock.release();
      await held.lock.release();
      expect((await held.next.lock).token).toBeGreaterThan(held.lock.token);
      await (await held.next.lock).release();
    });

    it('loses the lock once every endpoint has been down past the grace, with UNAVAILABLE', async () => {
      const [first, second] = await proxies(2);
      const held = await holdWithWaiter([first!, second!], `failover/all-down/${transport}`);
      const lost = reasonOf(held.lock.lost);
      await Promise.all([first!.close(), second!.close()]);
      expect(await lost).toMatchObject({
        name: 'LockLostError',
        code: Status.UNAVAILABLE,
        message: expect.stringMatching(
          /could not be resumed on any of its 2 endpoints within its 5000 ms grace \(counted from the last message from the server\)/,
        ),
      });
      expect(held.events).toEqual(['in doubt']);
      await (await held.next.lock).release();
    });

    it('sends the first acquire, and the inspection calls, to the second endpoint when the first refuses connections', async () => {
      const [proxy] = await proxies(1);
      const client = clientOf([await refusingAddress(), proxy!.address]);
      const name = `failover/refused/${transport}`;
      const lock = await client.acquire(name);
      expect((await client.describe(name)).holders.map((h) => h.token)).toEqual([lock.token]);
      await lock.release();
    });
  });
}

describe('the TypeScript client on one Session stream', () => {
  const cleanups: Array<() => unknown> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** The value of a gauge on the server's /metrics. */
  async function gauge(httpPort: number, name: string): Promise<number> {
    const text = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name} `));
    return Number(line?.slice(line.lastIndexOf(' ') + 1));
  }

  it('carries every lock of one client on one Session stream, and closes it once idle', async () => {
    const server = await startServer(
      loadConfig({}, ['--port', '0', '--http-port', '0']),
      pino({ level: 'silent' }),
    );
    cleanups.push(() => server.stop());
    const client = new LockClient(`127.0.0.1:${server.port}`, { sessionIdleMs: 50 });
    cleanups.push(() => client.close());
    const locks = await Promise.all(['s/a', 's/b', 's/c'].map((name) => client.acquire(name)));
    const waiting = await queue(client, 's/a');
    expect(waiting.ahead).toBe(1);
    expect(await gauge(server.httpPort!, 'lockstream_session_streams')).toBe(1);
    expect(await gauge(server.httpPort!, 'lockstream_acquire_streams')).toBe(0);
    await locks[0]!.release();
    const next = await waiting.lock;
    expect(next.token).toBeGreaterThan(locks[0]!.token);
    await Promise.all([next, locks[1]!, locks[2]!].map((lock) => lock.release()));
    // Nothing held: the stream closes after sessionIdleMs, and the next acquire opens another.
    await server.whenIdle();
    expect(await gauge(server.httpPort!, 'lockstream_session_streams')).toBe(0);
    const again = await client.acquire('s/a');
    expect(await gauge(server.httpPort!, 'lockstream_session_streams')).toBe(1);
    await again.release();
  });

  it('falls back to an Acquire stream per lock when the server has no Session RPC', async () => {
    const server = await startServer(loadConfig({}, ['--port', '0']), pino({ level: 'silent' }));
    cleanups.push(() => server.stop());
    // An older server: it implements Acquire (by passing it on to a real one), not Session.
    const upstream = new LockServiceClient(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
    cleanups.push(() => upstream.close());
    const older = new grpc.Server();
    older.addService(LockServiceService, {
      acquire: (call: grpc.ServerDuplexStream<AcquireRequest, AcquireResponse>) => {
        const forwarded = upstream.acquire();
        call.on('data', (message: AcquireRequest) => forwarded.write(message));
        call.on('end', () => forwarded.end());
        call.on('cancelled', () => forwarded.cancel());
        forwarded.on('data', (message: AcquireResponse) => call.write(message));
        forwarded.on('error', () => {});
        forwarded.on('status', (status: grpc.StatusObject) => {
          if (status.code === grpc.status.OK) call.end();
          else call.emit('error', status);
        });
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      older.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) =>
        error ? reject(error) : resolve(bound),
      ),
    );
    cleanups.push(() => older.forceShutdown());
    const client = new LockClient(`127.0.0.1:${port}`);
    cleanups.push(() => client.close());
    const lock = await client.acquire('older/a');
    expect(lock.token).toBeGreaterThan(0n);
    const other = await queue(client, 'older/a');
    expect(other.ahead).toBe(1);
    await lock.release();
    await (await other.lock).release();
    await server.whenIdle();
  });
});

describe('the TypeScript client checks its arguments before sending', () => {
  // No server listens here: a request that were sent would fail with UNAVAILABLE, not with the
  // INVALID_ARGUMENT of the check.
  let client: LockClient;
  beforeEach(async () => {
    const free = createServer();
    await new Promise<void>((resolve) => free.listen(0, '127.0.0.1', resolve));
    const { port } = free.address() as AddressInfo;
    await new Promise((resolve) => free.close(resolve));
    client = new LockClient(`127.0.0.1:${port}`, { unavailableRetries: 0 });
  });
  afterEach(() => client.close());

  it.each<[string, (client: LockClient) => Promise<unknown>, string]>([
    ['an empty name', (c) => c.acquire(''), 'invalid lock name: name is empty'],
    [
      'a name over 512 bytes of UTF-8',
      (c) => c.acquire('é'.repeat(257)),
      'invalid lock name: name is 514 bytes of UTF-8; the limit is 512',
    ],
    [
      'a control character in a name',
      (c) => c.acquire('bel\u0007'),
      'invalid lock name: name contains control character U+0007 at index 3',
    ],
    [
      'a lone surrogate in a name (not encodable as UTF-8)',
      (c) => c.acquire('half\ud800'),
      'invalid lock name: name contains lone surrogate U+D800 at index 4',
    ],
    [
      'U+FFFD in a name',
      (c) => c.tryAcquire('x\ufffd'),
      'invalid lock name: name contains invalid UTF-8 (U+FFFD) at index 1',
    ],
    ['a name that is no string', (c) => c.acquire(42 as unknown as string), 'expected a string, not number'],
    [
      'an owner over 256 bytes',
      (c) => c.acquire('x', { owner: 'o'.repeat(257) }),
      'owner is 257 bytes of UTF-8; the limit is 256',
    ],
    [
      'a control character in an owner',
      (c) => c.acquire('x', { owner: 'a\nb' }),
      'owner contains a control character',
    ],
    [
      'a value over 1024 bytes',
      (c) => c.acquire('x', { value: 'v'.repeat(1025) }),
      'value is 1025 bytes; the limit is 1024',
    ],
    [
      'a negative waitTimeout',
      (c) => c.acquire('x', { waitTimeout: -1 }),
      'waitTimeout must be a number of milliseconds from 0 to 2147483647, not -1',
    ],
    [
      'a waitTimeout past the longest',
      (c) => c.acquire('x', { waitTimeout: 2 ** 31 }),
      'waitTimeout must be a number of milliseconds from 0 to 2147483647, not 2147483648',
    ],
    ['a NaN waitTimeout', (c) => c.acquire('x', { waitTimeout: Number.NaN }), 'not NaN'],
    ['an unknown mode', (c) => c.acquire('x', { mode: 'exclusive' as 'write' }), 'mode must be'],
    [
      'a semaphore without a limit',
      (c) => c.acquire('x', { mode: 'semaphore' }),
      'limit is required in semaphore mode: 1 to 1000000',
    ],
    [
      'a semaphore limit over the largest',
      (c) => c.acquire('x', { limit: 1_000_001 }),
      'limit 1000001 is out of range: expected 1 to 1000000',
    ],
    ['a fractional limit', (c) => c.acquire('x', { limit: 1.5 }), 'limit must be a whole number, not 1.5'],
    [
      'a weight over the limit',
      (c) => c.acquire('x', { limit: 3, weight: 4 }),
      'weight 4 is more than the limit 3: the request could never be granted',
    ],
    [
      'a weight of 0',
      (c) => c.acquire('x', { limit: 3, weight: 0 }),
      'weight 0 is out of range: expected 1 to the limit (3)',
    ],
    [
      'a limit on a lock mode',
      (c) => c.acquire('x', { mode: 'write', limit: 3 }),
      'limit applies to semaphore mode only; this request asks for write mode',
    ],
    [
      'a multi-lock of one lock',
      (c) => c.acquireAll(['a']),
      'locks names 1 lock: a multi-lock takes 2 to 16',
    ],
    [
      'a multi-lock naming a lock twice',
      (c) => c.acquireAll(['a', 'b', 'a']),
      'locks[2]: "a" is named twice in one multi-lock',
    ],
    ['a bad name in a multi-lock', (c) => c.acquireAll(['a', '']), 'invalid lock name: name is empty'],
    ['describe with a bad name', (c) => c.describe('n'.repeat(600)), 'name is 600 bytes'],
    ['watch with a bad name', (c) => c.watch('').next(), 'invalid lock name: name is empty'],
    ['checkToken with a bad name', (c) => c.checkToken('a\tb', 1n), 'control character U+0009'],
    [
      'revoke with a reason over 256 bytes',
      (c) => c.revoke('x', { reason: 'r'.repeat(257) }),
      'reason is 257 bytes of UTF-8; the limit is 256',
    ],
    [
      'revoke with a negative forceAfter',
      (c) => c.revoke('x', { forceAfter: -5 }),
      'forceAfter must be a number of milliseconds from 0 to 2147483647, not -5',
    ],
  ])('refuses %s with INVALID_ARGUMENT', async (_, call, details) => {
    await expect(call(client)).rejects.toMatchObject({
      name: 'LockClientError',
      code: Status.INVALID_ARGUMENT,
      details: expect.stringContaining(details),
    });
  });

  it.each<[string, unknown, string]>([
    ['no endpoint', [], 'addresses is empty: give at least one "host:port"'],
    [
      'an endpoint without a port',
      ['127.0.0.1:1', 'locks.internal'],
      'addresses[1] "locks.internal" is not "host:port"',
    ],
    [
      'a port out of range',
      ['127.0.0.1:65536'],
      'addresses[0] "127.0.0.1:65536": port 65536 is not 1 to 65535',
    ],
    ['a port of 0', ['[::1]:0'], 'addresses[0] "[::1]:0": port 0 is not 1 to 65535'],
    [
      'a gRPC target (scheme) in it',
      ['dns:///locks:50051'],
      'addresses[0] "dns:///locks:50051" is not "host:port"',
    ],
    [
      'the same endpoint twice',
      ['a.example:1', 'b.example:1', 'A.example:1'],
      'addresses[2] "A.example:1" is the same endpoint as addresses[0]',
    ],
    ['an endpoint that is no string', ['a:1', 7], 'addresses[1] must be a string "host:port", not number'],
  ])('refuses a list of endpoints with %s: INVALID_ARGUMENT', (_, addresses, details) => {
    expect(() => new LockClient(addresses as string[])).toThrow(
      expect.objectContaining({
        name: 'LockClientError',
        code: Status.INVALID_ARGUMENT,
        details: expect.stringContaining(details),
      }),
    );
  });

  it('does send a valid request: it fails with UNAVAILABLE here', async () => {
    await expect(client.acquire('x', { limit: 3, weight: 3, waitTimeout: 0 })).rejects.toMatchObject({
      code: Status.UNAVAILABLE,
    });
  });
});
