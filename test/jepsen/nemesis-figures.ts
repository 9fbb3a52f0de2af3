/**
 * What lockstream told its clients during each fault of a run, from the history they recorded
 * and the nemesis schedule: of the holds held when a fault began, how many were told `in_doubt`
 * and how soon, how many were told `lost` and how soon, how many were kept to their release;
 * and how soon after the fault began another client was granted a lock whose hold was lost.
 * Printed after every run (`npm run jepsen`); the README's partition table is made of these.
 */
import type { NemesisEvent } from './checker-run.js';
import type { HistoryEvent } from './client/recorder.js';

export interface NemesisFigures {
  readonly nemesis: string;
  /** Times it was applied. */
  readonly applied: number;
  /** Holds held when a fault began. */
  readonly held: number;
  /** Ms from the fault's start to the hold's first `in_doubt`, for each hold told one. */
  readonly doubtMs: readonly number[];
  /** Ms from the fault's start to `lost`, for each hold told it. */
  readonly lostMs: readonly number[];
  /** Holds that ended in a release the server confirmed. */
  readonly kept: number;
  /** Holds whose release got no answer (the client stopped believing when it asked). */
  readonly releaseUnknown: number;
  /** Ms from the fault's start to the next conflicting grant of a lost hold's lock to another client. */
  readonly regrantMs: readonly number[];
}

interface Hold {
  readonly client: string;
  readonly lock: string;
  readonly mode: string;
  readonly grantedAt: number;
  endedAt: number;
  end: 'released' | 'lost' | 'unknown' | 'open';
  doubtAt: number[];
}

/** The holds of a history: from each acquire ok to its release ok, `lost`, or the end. */
function holdsOf(history: readonly HistoryEvent[]): Hold[] {
  const sorted = [...history].sort((a, b) => a.t - b.t);
  const open = new Map<string, Hold>();
  const holds: Hold[] = [];
  for (const event of sorted) {
    const key = `${event.client}\u0000${event.lock}`;
    if (event.f === 'acquire' && event.type === 'ok') {
      const hold: Hold = {
        client: event.client,
        lock: event.lock,
        mode: event.mode ?? 'write',
        grantedAt: event.t,
        endedAt: Infinity,
        end: 'open',
        doubtAt: [],
      };
      open.set(key, hold);
      holds.push(hold);
      continue;
    }
    const hold = open.get(key);
    if (!hold) continue;
    if (event.f === 'in_doubt') hold.doubtAt.push(event.t);
    else if (event.f === 'lost' || (event.f === 'release' && event.type !== 'invoke')) {
      hold.endedAt = event.t;
      hold.end = event.f === 'lost' ? 'lost' : event.type === 'ok' ? 'released' : 'unknown';
      open.delete(key);
    }
  }
  return holds;
}

/** Per nemesis (in the order first applied): what the holds held at each of its starts were told. */
export function nemesisFigures(
  history: readonly HistoryEvent[],
  schedule: readonly NemesisEvent[],
): NemesisFigures[] {
  const holds = holdsOf(history);
  const byGrant = [...holds].sort((a, b) => a.grantedAt - b.grantedAt);
  const byName = new Map<string, Mutable>();
  for (const start of schedule) {
    if (start.type !== 'start') continue;
    const figures = byName.get(start.nemesis) ?? emptyFigures(start.nemesis);
    byName.set(start.nemesis, figures);
    figures.applied += 1;
    for (const hold of holds) {
      if (hold.grantedAt > start.t || hold.endedAt < start.t) continue;
      figures.held += 1;
      const doubt = hold.doubtAt.find((t) => t >= start.t);
      if (doubt !== undefined) figures.doubtMs.push((doubt - start.t) / 1e6);
      if (hold.end === 'released') figures.kept += 1;
      if (hold.end === 'unknown') figures.releaseUnknown += 1;
      if (hold.end !== 'lost') continue;
      figures.lostMs.push((hold.endedAt - start.t) / 1e6);
      const next = byGrant.find(
        (other) =>
          other.lock === hold.lock &&
          other.client !== hold.client &&
          other.grantedAt > start.t &&
          conflict(hold.mode, other.mode),
      );
      if (next !== undefined) figures.regrantMs.push((next.grantedAt - start.t) / 1e6);
    }
  }
  return [...byName.values()];
}

/** Whether holds in these modes exclude each other (a semaphore's may share: never counted). */
function conflict(a: string, b: string): boolean {
  if (a === 'semaphore' || b === 'semaphore') return false;
  return a === 'write' || b === 'write';
}

type Mutable = { -readonly [K in keyof NemesisFigures]: NemesisFigures[K] } & {
  doubtMs: number[];
  lostMs: number[];
  regrantMs: number[];
};

function emptyFigures(nemesis: string): Mutable {
  return { nemesis, applied: 0, held: 0, doubtMs: [], lostMs: [], kept: 0, releaseUnknown: 0, regrantMs: [] };
}

function p50(values: readonly number[]): string {
  if (values.length === 0) return '-';
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted[Math.floor((sorted.length - 1) / 2)]!;
  return `${(middle / 1000).toFixed(2)} s`;
}

/** One line per nemesis, for a person. */
export function describeNemesisFigures(figures: readonly NemesisFigures[]): string[] {
  return figures.map(
    (f) =>
      `${f.nemesis} ×${f.applied}: ${f.held} holds held at its start; ${f.doubtMs.length} told in doubt ` +
      `(p50 ${p50(f.doubtMs)} after the start), ${f.lostMs.length} told lost (p50 ${p50(f.lostMs)}), ` +
      `${f.kept} kept to their release, ${f.releaseUnknown} released without an answer; a lost hold's lock ` +
      `granted to another client p50 ${p50(f.regrantMs)} ` +
      `after the start (${f.regrantMs.length} such grants)`,
  );
}
