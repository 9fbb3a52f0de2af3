/*
 * High-water marks: the highest fencing token a resource has admitted, kept in a pluggable store,
 * and the rule that admits a token (not below the mark: admitted, and the mark rises to it) or
 * refuses it.
 */
import { FencingLockMismatchError, StaleTokenError } from './errors.js';
import type { Fence } from './header.js';

/** A resource's high-water mark: the lock that fences it and the highest token admitted. */
export interface Mark {
  readonly lockName: string;
  readonly token: bigint;
}

/** What `MarkStore.raise` did: admitted (the mark is now the token) or not (the mark that refused). */
export interface RaiseResult {
  readonly admitted: boolean;
  readonly mark: Mark;
}

/**
 * Where marks are kept. A resource that restarts must find its marks again, or the first call
 * after the restart admits any token, however old: keep them where the resource keeps its data
 * (lockstream/fencing/postgres has `PostgresMarkStore`). The in-memory store is right only for a
 * resource whose data does not outlive its process either.
 */
export interface MarkStore {
  /**
   * In one atomic step: if `resource` has no mark, or its mark is for `fence.name` and at most
   * `fence.token`, set the mark to `fence` and resolve `{ admitted: true }`; otherwise change
   * nothing and resolve `{ admitted: false }` with the mark that refused it.
   */
  raise(resource: string, fence: Fence): Promise<RaiseResult>;
  /** The resource's mark, or undefined before its first admitted token. */
  get(resource: string): Promise<Mark | undefined>;
}

/** Marks in a Map: lost with the process (see MarkStore). Each raise is atomic (one JS turn). */
export class MemoryMarkStore implements MarkStore {
  readonly #marks = new Map<string, Mark>();

  async raise(resource: string, fence: Fence): Promise<RaiseResult> {
    const mark = this.#marks.get(resource);
    if (mark !== undefined && (mark.lockName !== fence.name || fence.token < mark.token)) {
      return { admitted: false, mark };
    }
    const raised = { lockName: fence.name, token: fence.token };
    this.#marks.set(resource, raised);
    return { admitted: true, mark: raised };
  }

  async get(resource: string): Promise<Mark | undefined> {
    return this.#marks.get(resource);
  }
}

/**
 * The check a fenced resource makes: a token below the resource's mark is refused; a token equal
 * to it or higher is admitted and raises it (the same holder may make many calls).
 */
export class HighWaterMarks {
  readonly store: MarkStore;

  /** Marks in `store`; in memory by default (see MarkStore on restarts). */
  constructor(options: { readonly store?: MarkStore } = {}) {
    this.store = options.store ?? new MemoryMarkStore();
  }

  /**
   * Admits `fence` for `resource`, raising the mark. Rejects with StaleTokenError (the token is
   * below the mark) or FencingLockMismatchError (another lock fences the resource), or with the
   * store's own error.
   */
  async admit(resource: string, fence: Fence): Promise<void> {
    const { admitted, mark } = await this.store.raise(resource, fence);
    if (admitted) return;
    throw refusal(resource, fence, mark);
  }

  /** The resource's mark, or undefined before its first admitted token. */
  mark(resource: string): Promise<Mark | undefined> {
    return this.store.get(resource);
  }
}

/** The error for a `fence` that `mark` refused. */
export function refusal(
  resource: string,
  fence: Fence,
  mark: Mark,
): StaleTokenError | FencingLockMismatchError {
  return mark.lockName === fence.name
    ? new StaleTokenError(resource, fence.name, fence.token, mark.token)
    : new FencingLockMismatchError(resource, fence.name, fence.token, mark.lockName, mark.token);
}
