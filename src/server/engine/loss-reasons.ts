/*
 * How the engine tells of a lost lock or a vanished request: the errors holders and waiters are
 * told, the listeners that hear of a loss (Listeners), and how long a forced revocation waits for
 * them (whenTold).
 */
import { LockError } from '../lock-error.js';
import type { LetGo } from './request-news.js';

/** Why a queued request ends when its node was deleted by someone else. */
export function nodeVanished(name: string): LockError {
  return new LockError(
    'LOCK_LOST',
    `lock "${name}": this request's queue node was deleted by someone else while it waited`,
  );
}

/**
 * What a holder is told when its lock was lost: the engine's reason (which names the lock and
 * says how), and that the work the lock protects must stop.
 */
export function lossReport(name: string, reason: unknown): LockError {
  // The engine's reasons name the lock and say how it was lost.
  const why = reason instanceof Error ? reason.message : `lock "${name}" was lost`;
  return new LockError('LOCK_LOST', `${why}; stop the work it protects`, { cause: reason });
}

export function lockLost(name: string, reason: unknown): LockError {
  const why = reason instanceof Error ? reason.message : 'the store session ended';
  return new LockError('LOCK_LOST', `lock "${name}" was lost: ${why}`, { cause: reason });
}

/** Why a hold ends, or a change of it fails, when its node is found gone. */
export function nodeGone(name: string): LockError {
  return new LockError('LOCK_LOST', `lock "${name}" was lost: its node is gone`);
}

/**
 * Why a handed-over request stops waiting: the engine leaves the nodes of a request withdrawn
 * for this reason where they are (see LockEngine), for the instance that takes them over.
 */
export const HANDED_OVER = new LockError(
  'UNAVAILABLE',
  'the session moved to another lockstream instance: resume it there',
);

/** Why a waiting request ends when its client lets it go (`streamNoun`: how it names its stream). */
export function notAcquired(name: string, how: LetGo, streamNoun: string): LockError {
  const what =
    how === 'close'
      ? `the client half-closed the ${streamNoun}`
      : how === 'release'
        ? 'the client sent `release`'
        : 'the client cancelled the request';
  return new LockError('CANCELLED', `lock "${name}" was not acquired: ${what} while waiting`);
}

/** Why a held lock's request ends when its client cancels it (the lock is released). */
export function cancelledHold(name: string): LockError {
  return new LockError('CANCELLED', `lock "${name}" was released: the client cancelled the request`);
}

/** A short list of listeners: an array is a fraction of a Set's size, and these lists hold one or two. */
export class Listeners<T, R = void> {
  #listeners: Array<(value: T) => R> | undefined;

  add(listener: (value: T) => R): () => void {
    // A literal of one, not a push: a pushed-to empty array reserves room for seventeen.
    if (this.#listeners) this.#listeners.push(listener);
    else this.#listeners = [listener];
    return () => {
      const index = this.#listeners?.indexOf(listener) ?? -1;
      if (index >= 0) this.#listeners?.splice(index, 1);
    };
  }

  /** Calls every listener; returns what they returned. */
  tell(value: T): R[] {
    return [...(this.#listeners ?? [])].map((listener) => listener(value));
  }
}

/**
 * How long a forced revocation waits for the holder to be told before it frees the lock
 * anyway: a holder whose connection does not read cannot be told, and must not keep the lock
 * past its deadline for long.
 */
export const LOSS_TELLING_BOUND_MS = 1_000;

/** Resolves once every promise in `telling` (what loss listeners returned) has settled, or after LOSS_TELLING_BOUND_MS. */
export async function whenTold(telling: Array<void | Promise<void>>): Promise<void> {
  const pending = telling.filter((told): told is Promise<void> => told instanceof Promise);
  if (pending.length === 0) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.allSettled(pending),
    new Promise<void>((resolve) => (timer = setTimeout(resolve, LOSS_TELLING_BOUND_MS))),
  ]);
  clearTimeout(timer);
}
