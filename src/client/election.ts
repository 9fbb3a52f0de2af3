/*
 * What an election is to the SDK's users: the Leadership a candidate holds once elected, the
 * leader as `leader()` reports it, and the events `observe()` yields.
 */
import type { RevokeRequest } from './lock.js';

/**
 * An elected candidate's leadership: it leads from the moment `campaign` resolves until
 * `resign()` resolves, or until `lost` aborts. Dispose it (`await using`) to resign on scope
 * exit. It is held as a Lock is (an election is a lock whose holder is its leader), and tells
 * the same: `lost`, `inDoubt`, `whenConfirmed()`, and a request to step down.
 */
export interface Leadership extends AsyncDisposable {
  /** The election's name, as passed to `campaign`. */
  readonly name: string;
  /**
   * The term: the leader's fencing token, larger for every later leader of this election. Pass
   * it to the resources the leader writes to, so that they can refuse a deposed leader; it is
   * what `proclaim` and `resign` name. A `bigint`.
   */
  readonly term: bigint;
  /**
   * Aborts, with a `LockLostError` as its reason, if the leadership is lost before `resign()`:
   * the term was ended by someone else (`resign(name, term)` through any client, a revocation's
   * deadline: code ABORTED, the server's reason as its message), the server lost it, or the
   * stream to the server broke past its grace. A deposed leader hears it before the next
   * candidate is elected. Never aborts after a successful resign.
   */
  readonly lost: AbortSignal;
  /**
   * True while the server cannot vouch for the leadership (it lost contact with its back end, or
   * the stream broke and is being resumed): it may still lead, or `lost` may follow.
   */
  readonly inDoubt: boolean;
  /**
   * Resolves at once while the leadership is not in doubt, else once it is confirmed again.
   * Rejects with `LockLostError` if it is lost (or was lost) instead.
   */
  whenConfirmed(): Promise<void>;
  /**
   * Set once someone asked the leader to step down (`revoke` on the election's name): finish up
   * and resign. With `forceAt`, the term is ended then (`lost` aborts) if it still lasts.
   */
  readonly resignRequested: RevokeRequest | undefined;
  /**
   * Replaces the leader's value (as `proclaim(name, term, value)`): observers are told, and
   * `leader()` shows it from the moment it resolves. Rejects with `LockLostError` if the
   * leadership was lost, and with `NotLeaderError` if the term is over by the time it arrives.
   */
  proclaim(value: Uint8Array | string): Promise<void>;
  /**
   * Steps down: the server ends the term and elects the next candidate. Resolves once the server
   * confirms; idempotent (later calls return the same promise). Rejects with `LockLostError` if
   * the leadership was lost first.
   */
  resign(): Promise<void>;
  /** Resigns; a leadership that was already lost is not an error here (see `lost`). */
  [Symbol.asyncDispose](): Promise<void>;
}

/** The leader of an election, as `leader()` reports it. */
export interface ElectionLeader {
  /** Its term (its fencing token). */
  readonly term: bigint;
  /** Its latest value: the one it campaigned with, or the last it proclaimed. */
  readonly value: Buffer;
  /** Who campaigned (`CampaignOptions.owner`); empty if nobody said. */
  readonly owner: string;
  /** When its term was recorded, by the clock of the server that recorded it: for people. */
  readonly electedAt: Date | undefined;
}

/**
 * One event of an election, as `observe()` yields them, in order: a `term` when a leader is
 * elected (or, first without `fromTerm`, leads now), the values it `proclaimed`, `vacant` when
 * nobody leads; `history-gone` first when the history no longer reaches back to `fromTerm`, and
 * `skipped` when an observer fell so far behind that terms it was not told left the history.
 */
export type ElectionEvent =
  /** A leader's term: what `leader()` would have said then. */
  | {
      readonly kind: 'term';
      readonly term: bigint;
      readonly value: Buffer;
      readonly owner: string;
      readonly electedAt: Date | undefined;
    }
  /** The leader of `term` proclaimed `value`. */
  | { readonly kind: 'proclaimed'; readonly term: bigint; readonly value: Buffer }
  /** `afterTerm`: the last term seen to end, 0n if none. */
  | { readonly kind: 'vacant'; readonly afterTerm: bigint }
  /** `firstTerm`: the first term still in the history (0n: none is). */
  | { readonly kind: 'history-gone'; readonly firstTerm: bigint }
  /** `firstTerm`: the first term sent after the gap (0n: none is recorded yet). */
  | { readonly kind: 'skipped'; readonly firstTerm: bigint };
