/**
 * The records workload's nemesis `pause-writer`: it catches incrementers between an increment's
 * read and its write (the `read` line each one records before it thinks and writes) and pauses
 * them (SIGSTOP) at once, for the fault period, past their holds' loss. Woken (SIGCONT), each
 * sends its write late, as the holder it no longer is: the guard must refuse it.
 */
import type { ClientSlot, Cluster } from './cluster.js';
import type { HistoryEvent } from './client/recorder.js';

/** How long to wait for the first writer, then for more (other locks' holders). */
const FIRST_MS = 3_000;
const MORE_MS = 1_000;
/** Writers paused at once, at most. */
const MOST = 3;

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
            `${read.client} paused (SIGSTOP) after its read of ${read.lock}/${read.key} for ${read.client}:${read.op}` +
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
 * Pauses each incrementer (at most MOST) that records a `read` within FIRST_MS, or within
 * MORE_MS of the first one caught, the moment the line arrives.
 */
async function catchWriters(cluster: Cluster): Promise<Array<{ slot: ClientSlot; read: HistoryEvent }>> {
  const caught: Array<{ slot: ClientSlot; read: HistoryEvent }> = [];
  const pausing: Array<Promise<string>> = [];
  let first: () => void = () => {};
  const firstCaught = new Promise<void>((resolve) => (first = resolve));
  const unlisten = cluster.clients.map((slot) =>
    slot.recorder.listen((event) => {
      if (event.f !== 'read' || event.type !== 'event' || slot.pausedAt !== undefined) return;
      if (caught.length >= MOST || caught.some((c) => c.slot === slot)) return;
      caught.push({ slot, read: event });
      pausing.push(cluster.pauseClient(slot));
      first();
    }),
  );
  const wait = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
  await Promise.race([firstCaught, wait(FIRST_MS)]);
  if (caught.length > 0) await wait(MORE_MS);
  for (const stop of unlisten) stop();
  await Promise.all(pausing);
  return caught;
}
