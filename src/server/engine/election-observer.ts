/*
 * One observer of an election (observeElection): its history replayed from a term, or its
 * current state, then every term as it is recorded, every proclamation, and the seat seen empty.
 */
import { plantedBug } from '../planted-bugs.js';
import { NodeFollow, type CoordinationStore } from '../stores/store.js';
import type { ElectionHistory, TermRecord } from './election-history.js';
import { validateLockName } from './lock-nodes.js';

/** What an observer is told, in order. */
export type ElectionEvent =
  /** A term began (for the first event of a stream without a start, the current one, with its latest value). */
  | { readonly kind: 'term'; readonly record: TermRecord; readonly value: Uint8Array }
  /** The leader of `term` proclaimed `value`. */
  | { readonly kind: 'proclaimed'; readonly term: bigint; readonly value: Uint8Array }
  /** Nobody leads: the last term seen (0n: none) is over, and no next one has begun. */
  | { readonly kind: 'vacant'; readonly afterTerm: bigint }
  /** The history does not reach back to where the observer asked to start. */
  | { readonly kind: 'history-gone'; readonly firstTerm: bigint }
  /** Terms after the last one told and before `firstTerm` left the history before they were told. */
  | { readonly kind: 'skipped'; readonly firstTerm: bigint };

/** Where an observer stands: the last term it was told, how much of it, and whether it was told the seat is empty. */
interface Told {
  term: bigint;
  proclamations: number;
  vacant: boolean;
}

/**
 * Tells `tell` the events of election `name` until `signal` aborts, each after the one before
 * was taken (`tell` resolves): from `fromTerm` on (inclusive) out of the history, else from its
 * current state. Every recorded term after the start is told, in order: each look reads every
 * record newer than the last told, so a term that began and ended between two looks is told
 * too. A look is made after every change of the terms, of the current term's record (a
 * proclamation) or of the election's queue (a leader gone); changes during a look make one more.
 * Rejects with the store's error (UNAVAILABLE), INVALID_ARGUMENT for a malformed name, or
 * UNSUPPORTED where the store keeps no history.
 */
export async function observeElection(options: {
  readonly history: ElectionHistory;
  readonly store: CoordinationStore;
  readonly name: string;
  readonly lockPath: string;
  readonly fromTerm: bigint | undefined;
  readonly signal: AbortSignal;
  readonly tell: (event: ElectionEvent) => Promise<void>;
}): Promise<void> {
  const { history, store, name, fromTerm, signal, tell } = options;
  validateLockName(name);
  history.checkSupported();
  let changed = true;
  let wake: (() => void) | undefined;
  const change = (): void => {
    changed = true;
    wake?.();
  };
  const unwatch = [
    store.watchChildren(history.termsDir(name), change),
    store.watchChildren(options.lockPath, change),
  ];
  let follow: { term: bigint; follow: NodeFollow } | undefined;
  const onAborted = (): void => wake?.();
  signal.addEventListener('abort', onAborted);
  try {
    const told = await start(history, name, fromTerm, tell);
    while (!signal.aborted) {
      if (!changed) {
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        continue;
      }
      changed = false;
      await look(history, name, told, tell, signal);
      if (follow?.term !== told.term && told.term > 0n) {
        follow?.follow.stop();
        const record = new NodeFollow({ onData: change, onDeleted: change });
        follow = { term: told.term, follow: record };
        await store.watchNode(history.termPath(name, told.term), record);
        // Changed before the watch was armed: look again.
        changed = true;
      }
    }
  } finally {
    signal.removeEventListener('abort', onAborted);
    follow?.follow.stop();
    for (const stop of unwatch) stop();
  }
}

/** The first events: the history from `fromTerm`, or the current state. */
async function start(
  history: ElectionHistory,
  name: string,
  fromTerm: bigint | undefined,
  tell: (event: ElectionEvent) => Promise<void>,
): Promise<Told> {
  const { terms, prunedThrough } = await history.list(name);
  if (fromTerm === undefined) {
    const last = terms.at(-1);
    const read = last === undefined ? undefined : await history.read(name, last);
    if (read && (await history.leads(read.record))) {
      const { record } = read;
      await tell({ kind: 'term', record, value: record.proclaimed ?? record.value });
      return { term: record.term, proclamations: record.proclamations, vacant: false };
    }
    await tell({ kind: 'vacant', afterTerm: last ?? 0n });
    return { term: last ?? 0n, proclamations: read?.record.proclamations ?? 0, vacant: true };
  }
  if (prunedThrough < fromTerm) {
    // Replayed by the first look as new terms: everything before `fromTerm` counts as told
    // (with the planted bug observer-skips, planted-bugs.ts, `fromTerm` too). The term before
    // `fromTerm` (if it is one) is not the stream's: none of its proclamations are told, then
    // or later.
    const before = plantedBug === 'observer-skips' ? fromTerm : fromTerm - 1n;
    return { term: before, proclamations: Number.POSITIVE_INFINITY, vacant: false };
  }
  await tell({ kind: 'history-gone', firstTerm: terms.find((term) => term > prunedThrough) ?? 0n });
  return { term: prunedThrough, proclamations: 0, vacant: false };
}

/**
 * One look at the history: every term newer than the last told (each with its latest
 * proclamation), a new proclamation of the current term, and whether its leader is gone.
 */
async function look(
  history: ElectionHistory,
  name: string,
  told: Told,
  tell: (event: ElectionEvent) => Promise<void>,
  signal: AbortSignal,
): Promise<void> {
  const { terms, prunedThrough } = await history.list(name);
  if (prunedThrough > told.term) {
    await tell({ kind: 'skipped', firstTerm: terms.find((term) => term > prunedThrough) ?? 0n });
    told.term = prunedThrough;
    told.proclamations = 0;
  }
  for (const term of terms) {
    if (signal.aborted) return;
    if (term < told.term) continue;
    const read = await history.read(name, term);
    if (!read) continue; // pruned meanwhile
    const { record } = read;
    if (term > told.term) {
      await tell({ kind: 'term', record, value: record.value });
      told.term = term;
      told.proclamations = 0;
      told.vacant = false;
    }
    if (record.proclamations > told.proclamations && record.proclaimed !== undefined) {
      await tell({ kind: 'proclaimed', term, value: record.proclaimed });
      told.proclamations = record.proclamations;
    }
  }
  if (told.vacant || told.term === 0n || signal.aborted) return;
  const current = await history.read(name, told.term);
  if (current && (await history.leads(current.record))) return;
  // The leader is gone; a next term recorded meanwhile is told by the next look instead.
  const { terms: now } = await history.list(name);
  if ((now.at(-1) ?? 0n) > told.term) return;
  await tell({ kind: 'vacant', afterTerm: told.term });
  told.vacant = true;
}
