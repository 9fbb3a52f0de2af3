import { setMaxListeners } from 'node:events';

/**
 * A signal that aborts when any of `signals` does, with that signal's reason.
 *
 * Unlike `AbortSignal.any`, the links are removed on dispose, so linking a short-lived call to
 * a long-lived signal (server shutdown, a store session) leaves nothing behind on the latter.
 */
export function linkSignals(...signals: AbortSignal[]): AbortSignal & Disposable {
  const controller = new AbortController();
  const unlinks: Array<() => void> = [];
  const dispose = (): void => {
    for (const unlink of unlinks.splice(0)) unlink();
  };
  for (const source of signals) {
    if (source.aborted) {
      controller.abort(source.reason);
      break;
    }
    const onAbort = (): void => {
      dispose();
      controller.abort(source.reason);
    };
    source.addEventListener('abort', onAbort, { once: true });
    unlinks.push(() => source.removeEventListener('abort', onAbort));
  }
  if (controller.signal.aborted) dispose();
  return Object.assign(controller.signal, { [Symbol.dispose]: dispose });
}

/** Resolves (never rejects) once `signal` aborts; dispose to drop the listener early. */
export function whenAborted(signal: AbortSignal): Promise<void> & Disposable {
  let onAbort = (): void => {};
  const promise = new Promise<void>((resolve) => {
    onAbort = () => resolve();
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  return Object.assign(promise, {
    [Symbol.dispose]: () => signal.removeEventListener('abort', onAbort),
  });
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
