import type { RequestTag } from './lock-request.js';
import type { RequestAccounting, RequestListener } from './request-news.js';

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
}

/** How the client let a request go: `release`, `cancel`, or its session closing cleanly. */
export type LetGo = 'release' | 'cancel' | 'close';
