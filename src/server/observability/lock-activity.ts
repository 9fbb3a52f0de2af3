/**
 * What this instance saw happen to each lock lately, for the live page: grants (with how long
 * they waited), releases and losses of the requests it serves, a few minutes' worth per lock.
 * Bounded: the locks seen least recently are forgotten first, and each keeps its last events
 * only. Other instances' requests are theirs to report (see the page: "this instance").
 */

import type { HeldRequest } from '../engine/index.js';

export interface ActivityEvent {
  readonly at: Date;
  readonly kind: 'granted' | 'released' | 'lost';
  readonly owner: string;
  readonly token: bigint;
  /** For a grant: how long the request waited. */
  readonly waitedMs?: number;
}

export interface LockActivityReport {
  /** Newest last, at most EVENTS_PER_LOCK and WINDOW_MS old. */
  readonly events: readonly ActivityEvent[];
  /** Waits of the grants in the window: how many, and their p50 and p99 (ms); undefined without grants. */
  readonly waits: { readonly count: number; readonly p50Ms: number; readonly p99Ms: number } | undefined;
  /** When each request still held here was granted, by token. */
  readonly grantedAt: ReadonlyMap<bigint, Date>;
}

/** How far back the page looks. */
export const WINDOW_MS = 5 * 60_000;
const EVENTS_PER_LOCK = 200;
const LOCKS_KEPT = 1000;

/** An event as kept: its time in ms (a Date is made only for a report). */
type KeptEvent = Omit<ActivityEvent, 'at'> & { readonly at: number };

interface Recent {
  /** Newest last; trimmed to the last EVENTS_PER_LOCK once twice that long (amortized O(1)). */
  readonly events: KeptEvent[];
  readonly holding: Map<bigint, number>;
}

export class LockActivity {
  /** Insertion order is recency: a lock touched again moves to the end. */
  readonly #locks = new Map<string, Recent>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** Records a grant after `waitMs`. */
  granted(request: HeldRequest, waitMs: number): void {
    const at = this.#now();
    const recent = this.#recent(request.name);
    this.#push(recent, { at, kind: 'granted', owner: request.owner, token: request.token, waitedMs: waitMs });
    recent.holding.set(request.token, at);
  }

  /** Records the end of a hold granted here (once, whichever stream held it last). */
  ended(request: HeldRequest, outcome: 'released' | 'lost'): void {
    const recent = this.#locks.get(request.name);
    if (!recent?.holding.delete(request.token)) return;
    this.#push(recent, {
      at: this.#now(),
      kind: outcome,
      owner: request.owner,
      token: request.token,
    });
  }

  report(name: string): LockActivityReport {
    const recent = this.#locks.get(name);
    if (!recent) return { events: [], waits: undefined, grantedAt: new Map() };
    const since = this.#now() - WINDOW_MS;
    const events = recent.events
      .slice(-EVENTS_PER_LOCK)
      .filter((event) => event.at >= since)
      .map((event) => ({ ...event, at: new Date(event.at) }));
    const waits = events.flatMap((event) => (event.waitedMs === undefined ? [] : [event.waitedMs]));
    waits.sort((a, b) => a - b);
    const quantile = (q: number): number => waits[Math.min(waits.length - 1, Math.floor(waits.length * q))]!;
    return {
      events,
      waits:
        waits.length === 0 ? undefined : { count: waits.length, p50Ms: quantile(0.5), p99Ms: quantile(0.99) },
      grantedAt: new Map([...recent.holding].map(([token, at]) => [token, new Date(at)])),
    };
  }

  #recent(name: string): Recent {
    let recent = this.#locks.get(name);
    if (recent) {
      this.#locks.delete(name);
    } else {
      recent = { events: [], holding: new Map() };
      if (this.#locks.size >= LOCKS_KEPT) {
        const oldest = this.#locks.keys().next();
        if (!oldest.done) this.#locks.delete(oldest.value);
      }
    }
    this.#locks.set(name, recent);
    return recent;
  }

  #push(recent: Recent, event: KeptEvent): void {
    recent.events.push(event);
    if (recent.events.length >= 2 * EVENTS_PER_LOCK) recent.events.splice(0, EVENTS_PER_LOCK);
  }
}
