import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MemoryReclaimer } from '../../src/server/memory-reclaimer.js';

describe('MemoryReclaimer: one major collection once a burst of lock requests has settled', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('collects after the count grew or fell by the threshold and then held still, never while it moves or stays level', async () => {
    let requests = 0;
    const collect = vi.fn(() => Promise.resolve());
    const reclaimer = new MemoryReclaimer({
      requests: () => requests,
      logger: pino({ level: 'silent' }),
      intervalMs: 1_000,
      changedAtLeast: 1_000,
      collect,
    });
    const look = async (count: number): Promise<number> => {
      requests = count;
      await vi.advanceTimersByTimeAsync(1_000);
      return collect.mock.calls.length;
    };
    // Growing: no collection while it moves; a small change is not a burst.
    expect([await look(500), await look(1_500), await look(5_000), await look(20_000)]).toEqual([0, 0, 0, 0]);
    // Settled (within 1%): one collection, and none again while it stays level.
    expect([await look(20_100), await look(20_100), await look(20_100)]).toEqual([1, 1, 1]);
    // Released: falling, then settled near zero: one more.
    expect([await look(8_000), await look(10), await look(10), await look(10)]).toEqual([1, 1, 2, 2]);
    reclaimer.stop();
    expect(await look(50_000)).toBe(2);
  });
});
