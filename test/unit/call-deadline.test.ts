import { afterEach, describe, expect, it, vi } from 'vitest';
import { armDeadline, parseGrpcTimeout } from '../../src/server/transport/call-deadline.js';

describe('parseGrpcTimeout', () => {
  it.each([
    ['1n', 1],
    ['999999n', 1],
    ['1000001n', 2],
    ['1500u', 2],
    ['1000u', 1],
    ['0m', 0],
    ['30m', 30],
    ['2147484S', 2_147_484_000],
    ['99999999M', 5_999_999_940_000],
    ['99999999H', 359_999_996_400_000],
  ])('reads %s as %d ms, rounding up, never down', (header, ms) => {
    expect(parseGrpcTimeout(header)).toBe(ms);
  });

  it.each(['', '5', 'S', '123456789S', '10s', '1.5S', '-1S', '1 S', '1SS', 'soon'])(
    'refuses %j',
    (header) => {
      expect(parseGrpcTimeout(header)).toBeUndefined();
    },
  );
});

describe('armDeadline', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('fires a timeout longer than the largest Node.js timer at its time, not before', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'performance'] });
    const thirtyDaysMs = 30 * 24 * 3_600_000;
    const expired = vi.fn();
    const handles: NodeJS.Timeout[] = [];
    armDeadline(thirtyDaysMs, expired, (timer) => handles.push(timer));
    vi.advanceTimersByTime(2 ** 31);
    expect(expired).not.toHaveBeenCalled();
    vi.advanceTimersByTime(thirtyDaysMs - 2 ** 31 - 1);
    expect(expired).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(expired).toHaveBeenCalledTimes(1);
    // Each link of the chain was handed over, so clearing the latest one cancels the deadline.
    expect(handles.length).toBe(2);
  });

  it('re-arms a timer that fires before the monotonic clock reaches the deadline', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'performance'] });
    const expired = vi.fn();
    let timerRunsEarlyByMs = 0;
    const now = performance.now.bind(performance);
    vi.spyOn(performance, 'now').mockImplementation(() => now() - timerRunsEarlyByMs);
    armDeadline(10, expired, () => {});
    // The timer fires when the monotonic clock has moved only 7 ms: 3 ms are still to wait.
    timerRunsEarlyByMs = 3;
    vi.advanceTimersByTime(10);
    expect(expired).not.toHaveBeenCalled();
    vi.advanceTimersByTime(2);
    expect(expired).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(expired).toHaveBeenCalledTimes(1);
  });

  it('clears like any timer: the last handle given cancels it', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const expired = vi.fn();
    let handle: NodeJS.Timeout | undefined;
    armDeadline(2 ** 31 + 5, expired, (timer) => (handle = timer));
    vi.advanceTimersByTime(2 ** 31);
    clearTimeout(handle);
    vi.advanceTimersByTime(10);
    expect(expired).not.toHaveBeenCalled();
  });
});
