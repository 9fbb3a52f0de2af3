import { status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import type { DescribeLockResponse } from '../../src/gen/lockstream/v1/lockstream.js';
import { parseNodeRecord } from '../../src/server/engine/lock-nodes.js';
import type { LockRpc, RequestStream } from '../support/lock-caller.js';
import { useConformanceServer, type BackendUnderTest } from './conformance-server.js';

/**
 * Holder values (AcquireStart.value, `set_value`), on both RPCs: what a holder publishes is what
 * DescribeLock and WatchLock show, from the moment `value_set` says so, and a value never costs
 * another client its lock or a revocation its record.
 */
export function describeValueConformance(backendName: string, backend: BackendUnderTest): void {
  for (const rpc of ['acquire', 'session'] as const) describeOver(backendName, backend, rpc);
}

const text = (value: string): Buffer => Buffer.from(value, 'utf8');

/** Each request's [owner, value as text], in queue order. */
function published(state: DescribeLockResponse): Array<[string, string]> {
  return [...state.holders, ...state.waiters].map((info) => [info.owner, info.value.toString('utf8')]);
}

function setValue(stream: RequestStream, value: Buffer): void {
  stream.send({ kind: { $case: 'setValue', value: { value } } });
}

function describeOver(backendName: string, backend: BackendUnderTest, rpc: LockRpc): void {
  describe(`holder values on the ${backendName} back end, over ${rpc === 'acquire' ? 'Acquire' : 'Session'}`, () => {
    const { ctx, open, track } = useConformanceServer(backend, rpc);

    it('shows the value from `start` in DescribeLock and WatchLock, for holders and waiters alike', async () => {
      const watch = ctx.caller.watch('elected');
      const leader = open({ name: 'elected', owner: 'leader', value: text('10.0.0.1:8080') });
      await leader.acquired();
      const candidate = open({ name: 'elected', owner: 'candidate', value: text('10.0.0.2:8080') });
      await candidate.queued();
      const noValue = open({ name: 'elected', owner: 'quiet' });
      await noValue.queued();
      const expected: Array<[string, string]> = [
        ['leader', '10.0.0.1:8080'],
        ['candidate', '10.0.0.2:8080'],
        ['quiet', ''],
      ];
      expect(published(await ctx.caller.describe('elected'))).toEqual(expected);
      await watch.until((state) => JSON.stringify(published(state)) === JSON.stringify(expected));
      // Binary values come back byte for byte.
      const binary = Buffer.from([0, 255, 10, 13, 0x80]);
      const other = open({ name: 'binary', value: binary });
      await other.acquired();
      expect((await ctx.caller.describe('binary')).holders[0]!.value).toEqual(binary);
      watch.cancel();
      for (const stream of [leader, candidate, noValue, other]) await stream.release();
    });

    it('publishes `set_value` in order, each acknowledged by `value_set` once DescribeLock and WatchLock show it', async () => {
      const holder = open({ name: 'published', owner: 'holder', value: text('first') });
      await holder.acquired();
      const watch = ctx.caller.watch('published');
      await watch.until((state) => published(state)[0]?.[1] === 'first');

      setValue(holder, text('second'));
      await holder.receipt('valueSet');
      // Visible from the acknowledgement on, also to a WatchLock that only saw `first` (a value
      // is not a change of the queue: the watch follows the nodes too).
      expect(published(await ctx.caller.describe('published'))).toEqual([['holder', 'second']]);
      await watch.until((state) => published(state)[0]?.[1] === 'second');

      // Many at once: applied in the order sent, one acknowledgement each.
      for (let i = 0; i < 10; i += 1) setValue(holder, text(`burst-${i}`));
      await holder.receipt('valueSet', 10);
      expect(published(await ctx.caller.describe('published'))).toEqual([['holder', 'burst-9']]);
      // An empty value clears it.
      setValue(holder, Buffer.alloc(0));
      await holder.receipt('valueSet', 11);
      expect(published(await ctx.caller.describe('published'))).toEqual([['holder', '']]);
      watch.cancel();
      expect((await holder.release()).code).toBe(status.OK);
    });

    it('keeps a revocation and a value written at the same moment: neither write loses the other', async () => {
      const holder = open({ name: 'contended-record', value: text('v0') });
      const token = await holder.acquired();
      const writes: Promise<unknown>[] = [ctx.caller.revoke('contended-record', 'when you can')];
      for (let i = 1; i <= 20; i += 1) {
        setValue(holder, text(`v${i}`));
        if (i === 10) writes.push(ctx.caller.revoke('contended-record', 'again'));
      }
      await Promise.all([...writes, holder.receipt('valueSet', 19), holder.receipt('revokeRequested')]);
      expect(published(await ctx.caller.describe('contended-record'))[0]?.[1]).toBe('v20');
      // The revocation is in the holder's node beside the last value (the first of the two to
      // land stands), and it is the one the holder was told.
      const dir = ctx.server.engine.lockPath('contended-record');
      const [node] = await ctx.server.store.children(dir);
      const record = parseNodeRecord((await ctx.server.store.nodeData(`${dir}/${node}`))!.data);
      expect(Buffer.from(record.value ?? '', 'base64').toString('utf8')).toBe('v20');
      const told = holder.messages.flatMap((m) =>
        m.kind?.$case === 'revokeRequested' ? [m.kind.value.reason] : [],
      );
      expect(told).toEqual([record.revoke?.reason]);
      expect(['when you can', 'again']).toContain(record.revoke?.reason);
      expect(await ctx.caller.checkToken('contended-record', token)).toBe(true);
      expect((await holder.release()).code).toBe(status.OK);
    });

    it('refuses `set_value` before `acquired` with FAILED_PRECONDITION, leaving nothing queued', async () => {
      const holder = open({ name: 'not-yet' });
      await holder.acquired();
      const waiter = open({ name: 'not-yet', value: text('mine') });
      await waiter.queued();
      setValue(waiter, text('too early'));
      expect(await waiter.outcome).toMatchObject({
        code: status.FAILED_PRECONDITION,
        details: expect.stringMatching(/set_value was sent before `acquired`/),
      });
      expect((await ctx.caller.describe('not-yet')).waiters).toEqual([]);
      // The holder was not disturbed.
      expect(holder.messages.map((m) => m.kind?.$case)).toEqual(['acquired']);
      await holder.release();
    });

    it('refuses values over 1024 bytes with INVALID_ARGUMENT naming the field, and nothing is queued or kept', async () => {
      const bystander = open({ name: 'sized', value: text('b') });
      const token = await bystander.acquired();
      const tooBig = open({ name: 'sized-2', value: Buffer.alloc(1025, 1) });
      expect(await tooBig.outcome).toMatchObject({
        code: status.INVALID_ARGUMENT,
        details: expect.stringMatching(/value is 1025 bytes; the limit is 1024/),
      });
      expect((await ctx.caller.describe('sized-2')).waiters).toEqual([]);
      // The largest value allowed is published whole.
      const largest = open({ name: 'sized-3', value: Buffer.alloc(1024, 7) });
      await largest.acquired();
      expect((await ctx.caller.describe('sized-3')).holders[0]!.value).toEqual(Buffer.alloc(1024, 7));
      // Too big in `set_value`: the request ends (its lock released); its old value stays until then.
      setValue(largest, Buffer.alloc(2000, 1));
      expect(await largest.outcome).toMatchObject({
        code: status.INVALID_ARGUMENT,
        details: expect.stringMatching(/value is 2000 bytes; the limit is 1024/),
      });
      expect((await ctx.caller.describe('sized-3')).holders).toEqual([]);
      expect(await ctx.caller.checkToken('sized', token)).toBe(true);
      expect(published(await ctx.caller.describe('sized'))).toEqual([['', 'b']]);
      await bystander.release();
    });

    it('publishes a resumed holder’s value after a broken stream, and keeps it with the lock', async () => {
      const holder = open({
        name: 'resumed-value',
        value: text('before'),
        resumeGrace: { seconds: 5n, nanos: 0 },
      });
      const token = await holder.acquired();
      const { token: resumeToken } = await holder.resumable();
      holder.cancel();
      await holder.outcome;
      const resumed = ctx.caller.resume(resumeToken);
      track(resumed);
      expect(await resumed.acquired()).toBe(token);
      expect(published(await ctx.caller.describe('resumed-value'))).toEqual([['', 'before']]);
      setValue(resumed, text('after'));
      await resumed.receipt('valueSet');
      expect(published(await ctx.caller.describe('resumed-value'))).toEqual([['', 'after']]);
      expect((await resumed.release()).code).toBe(status.OK);
    });
  });
}
