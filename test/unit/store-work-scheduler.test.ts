import { afterEach, describe, expect, it, vi } from 'vitest';
import { StoreWorkScheduler, WorkQueue } from '../../src/server/engine/store-work-scheduler.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('StoreWorkScheduler: at most `limit` pieces of store work at once, sessions served in turns', () => {
  it('starts up to the limit at once, then one per finished piece, in the order one session asked', () => {
    const scheduler = new StoreWorkScheduler(2);
    const session = new WorkQueue();
    const started: number[] = [];
    const done: Array<() => void> = [];
    for (let i = 0; i < 5; i += 1) {
      scheduler.run(session, (finish) => {
        started.push(i);
        done[i] = finish;
      });
    }
    expect([started, scheduler.running, scheduler.waiting]).toEqual([[0, 1], 2, 3]);
    done[1]!();
    done[1]!(); // a second call is ignored: it frees no second slot
    expect([started, scheduler.running, scheduler.waiting]).toEqual([[0, 1, 2], 2, 2]);
    done[0]!();
    done[2]!();
    expect([started, scheduler.running, scheduler.waiting]).toEqual([[0, 1, 2, 3, 4], 2, 0]);
    done[3]!();
    done[4]!();
    expect([scheduler.running, scheduler.waiting]).toEqual([0, 0]);
  });

  it('gives a session alone every slot, and at most a sixteenth while another is busy, until the other has been quiet for 100 ms', () => {
    vi.useFakeTimers({ toFake: ['performance'] });
    const scheduler = new StoreWorkScheduler(32);
    const flood = new WorkQueue();
    const other = new WorkQueue();
    const finishes: Array<() => void> = [];
    const piece = (finish: () => void): void => void finishes.push(finish);
    for (let i = 0; i < 100; i += 1) scheduler.run(flood, piece);
    expect(flood.running).toBe(32);
    scheduler.run(other, piece);
    finishes.shift()!(); // a slot frees: the other session's turn
    expect([flood.running, other.running]).toEqual([31, 1]);
    // While the other is busy, finished flood pieces are not replaced above the flood's share (2).
    for (let i = 0; i < 29; i += 1) finishes.shift()!();
    expect([flood.running, other.running, scheduler.running]).toEqual([2, 1, 3]);
    finishes.splice(finishes.indexOf(finishes.at(-1)!), 1)[0]!(); // the other's piece is done
    finishes.shift()!();
    expect(flood.running).toBe(2); // the other was busy just now
    vi.advanceTimersByTime(100);
    finishes.shift()!(); // the other has been quiet long enough: every slot again
    expect(flood.running).toBe(32);
  });

  it('serves a session that comes late in turn with one that flooded, not after its backlog', () => {
    const scheduler = new StoreWorkScheduler(1);
    const flood = new WorkQueue();
    const other = new WorkQueue();
    const started: string[] = [];
    const running: Array<() => void> = [];
    const piece = (name: string) => (finish: () => void) => {
      started.push(name);
      running.push(finish);
    };
    for (let i = 0; i < 100; i += 1) scheduler.run(flood, piece(`flood-${i}`));
    scheduler.run(other, piece('other'));
    running.shift()!(); // flood-0 done: flood-1 started in the flood's turn
    running.shift()!(); // flood-1 done: the other session's turn
    expect(started).toEqual(['flood-0', 'flood-1', 'other']);
    running.shift()!();
    expect(started.at(-1)).toBe('flood-2');
  });

  it('lets work that finishes as it starts hand its slot on at once, without recursing', () => {
    const scheduler = new StoreWorkScheduler(1);
    const session = new WorkQueue();
    const started: number[] = [];
    let holdFirst: () => void = () => {};
    scheduler.run(session, (finish) => {
      started.push(0);
      holdFirst = finish;
    });
    for (let i = 1; i <= 3000; i += 1) {
      scheduler.run(session, (finish) => {
        started.push(i);
        finish();
      });
    }
    holdFirst();
    expect(started).toEqual(Array.from({ length: 3001 }, (_, i) => i));
    expect([scheduler.running, scheduler.waiting]).toEqual([0, 0]);
  });
});
