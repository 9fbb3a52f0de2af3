import { status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import type { DescribeLockResponse } from '../../src/gen/lockstream/v1/lockstream.js';
import { LockMode, type LockRpc, nextReceipt, type RequestStream } from '../support/lock-caller.js';
import { useConformanceServer, type BackendUnderTest } from './conformance-server.js';

/**
 * Downgrade (a WRITE hold becomes a READ hold in one step), on both RPCs: the hold keeps its
 * place and token, nobody is granted in between, readers that waited only for it are granted,
 * writers behind it keep waiting; nothing is upgraded.
 */
export function describeDowngradeConformance(backendName: string, backend: BackendUnderTest): void {
  for (const rpc of ['acquire', 'session'] as const) describeOver(backendName, backend, rpc);
}

function downgrade(stream: RequestStream): void {
  stream.send({ kind: { $case: 'downgrade', value: {} } });
}

/** Each request's [owner, mode, token], holders then waiters. */
function queue(state: DescribeLockResponse): { holders: unknown[]; waiters: unknown[] } {
  const row = (info: DescribeLockResponse['holders'][number]): unknown => [
    info.owner,
    info.mode,
    info.fencingToken,
  ];
  return { holders: state.holders.map(row), waiters: state.waiters.map(row) };
}

/** One hold as the client saw it: from its grant's arrival to when it stopped (or downgraded). */
interface Interval {
  readonly client: number;
  readonly mode: 'read' | 'write';
  readonly token: bigint;
  readonly start: number;
  readonly end: number;
}

function describeOver(backendName: string, backend: BackendUnderTest, rpc: LockRpc): void {
  describe(`downgrade on the ${backendName} back end, over ${rpc === 'acquire' ? 'Acquire' : 'Session'}`, () => {
    const { ctx, open } = useConformanceServer(backend, rpc);

    if (backend.replaces === false) {
      it('refuses a downgrade with UNIMPLEMENTED where the back end cannot replace a node atomically', async () => {
        const writer = open({ name: 'no-multi', mode: LockMode.WRITE });
        await writer.acquired();
        downgrade(writer);
        expect(await writer.outcome).toMatchObject({
          code: status.UNIMPLEMENTED,
          details: expect.stringMatching(/multi.*--zookeeper-client protocol/),
        });
        expect((await ctx.caller.describe('no-multi')).holders).toEqual([]);
      });
      return;
    }

    it('turns a WRITE hold into a READ hold in its place: same token, readers behind it granted, a writer behind kept waiting', async () => {
      const writer = open({ name: 'downgraded', mode: LockMode.WRITE, owner: 'writer' });
      const token = await writer.acquired();
      const reader = open({ name: 'downgraded', mode: LockMode.READ, owner: 'reader' });
      await reader.queued();
      const nextWriter = open({ name: 'downgraded', mode: LockMode.WRITE, owner: 'next-writer' });
      await nextWriter.queued();
      const lateReader = open({ name: 'downgraded', mode: LockMode.READ, owner: 'late-reader' });
      await lateReader.queued();

      downgrade(writer);
      await writer.receipt('downgraded');
      const readerToken = await reader.acquired();
      const state = queue(await ctx.caller.describe('downgraded'));
      expect(state.holders).toEqual([
        ['writer', LockMode.READ, token],
        ['reader', LockMode.READ, readerToken],
      ]);
      expect(state.waiters).toEqual([
        ['next-writer', LockMode.WRITE, expect.any(BigInt)],
        ['late-reader', LockMode.READ, expect.any(BigInt)],
      ]);
      expect(await ctx.caller.checkToken('downgraded', token)).toBe(true);
      // Downgrading again is answered again; the hold stays as it is.
      downgrade(writer);
      await writer.receipt('downgraded', 1);
      expect(nextWriter.isAcquired || lateReader.isAcquired).toBe(false);

      await writer.release();
      expect(nextWriter.isAcquired).toBe(false);
      await reader.release();
      expect(await nextWriter.acquired()).toBeGreaterThan(readerToken > token ? readerToken : token);
      expect(await ctx.caller.checkToken('downgraded', token)).toBe(false);
      await nextWriter.release();
      await lateReader.acquired();
      await lateReader.release();
    });

    it('keeps a writer right behind the downgraded hold waiting until the hold is released', async () => {
      const first = open({ name: 'behind', mode: LockMode.WRITE });
      const token = await first.acquired();
      const second = open({ name: 'behind', mode: LockMode.WRITE });
      await second.queued();
      downgrade(first);
      await first.receipt('downgraded');
      // The writer was woken by the old node's deletion: it must see the READ node in its place.
      const reader = open({ name: 'behind', mode: LockMode.READ });
      await reader.queued();
      expect(second.isAcquired).toBe(false);
      expect(queue(await ctx.caller.describe('behind')).holders).toEqual([['', LockMode.READ, token]]);
      const released = nextReceipt();
      await first.release();
      expect(await second.acquired()).toBeGreaterThan(token);
      expect(await second.receipt('acquired')).toBeGreaterThan(released);
      await second.release();
      await reader.acquired();
      await reader.release();
    });

    it('refuses a downgrade before `acquired`, or of a MUTEX or READ hold (nothing is upgraded), with FAILED_PRECONDITION', async () => {
      const holder = open({ name: 'refused', mode: LockMode.WRITE });
      await holder.acquired();
      const early = open({ name: 'refused', mode: LockMode.WRITE });
      await early.queued();
      downgrade(early);
      expect(await early.outcome).toMatchObject({
        code: status.FAILED_PRECONDITION,
        details: expect.stringMatching(/downgrade was sent before `acquired`/),
      });
      await holder.release();

      for (const mode of [LockMode.MUTEX, LockMode.READ]) {
        const held = open({ name: `refused-${mode}`, mode });
        await held.acquired();
        downgrade(held);
        expect(await held.outcome).toMatchObject({
          code: status.FAILED_PRECONDITION,
          details: expect.stringMatching(/only a WRITE hold can be downgraded, and nothing is upgraded/),
        });
        expect((await ctx.caller.describe(`refused-${mode}`)).holders).toEqual([]);
      }
    });

    it('keeps a revocation across a downgrade: the READ hold is asked, and taken away at the deadline it was told', async () => {
      const writer = open({ name: 'revoked-downgrade', mode: LockMode.WRITE });
      const token = await writer.acquired();
      // The revocation and the downgrade race: whichever is first, the other finds the node.
      const asked = ctx.caller.revoke('revoked-downgrade', 'rotate', 0.5);
      downgrade(writer);
      expect(await asked).toBe(1);
      await writer.receipt('downgraded');
      await writer.receipt('revokeRequested');
      expect(await writer.outcome).toMatchObject({
        code: status.ABORTED,
        details: expect.stringMatching(/revoked and not released in time: rotate/),
      });
      const next = open({ name: 'revoked-downgrade', mode: LockMode.WRITE });
      expect(await next.acquired()).toBeGreaterThan(token);
      await next.release();
    });

    it('never lets a writer overlap anyone, through writers, readers and downgrades at once', async () => {
      const intervals: Interval[] = [];
      const client = async (id: number): Promise<void> => {
        for (let round = 0; round < 6; round += 1) {
          const kind = (id + round) % 3; // 0: write, 1: read, 2: write then downgrade
          const stream = open({ name: 'mixed', mode: kind === 1 ? LockMode.READ : LockMode.WRITE });
          const token = await stream.acquired();
          const start = await stream.receipt('acquired');
          let mode: Interval['mode'] = kind === 1 ? 'read' : 'write';
          let from = start;
          await new Promise((resolve) => setImmediate(resolve));
          if (kind === 2) {
            // A writer stops writing when it asks to downgrade: from then on it only reads.
            const asked = nextReceipt();
            intervals.push({ client: id, mode, token, start: from, end: asked });
            downgrade(stream);
            await stream.receipt('downgraded');
            mode = 'read';
            from = asked;
            await new Promise((resolve) => setImmediate(resolve));
          }
          intervals.push({ client: id, mode, token, start: from, end: nextReceipt() });
          expect((await stream.release()).code).toBe(status.OK);
        }
      };
      await Promise.all(Array.from({ length: 8 }, (_, id) => client(id)));
      expect(intervals.length).toBe(8 * 6 + Math.floor((8 * 6) / 3));
      for (const a of intervals) {
        for (const b of intervals) {
          if (a === b || a.end <= b.start || b.end <= a.start) continue;
          if (a.mode === 'write' || b.mode === 'write') {
            throw new Error(
              `overlap: ${JSON.stringify([a, b], (_k, v: unknown) => (typeof v === 'bigint' ? `${v}` : v))}`,
            );
          }
        }
        // Fencing: a writer's token exceeds every token held before it was granted.
        if (a.mode !== 'write') continue;
        for (const b of intervals)
          if (b.end <= a.start && b.token !== a.token) expect(a.token).toBeGreaterThan(b.token);
      }
    });
  });
}
