/**
 * The records workload's nemesis `pause-writer`: it catches incrementers between an increment's
 * read and its write (the `read` line each one records before it thinks and writes) and pauses
 * them (SIGSTOP) at once, for the fault period, past their holds' loss. Woken (SIGCONT), each
 * sends its write late, as the holder it no longer is: the guard must refuse it. It aims at a
 * writer of every counter store (guarded records, PostgreSQL) each time, so that each store's
 * guard meets a late writer.
 */
import type { ClientSlot, Cluster } from './cluster.js';
import type { HistoryEvent } from './client/recorder.js';

/**
 * How long to wait for the first writer, then for more (other locks' holders), then, if a store
 * has none yet, for a writer of such a store.
 */
const FIRST_MS = 3_000;
const MORE_MS = 1_000;
const MISSING_STORE_MS = 2_000;
/** Writers paused at once, at most, and of one store. */
const MOST = 3;
const MOST_OF_A_STORE = 2;

/** A Nemesis of nemeses.ts (which makes it), on the cluster alone. */
interface WriterPauses {
  readonly name: 'pause-writer';
  start(ctx: { readonly cluster: Cluster }): Promise<string>;
  stop(ctx: { readonly cluster: Cluster }): Promise<void>;
}

export function pauseWriters(): WriterPauses {
  let paused: ClientSlot[] = [];
  return {
    name: 'pause-writer',
    start: async ({ cluster }) => {
      const caught = await catchWriters(cluster);
      paused = caught.map(({ slot }) => slot);
      if (caught.length === 0) return 'no incrementer was between a read and its write: nobody paused';
      return caught
        .map(({ slot, read }) => {
          const written = slot.recorder.history.some(
            (e) => e.f === 'increment' && e.op === read.op && e.type !== 'invoke' && e.t <= slot.pausedAt!,
          );
          return (
            `${read.client} paused (SIGSTOP) after its read of ${read.store} ${read.lock}/${read.key} for ${read.client}:${read.op}` +
            (written ? ' (its write had returned)' : ', before its write')
          );
        })
        .join('; ');
    },
    stop: async ({ cluster }) => {
      for (const slot of paused) await cluster.resumeClient(slot);
    },
  };
}

/**
 * Pauses each incrementer (at most MOST, MOST_OF_A_STORE of a store) that records a `read`
 * within FIRST_MS, or within MORE_MS of the first one caught, the moment the line arrives; then,
 * while a store that has been written to has nobody caught, for MISSING_STORE_MS more, a writer
 * of such a store.
 */
async function catchWriters(cluster: Cluster): Promise<Array<{ slot: ClientSlot; read: HistoryEvent }>> {
  const stores = new Set(
    cluster.clients.flatMap((slot) =>
      slot.recorder.history.filter((e) => e.f === 'increment' && e.type === 'invoke').map((e) => e.store),
    ),
  );
  const caught: Array<{ slot: ClientSlot; read: HistoryEvent }> = [];
  const pausing: Array<Promise<string>> = [];
  const missing = (): boolean => [...stores].some((store) => !caught.some((c) => c.read.store === store));
  let onlyMissing = false;
  let wake: () => void = () => {};
  const woken = (): Promise<void> => new Promise<void>((resolve) => (wake = resolve));
  let next = woken();
  const unlisten = cluster.clients.map((slot) =>
    slot.recorder.listen((event) => {
      if (event.f !== 'read' || event.type !== 'event' || slot.pausedAt !== undefined) return;
      if (caught.length >= MOST || caught.some((c) => c.slot === slot)) return;
      const ofStore = caught.filter((c) => c.read.store === event.store).length;
      if (ofStore >= MOST_OF_A_STORE || (onlyMissing && ofStore > 0)) return;
      caught.push({ slot, read: event });
      pausing.push(cluster.pauseClient(slot));
      wake();
    }),
  );
  const wait = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
  await Promise.race([next, wait(FIRST_MS)]);
  if (caught.length > 0) {
    await wait(MORE_MS);
    onlyMissing = true;
    const until = performance.now() + MISSING_STORE_MS;
    while (missing() && caught.length < MOST && performance.now() < until) {
      next = woken();
      await Promise.race([next, wait(until - performance.now())]);
    }
  }
  for (const stop of unlisten) stop();
  await Promise.all(pausing);
  return caught;
}
