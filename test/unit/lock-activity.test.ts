import { describe, expect, it } from 'vitest';
import { LockActivity, WINDOW_MS } from '../../src/server/observability/lock-activity.js';

/** A LockActivity on a clock the test moves. */
function activityAt(start = 1_000_000): { activity: LockActivity; advance: (ms: number) => void } {
  let now = start;
  return { activity: new LockActivity(() => now), advance: (ms) => (now += ms) };
}

const hold = (name: string, token: bigint, owner = 'worker') => ({ name, owner, token });

describe('LockActivity', () => {
  it('records grants with their waits, and releases and losses, newest last', () => {
    const { activity, advance } = activityAt();
    activity.granted(hold('a', 1n), 5);
    advance(100);
    activity.ended(hold('a', 1n), 'released');
    activity.granted(hold('a', 2n, 'other'), 40);
    advance(50);
    activity.ended(hold('a', 2n, 'other'), 'lost');
    const report = activity.report('a');
    expect(
      report.events.map(({ kind, token, owner, waitedMs }) => ({ kind, token, owner, waitedMs })),
    ).toEqual([
      { kind: 'granted', token: 1n, owner: 'worker', waitedMs: 5 },
      { kind: 'released', token: 1n, owner: 'worker', waitedMs: undefined },
      { kind: 'granted', token: 2n, owner: 'other', waitedMs: 40 },
      { kind: 'lost', token: 2n, owner: 'other', waitedMs: undefined },
    ]);
    expect(report.grantedAt.size).toBe(0);
  });

  it('knows when each request still held was granted', () => {
    const { activity, advance } = activityAt(5_000);
    activity.granted(hold('a', 7n), 0);
    advance(250);
    activity.granted(hold('a', 8n), 0);
    expect(activity.report('a').grantedAt).toEqual(
      new Map([
        [7n, new Date(5_000)],
        [8n, new Date(5_250)],
      ]),
    );
  });

  it('records an end once, and none for a hold it did not see granted', () => {
    const { activity } = activityAt();
    activity.granted(hold('a', 1n), 0);
    activity.ended(hold('a', 1n), 'released');
    activity.ended(hold('a', 1n), 'lost');
    activity.ended(hold('a', 9n), 'released');
    activity.ended(hold('unseen', 3n), 'released');
    expect(activity.report('a').events.map((event) => event.kind)).toEqual(['granted', 'released']);
    expect(activity.report('unseen').events).toEqual([]);
  });

  it('reports waits p50 and p99 over the window only', () => {
    const { activity, advance } = activityAt();
    activity.granted(hold('a', 1n), 10_000); // leaves the window below
    advance(WINDOW_MS + 1);
    for (let i = 1; i <= 100; i++) activity.granted(hold('a', BigInt(i + 1)), i);
    const { waits, events } = activity.report('a');
    expect(events).toHaveLength(100);
    expect(waits).toEqual({ count: 100, p50Ms: 51, p99Ms: 100 });
    expect(activity.report('never').waits).toBeUndefined();
  });

  it('keeps the last 200 events of a lock and forgets the locks seen least recently beyond 1000', () => {
    const { activity } = activityAt();
    for (let i = 0; i < 250; i++) activity.granted(hold('busy', BigInt(i)), 0);
    expect(activity.report('busy').events).toHaveLength(200);
    expect(activity.report('busy').events[0]?.token).toBe(50n);
    for (let i = 0; i < 1000; i++) activity.granted(hold(`lock-${i}`, 1n), 0);
    expect(activity.report('busy').events).toEqual([]);
    expect(activity.report('lock-0').events).toHaveLength(1);
  });
});
