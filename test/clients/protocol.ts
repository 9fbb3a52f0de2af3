/**
 * The driver protocol of the client conformance suite (README.md beside this file explains it):
 * commands the suite writes to a driver's stdin and observations the driver writes to its
 * stdout, one JSON object per line. The TypeScript driver and the suite share these types; the
 * Go and Python drivers follow the README.
 */

/** How every client's failures are named, whatever its language calls them. */
export type ErrorKind =
  | 'invalid-argument'
  | 'closed'
  | 'timeout'
  | 'lost'
  | 'unavailable'
  | 'cancelled'
  /**
   * What the call names is not held: a lock released already, or a term that is not the current
   * leader's (TypeScript NotLeaderError, Go ErrNotHeld and ErrNotLeader, Python NotHeld).
   */
  | 'not-held'
  | 'permission-denied'
  | 'resource-exhausted'
  | 'failed-precondition'
  | 'not-found'
  /** A guarded record's write found the record at another revision than expected (ABORTED). */
  | 'conflict'
  /** A failure outside the client's own error hierarchy (a raw transport or language error). */
  | 'foreign'
  | 'other';

/** What an observer was told: ElectionService Observe's kinds. */
export type ObservedKind = 'term' | 'proclaimed' | 'vacant' | 'history-gone' | 'skipped';

/** Client options a `connect` may set, in the client's own units; the rest are its defaults. */
export interface ClientOptions {
  readonly heartbeatIntervalMs?: number;
  readonly resumeGraceMs?: number;
}

export type Command =
  /** One address, as the client's constructor takes it. */
  | ({ readonly op: 'connect'; readonly address: string } & ClientOptions)
  /** Several endpoints (`host:port` each): the client fails over between them. */
  | ({ readonly op: 'connect'; readonly addresses: readonly string[] } & ClientOptions)
  | {
      readonly op: 'acquire';
      readonly id: string;
      readonly name: string;
      readonly mode?: 'mutex' | 'read' | 'write' | 'semaphore';
      /** A semaphore's limit (mode `semaphore`). */
      readonly limit?: number;
      readonly owner?: string;
      readonly timeoutMs?: number;
      /** Published with the request, as UTF-8. */
      readonly value?: string;
      /** Append the language's own ill-formed text to `name` (see README). */
      readonly invalidUtf8?: boolean;
    }
  | { readonly op: 'try-lock'; readonly id: string; readonly name: string }
  | { readonly op: 'acquire-all'; readonly id: string; readonly names: readonly string[] }
  | { readonly op: 'cancel'; readonly id: string }
  | { readonly op: 'release'; readonly id: string }
  | { readonly op: 'scope'; readonly id: string; readonly name: string }
  | { readonly op: 'close' }
  /**
   * Elections. `campaign` waits to be elected (`cancel` gives the wait up); `resign` and
   * `proclaim` act through the leadership `id` campaigned for.
   */
  | { readonly op: 'campaign'; readonly id: string; readonly name: string; readonly value: string }
  | { readonly op: 'resign'; readonly id: string }
  | { readonly op: 'proclaim'; readonly id: string; readonly value: string }
  /** The unary calls of any client: who leads, and proclaim or resign naming a term (decimal). */
  | { readonly op: 'leader'; readonly id: string; readonly name: string }
  | {
      readonly op: 'proclaim-term';
      readonly id: string;
      readonly name: string;
      readonly term: string;
      readonly value: string;
    }
  | { readonly op: 'resign-term'; readonly id: string; readonly name: string; readonly term: string }
  /** Observes an election (from `fromTerm`, decimal, inclusive) until `stop-observe`. */
  | { readonly op: 'observe'; readonly id: string; readonly name: string; readonly fromTerm?: string }
  | { readonly op: 'stop-observe'; readonly id: string }
  /**
   * Guarded records, written as the holder of `token` (decimal: a lock's token or a term).
   * `expectedRevision` (decimal) conditions the write; `update-record` reads the record as a
   * decimal number (none: 0), adds `add` and writes it back with the client's read-modify-write.
   */
  | {
      readonly op: 'put-record';
      readonly id: string;
      readonly name: string;
      readonly key: string;
      readonly value: string;
      readonly token: string;
      readonly expectedRevision?: string;
    }
  | { readonly op: 'get-record'; readonly id: string; readonly name: string; readonly key: string }
  | {
      readonly op: 'delete-record';
      readonly id: string;
      readonly name: string;
      readonly key: string;
      readonly token: string;
      readonly expectedRevision?: string;
    }
  | {
      readonly op: 'update-record';
      readonly id: string;
      readonly name: string;
      readonly key: string;
      readonly token: string;
      readonly add: number;
    };

/** What a failure looked like in the client: the common kind, and the client's own words. */
export interface Failure {
  readonly kind: ErrorKind;
  /** The gRPC status name the error carries, when it carries one (e.g. "UNAVAILABLE"). */
  readonly code?: string;
  /** The client's error class or sentinel (e.g. "LockTimeoutError", "ErrClosed"). */
  readonly class?: string;
  readonly message?: string;
}

