import { describe, expect, it } from 'vitest';
import { WorkLimiter } from '../../src/server/engine/work-limiter.js';

describe('WorkLimiter: at most `limit` pieces of work at once, the rest in order', () => {
  it('starts up to the limit at once, then one per finished piece, in the order asked', () => {
    const limiter = new WorkLimiter(2);
    const started: number[] = [];
    const done: Array<() => void> = [];
    for (let i = 0; i < 5; i += 1) {
      limiter.run((finish) => {
        started.push(i);
        done[i] = finish;
      });
    }
    expect([started, limiter.running, limiter.waiting]).toEqual([[0, 1], 2, 3]);
    done[1]!();
    done[1]!(); // a second call is ignored: it frees no second turn
    expect([started, limiter.running, limiter.waiting]).toEqual([[0, 1, 2], 2, 2]);
    done[0]!();
    done[2]!();
    expect([started, limiter.running, limiter.waiting]).toEqual([[0, 1, 2, 3, 4], 2, 0]);
    done[3]!();
    done[4]!();
    expect([limiter.running, limiter.waiting]).toEqual([0, 0]);
  });

  it('lets work that finishes as it starts hand its turn on at once', () => {
    const limiter = new WorkLimiter(1);
    const started: number[] = [];
    let holdFirst: () => void = () => {};
    limiter.run((finish) => {
      started.push(0);
      holdFirst = finish;
    });
    for (let i = 1; i <= 3000; i += 1) {
      limiter.run((finish) => {
        started.push(i);
        finish();
      });
    }
    holdFirst();
    expect(started).toEqual(Array.from({ length: 3001 }, (_, i) => i));
    expect([limiter.running, limiter.waiting]).toEqual([0, 0]);
  });
});
