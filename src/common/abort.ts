/*
 * AbortSignals that thousands of calls watch at once (server shutdown, a store session): listening
 * and unlistening in O(1), awaiting the abort, and a write that waits for a full stream to drain
 * only until the signal aborts.
 */
import { setMaxListeners } from 'node:events';

/**
 * One real listener per signal, fanning out to a Set: adding and removing a listener stay O(1)
 * however many calls watch one long-lived signal (server shutdown, a store session). An
 * EventTarget's own listener list is scanned on every add and remove, which made 10,000 waiters
 * on one session quadratic.
 */
const fanouts = new WeakMap<AbortSignal, Set<() => void>>();

/**
 * Calls `listener` once when `signal` aborts (not if it already has: check `aborted` first).
 * Returns a function that removes the listener.
 */
export function onAbort(signal: AbortSignal, listener: () => void): () => void {
  let listeners = fanouts.get(signal);
  if (!listeners) {
    const created = new Set<() => void>();
    listeners = created;
    fanouts.set(signal, created);
    signal.addEventListener(
      'abort',
      () => {
        fanouts.delete(signal);
        for (const notify of [...created]) notify();
      },
      { once: true },
    );
  }
  const own = listeners;
  own.add(listener);
  return () => own.delete(listener);
}

/** Resolves (never rejects) once `signal` aborts; dispose to drop the listener early. */
export function whenAborted(signal: AbortSignal): Promise<void> & Disposable {
  let unlink = (): void => {};
  const promise = new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else unlink = onAbort(signal, resolve);
  });
  return Object.assign(promise, { [Symbol.dispose]: () => unlink() });
}

/**
 * A controller for a long-lived signal that every call links to (shutdown, a store session):
 * thousands of listeners on it are expected, not a leak, so Node's warning at 10 is lifted.
 */
export function unboundedController(): AbortController {
  const controller = new AbortController();
  setMaxListeners(0, controller.signal);
  return controller;
}

/** What backpressure needs of a writable stream (a gRPC server stream, an HTTP response). */
interface DrainableStream<T> {
  write(chunk: T): boolean;
  once(event: 'drain', listener: () => void): unknown;
}

/**
 * Writes `chunk`; when that fills the stream's buffer (a reader that does not keep up), resolves
 * only once the buffer has drained or `signal` aborts, so a slow reader costs one buffer, not an
 * ever-growing queue of messages.
 */
export async function writeDrained<T>(
  stream: DrainableStream<T>,
  chunk: T,
  signal: AbortSignal,
): Promise<void> {
  if (stream.write(chunk)) return;
  using aborted = whenAborted(signal);
  await Promise.race([new Promise<void>((resolve) => stream.once('drain', resolve)), aborted]);
}