export type Observation =
  | { readonly event: 'ready'; readonly client: string }
  | { readonly event: 'connected' }
  | { readonly event: 'closed' }
  | { readonly event: 'queued'; readonly id: string; readonly ahead: number }
  /** `token` is decimal (tokens are 64-bit); `tokens` for a multi-lock, in the order asked for. */
  | { readonly event: 'acquired'; readonly id: string; readonly token: string; readonly tokens?: string[] }
  /** A try-lock answered, as a value, that the lock is not free. */
  | { readonly event: 'not-acquired'; readonly id: string }
  /** The client has no API for the command (e.g. no multi-lock). */
  | { readonly event: 'unsupported'; readonly id: string; readonly message: string }
  | { readonly event: 'in-doubt'; readonly id: string }
  | { readonly event: 'confirmed'; readonly id: string }
  | ({ readonly event: 'lost'; readonly id: string } & Failure)
  | {
      readonly event: 'revoke-requested';
      readonly id: string;
      readonly reason: string;
      /** Wall-clock ms of the deadline; null for a cooperative request. */
      readonly forceAt: number | null;
    }
  | { readonly event: 'released'; readonly id: string }
  /** Leaving a scope; `error` is what leaving it raised or rejected with (null: nothing). */
  | { readonly event: 'scope-exited'; readonly id: string; readonly error: Failure | null }
  /** A candidate was elected; `term` is decimal (the leader's fencing token). */
  | { readonly event: 'elected'; readonly id: string; readonly term: string }
  /** The leadership's `resign`, or a `resign-term`, was confirmed. */
  | { readonly event: 'resigned'; readonly id: string }
  /** A `proclaim` (through the leadership) or `proclaim-term` was confirmed. */
  | { readonly event: 'proclaimed'; readonly id: string }
  /** Who leads, as `leader` answered. */
  | { readonly event: 'leader'; readonly id: string; readonly term: string; readonly value: string }
  /** `leader` answered that nobody leads: a value in TypeScript and Python, ErrNoLeader in Go. */
  | { readonly event: 'no-leader'; readonly id: string }
  /**
   * One event of observer `id`, in the order its client yielded them: `what` it was; `term` is
   * the term (a term's, a proclamation's), the last term seen to end (`vacant`), or the first
   * term still there (`history-gone`, `skipped`); `value`, as UTF-8, for `term` and `proclaimed`.
   * (`what`, not `kind`: an observation with a `kind` is a failure.)
   */
  | {
      readonly event: 'observed';
      readonly id: string;
      readonly what: ObservedKind;
      readonly term: string;
      readonly value?: string;
    }
  /** Observer `id` ended: `stop-observe` (null), or the stream failed. */
  | { readonly event: 'observe-ended'; readonly id: string; readonly error: Failure | null }
  /** A record write (`put-record`, `update-record`) was made: the record's new revision, and its value. */
  | {
      readonly event: 'record-written';
      readonly id: string;
      readonly revision: string;
      readonly value: string;
    }
  /** `get-record` answered: the value as UTF-8 and revision, or found false (value '', revision '0'). */
  | {
      readonly event: 'record';
      readonly id: string;
      readonly found: boolean;
      readonly value: string;
      readonly revision: string;
    }
  /** `delete-record` was done: whether there was a record. */
  | { readonly event: 'record-deleted'; readonly id: string; readonly deleted: boolean }
  /** A command failed; `id` names the request ('' for connect and close). */
  | ({ readonly event: 'error'; readonly id: string } & Failure);

/** Every observation carries `at`: the driver's wall clock (ms since the epoch) when it saw it. */
export type StampedObservation = Observation & { readonly at: number };

/** The gRPC status names by number, for drivers whose errors carry a numeric code. */
export const STATUS_NAMES: readonly string[] = [
  'OK',
  'CANCELLED',
  'UNKNOWN',
  'INVALID_ARGUMENT',
  'DEADLINE_EXCEEDED',
  'NOT_FOUND',
  'ALREADY_EXISTS',
  'PERMISSION_DENIED',
  'RESOURCE_EXHAUSTED',
  'FAILED_PRECONDITION',
  'ABORTED',
  'OUT_OF_RANGE',
  'UNIMPLEMENTED',
  'INTERNAL',
  'UNAVAILABLE',
  'DATA_LOSS',
  'UNAUTHENTICATED',
];

/**
 * The kind for an error known only by its gRPC status name; each driver first maps its client's
 * own classes (a closed client, a loss, a timeout), then falls back on this.
 */
export function kindOfStatus(code: string): ErrorKind {
  switch (code) {
    case 'INVALID_ARGUMENT':
      return 'invalid-argument';
    case 'DEADLINE_EXCEEDED':
      return 'timeout';
    case 'ABORTED':
      return 'lost';
    case 'UNAVAILABLE':
      return 'unavailable';
    case 'CANCELLED':
      return 'cancelled';
    case 'PERMISSION_DENIED':
      return 'permission-denied';
    case 'RESOURCE_EXHAUSTED':
      return 'resource-exhausted';
    case 'FAILED_PRECONDITION':
      return 'failed-precondition';
    case 'NOT_FOUND':
      return 'not-found';
    default:
      return 'other';
  }
}
