/*
 * What a session tells the stream attached to it, in the engine's own terms: each RPC's transport
 * translates this news into its messages, in the order it comes. Also what a request needs of its
 * session (RequestSession), and the counts it keeps for the metrics (RequestAccounting).
 */
import type { LockError } from '../lock-error.js';
import type { AcquireRequest, HeldLock, HeldRequest, RevokeRequest } from './lock-request.js';
import type { LockMode } from './lock-request.js';
import type { RequestTag } from './lock-request.js';

/** Where one request of a session stands, or what just happened to it. */
export type RequestNews =
  /** It waits with `ahead` requests ahead of it. */
  | { readonly kind: 'waiting'; readonly ahead: number }
  /** It holds `lease` (told again to a stream that resumes the session). */
  | { readonly kind: 'granted'; readonly lease: HeldLock }
  /** The held lock's store session fell in doubt (`confirmed` false) or was vouched for again. */
  | { readonly kind: 'confirmation'; readonly confirmed: boolean }
  /** Someone asked the holder to give the lock back (told again when a deadline is set). */
  | { readonly kind: 'revoke-requested'; readonly revoke: RevokeRequest }
  /** A value the client sent for the held lock is published. */
  | { readonly kind: 'value-published' }
  /** The WRITE hold is a READ hold now, as the client asked. */
  | { readonly kind: 'downgraded' }
  /** The lock was released as the client asked; `ended` (OK) follows. */
  | { readonly kind: 'released'; readonly lease: HeldLock }
  /** The request is over: `error` undefined when released at the client's request. */
  | { readonly kind: 'ended'; readonly error: unknown }
  /**
   * The held lock was lost; the request is over. The listener returns a promise that settles
   * once the client has been handed the news: a lock taken away is freed for others only then.
   */
  | { readonly kind: 'lost'; readonly error: LockError };

/** The stream attached to a session: told each request's news while it is attached. */
export interface RequestListener {
  tell(id: number, request: AcquireRequest, news: RequestNews): void | Promise<void>;
  /** Another stream resumed the session: this one no longer speaks for it. */
  replaced(): void;
  /**
   * The session moved to another instance (see LockSession.handOver): the stream ends, telling
   * its client to resume the session on any instance.
   */
  handedOver(): void;
}

/**
 * The request counts a session keeps up to date (the server's metrics). Each request is counted
 * waiting from its start until `waitEnded`, and holding from `granted` until `holdEnded`: the
 * request keeps the numbers, not a closure per phase.
 */
export interface RequestAccounting {
  waiting(mode: LockMode): void;
  waitEnded(mode: LockMode): void;
  /** A grant after `waitMs` of `held` (one lock, or a multi-lock's). */
  granted(mode: LockMode, waitMs: number, held: readonly HeldRequest[]): void;
  /** The end of a hold of `heldMs` that `granted` counted. */
  holdEnded(mode: LockMode, outcome: 'released' | 'lost', heldMs: number, held: readonly HeldRequest[]): void;
  notGranted(mode: LockMode, error: unknown): void;
  /**
   * A candidate's term recorded here, `handoverMs` after its grant was decided: the election's
   * seat was empty at least that long (its predecessor's node was gone when it was decided).
   */
  termBegan(handoverMs: number): void;
}

/** What a request needs of the session it belongs to (LockSession). */
export interface RequestSession {
  /** The attached stream, if any. */
  readonly listener: RequestListener | undefined;
  readonly accounting: RequestAccounting;
  readonly ended: boolean;
  /** How messages name the stream that carries the session. */
  readonly streamNoun: string;
  isAttached(listener: RequestListener): boolean;
  /** Runs `work` (a request's store work) in its turn among every session's. */
  storeWork<T>(work: () => Promise<T>): Promise<T>;
  /** The request is over and its end told (or nobody is left to tell). */
  forgetRequest(request: { readonly id: number }): void;
  /** What request `id`'s nodes record of the session, when it can be resumed elsewhere. */
  tag(id: number): RequestTag | undefined;
  /**
   * The heartbeat interval of the session's stream, if it has heartbeats (recorded in the nodes
   * of a session that cannot be resumed: see NodeRecord.heartbeat).
   */
  readonly heartbeatMs?: number | undefined;
}

/** How the client let a request go: `release`, `cancel`, or its session closing cleanly. */
export type LetGo = 'release' | 'cancel' | 'close';
