import type { Lock, LockMode } from '../../src/client/index.js';

/** One thing that happened to a holder, on the test process's monotonic clock. */
export interface HistoryEvent {
  readonly lock: string;
  readonly holder: string;
  readonly mode: LockMode;
  /** `granted`: the holder may start working. `ended`: it has stopped (released or lost). */
  readonly kind: 'granted' | 'ended';
  readonly token: bigint;
  readonly at: number;
  readonly why?: string;
}

/**
 * A record of who held which lock when, checked as a whole: the shared checker of the fault
 * tests. A holder's end is recorded when it *stops working*: when it asks to release (through
 * `release()` here), or when its `lost` signal fires; never when the server confirms the
 * release, since the next holder may legitimately be granted before that confirmation arrives.
 */
export class LockHistory {
  readonly events: HistoryEvent[] = [];

  readonly #ends = new Map<Lock, (why: string) => void>();

  /** Records the grant of `lock` to `holder`, and its loss should `lock.lost` fire. */
  held(holder: string, lock: Lock): Lock {
    const base = { lock: lock.name, holder, mode: lock.mode, token: lock.token };
    this.events.push({ ...base, kind: 'granted', at: performance.now() });
    let ended = false;
    const end = (why: string): void => {
      if (ended) return;
      ended = true;
      this.events.push({ ...base, kind: 'ended', at: performance.now(), why });
    };
    this.#ends.set(lock, end);
    lock.lost.addEventListener('abort', () => end('lost'), { once: true });
    return lock;
  }

  /** Records that the holder of `lock` stops working, then releases it. */
  release(lock: Lock): Promise<void> {
    this.#ends.get(lock)?.('released');
    return lock.release();
  }

  /**
   * Throws, describing the first violation, unless the history obeys the lock rules: exclusive
   * holders (mutex, write) never overlap anyone, readers overlap only readers, and every grant's
   * token exceeds the tokens of all grants it had to wait for.
   */
  verify(): void {
    const byLock = new Map<string, HistoryEvent[]>();
    for (const event of this.events) byLock.set(event.lock, [...(byLock.get(event.lock) ?? []), event]);
    for (const [lock, events] of byLock) {
      const holding = new Map<string, HistoryEvent>();
      let maxExclusiveToken = -1n;
      let maxToken = -1n;
      for (const event of [...events].sort((a, b) => a.at - b.at)) {
        if (event.kind === 'ended') {
          holding.delete(event.holder);
          continue;
        }
        const exclusive = event.mode !== 'read';
        const conflicting = [...holding.values()].filter((h) => exclusive || h.mode !== 'read');
        if (conflicting.length > 0) {
          throw new Error(
            `lock "${lock}": ${event.holder} (${event.mode}) was granted while ${conflicting
              .map((h) => `${h.holder} (${h.mode})`)
              .join(', ')} still held it`,
          );
        }
        const mustExceed = exclusive ? maxToken : maxExclusiveToken;
        if (event.token <= mustExceed) {
          throw new Error(
            `lock "${lock}": ${event.holder} got token ${event.token}, not above ${mustExceed}`,
          );
        }
        maxToken = event.token > maxToken ? event.token : maxToken;
        if (exclusive) maxExclusiveToken = event.token > maxExclusiveToken ? event.token : maxExclusiveToken;
        holding.set(event.holder, event);
      }
    }
  }

  /** The time of the first event matching `match`. */
  when(match: Partial<HistoryEvent>): number {
    const found = this.events.find((e) =>
      Object.entries(match).every(([k, v]) => e[k as keyof HistoryEvent] === v),
    );
    if (!found)
      throw new Error(
        `no event like ${JSON.stringify(match, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))}`,
      );
    return found.at;
  }
}
