/*
 * The engine's public face: everything outside src/server/engine (transport, observability,
 * security, main) imports the engine from here, and only here (lint-enforced), so what is
 * inside can be rearranged without reaching into the layers above.
 */
export { LockEngine, locksPathOf, type LockEngineOptions } from './lock-engine.js';
export {
  LockInspector,
  type LockDescription,
  type LockRequestInfo,
  type LockSummary,
} from './lock-inspector.js';
export { LockSessions, type LockSessionsOptions } from './lock-sessions.js';
export {
  LockSession,
  SESSION_ENDED,
  type SessionEvent,
  type SessionEvents,
  type SessionKind,
} from './lock-session.js';
export type { RequestAccounting, RequestListener, RequestNews } from './request-news.js';
export type {
  AcquireRequest,
  HeldLock,
  HeldRequest,
  Lease,
  LockTarget,
  RevokeRequest,
} from './lock-request.js';
export type { LockMode } from './lock-request.js';
export { ElectionHistory, type TermRecord } from './election-history.js';
export { observeElection, type ElectionEvent } from './election-observer.js';
export { decodeLockName, encodeLockName, validateLockName } from './lock-nodes.js';
