/*
 * The lock RPCs' request messages read into the engine's terms and checked, with a precise error
 * for what is wrong (modes, durations, labels, values, resume tokens, a stream's first message);
 * and the `acquired` message back.
 */
import {
  HEARTBEAT_INTERVAL_MAX_MS,
  HEARTBEAT_INTERVAL_MIN_MS,
  OWNER_MAX_BYTES,
  RESUME_TOKEN_MAX_BYTES,
  VALUE_MAX_BYTES,
  WAIT_TIMEOUT_MAX_MS,
} from '../../common/limits.js';
import type { Duration } from '../../gen/google/protobuf/duration.js';
import {
  LockMode as WireLockMode,
  type AcquireAcquired,
  type AcquireStart,
} from '../../gen/lockstream/v1/lockstream.js';
import type { AcquireRequest, HeldLock, LockMode, LockTarget } from '../engine/index.js';
import { LockError } from '../lock-error.js';

const MODES = new Map<WireLockMode, LockMode>([
  [WireLockMode.MUTEX, 'mutex'],
  [WireLockMode.READ, 'read'],
  [WireLockMode.WRITE, 'write'],
  [WireLockMode.SEMAPHORE, 'semaphore'],
]);

/** Every engine mode on the wire: the lock modes, and an election's candidates (Campaign only). */
const WIRE_MODES = new Map<LockMode, WireLockMode>([
  ...[...MODES].map(([wire, mode]): [LockMode, WireLockMode] => [mode, wire]),
  ['candidate', WireLockMode.CANDIDATE],
]);

/** An engine mode as the wire enum. */
export function toWireMode(mode: LockMode | undefined): WireLockMode {
  return mode === undefined ? WireLockMode.UNSPECIFIED : (WIRE_MODES.get(mode) ?? WireLockMode.UNSPECIFIED);
}

const CONTROL_CHARACTER = /\p{Cc}/u;

/** Checks a resume token's size before it is looked up. */
function checkResumeToken(resumeToken: string, issuedIn: 'resumable' | 'opened' = 'resumable'): void {
  const bytes = Buffer.byteLength(resumeToken, 'utf8');
  if (bytes === 0 || bytes > RESUME_TOKEN_MAX_BYTES) {
    throw invalid(`resume_token is ${bytes} bytes; expected the token from a \`${issuedIn}\` message`);
  }
}

/**
 * What a first message that opens a session (Acquire's and Campaign's `start`, Session's `open`)
 * asks of it: its resume grace (0: none asked for) and heartbeat interval, in ms.
 */
export function sessionAsked(asked: {
  readonly resumeGrace?: Duration | undefined;
  readonly heartbeatInterval?: Duration | undefined;
}): { readonly graceMs: number; readonly heartbeatIntervalMs: number | undefined } {
  return {
    graceMs: asked.resumeGrace ? durationToMs(asked.resumeGrace, 'resume_grace') : 0,
    heartbeatIntervalMs: heartbeatInterval(asked.heartbeatInterval),
  };
}

/** A `resume` first message, the same on every RPC: its token's size checked, its heartbeat interval read. */
export function resumeAsked(
  resume: { readonly resumeToken: string; readonly heartbeatInterval?: Duration | undefined },
  issuedIn: 'resumable' | 'opened' = 'resumable',
): {
  readonly kind: 'resume';
  readonly resumeToken: string;
  readonly heartbeatIntervalMs: number | undefined;
} {
  checkResumeToken(resume.resumeToken, issuedIn);
  return {
    kind: 'resume',
    resumeToken: resume.resumeToken,
    heartbeatIntervalMs: heartbeatInterval(resume.heartbeatInterval),
  };
}

/** A heartbeat_interval in ms (undefined: none asked for), or says precisely what is wrong. */
export function heartbeatInterval(interval: Duration | undefined): number | undefined {
  if (interval === undefined) return undefined;
  const ms = durationToMs(interval, 'heartbeat_interval');
  if (ms < HEARTBEAT_INTERVAL_MIN_MS || ms > HEARTBEAT_INTERVAL_MAX_MS) {
    throw invalid(
      `heartbeat_interval ${ms} ms is out of range: expected ${HEARTBEAT_INTERVAL_MIN_MS} ms to ${HEARTBEAT_INTERVAL_MAX_MS / 60_000} minutes`,
    );
  }
  return ms;
}

/** Turns the wire `start` message into an engine request, or says precisely what is wrong. */
export function toAcquireRequest(start: AcquireStart, peer: string): AcquireRequest {
  validateLabel('owner', start.owner);
  validateValue('value', start.value);
  const locks = start.locks.length === 0 ? undefined : toLockTargets(start);
  return {
    name: locks ? locks.map((target) => JSON.stringify(target.name)).join(', ') : start.name,
    mode: locks ? locks[0]!.mode : toMode(start.mode, 'mode'),
    waitTimeoutMs:
      start.waitTimeout === undefined ? undefined : durationToMs(start.waitTimeout, 'wait_timeout'),
    owner: start.owner,
    peer,
    // An empty value is none: a request keeps no buffer for it.
    value: start.value.byteLength === 0 ? undefined : start.value,
    // Checked against the mode by the engine (both RPCs reach it).
    limit: start.limit,
    weight: start.weight,
    locks,
  };
}

/** A multi-lock's targets; the engine checks their names, limits and weights. */
function toLockTargets(start: AcquireStart): LockTarget[] {
  if (
    start.name !== '' ||
    start.mode !== WireLockMode.UNSPECIFIED ||
    start.limit !== 0 ||
    start.weight !== undefined
  ) {
    throw invalid(
      '`locks` names the locks of a multi-lock in place of name, mode, limit and weight: leave those unset',
    );
  }
  return start.locks.map((target, i) => ({
    name: target.name,
    mode: toMode(target.mode, `locks[${i}].mode`),
    limit: target.limit,
    weight: target.weight,
  }));
}

/** A request's mode: left unset, MUTEX (as every client's default). */
function toMode(wire: WireLockMode, field: string): LockMode {
  if (wire === WireLockMode.UNSPECIFIED) return 'mutex';
  const mode = MODES.get(wire);
  if (mode) return mode;
  throw invalid(
    wire === WireLockMode.CANDIDATE
      ? `${field} LOCK_MODE_CANDIDATE is an election's: candidates join with ElectionService.Campaign`
      : `${field} ${wire} is not a known LockMode`,
  );
}

/** Checks a published value's size (`field`: where it came from). */
export function validateValue(field: string, value: Uint8Array): void {
  if (value.byteLength > VALUE_MAX_BYTES)
    throw invalid(`${field} is ${value.byteLength} bytes; the limit is ${VALUE_MAX_BYTES}`);
}

/** Checks a free-form label (an owner, a reason): at most OWNER_MAX_BYTES of UTF-8, no control characters. */
export function validateLabel(field: string, value: string): void {
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes > OWNER_MAX_BYTES)
    throw invalid(`${field} is ${bytes} bytes of UTF-8; the limit is ${OWNER_MAX_BYTES}`);
  if (CONTROL_CHARACTER.test(value)) throw invalid(`${field} contains a control character`);
}

/** Whole milliseconds as a protobuf Duration (a grace the server reports back). */
export function msToDuration(ms: number): Duration {
  return { seconds: BigInt(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1e6 };
}

/** A protobuf Duration in whole milliseconds, rounded up so a wait is never shorter than asked. */
export function durationToMs({ seconds, nanos }: Duration, field: string): number {
  if (seconds < 0n || nanos < 0 || nanos > 999_999_999) {
    throw invalid(`${field} ${seconds}s ${nanos}ns is negative or malformed`);
  }
  const ms = Number(seconds) * 1000 + Math.ceil(nanos / 1_000_000);
  if (ms > WAIT_TIMEOUT_MAX_MS) {
    throw invalid(
      `${field} ${seconds}s exceeds the maximum of ${WAIT_TIMEOUT_MAX_MS} ms (about ${Math.floor(WAIT_TIMEOUT_MAX_MS / DAY_MS)} days)`,
    );
  }
  return ms;
}

const DAY_MS = 86_400_000;

function invalid(message: string): LockError {
  return new LockError('INVALID_ARGUMENT', message);
}

/** `acquired` for a held lock: its token, and a multi-lock's token per lock. */
export function acquiredMessage(lease: HeldLock): AcquireAcquired {
  return {
    fencingToken: lease.fencingToken,
    tokens: lease.tokens?.map(({ name, token }) => ({ name, fencingToken: token })) ?? [],
  };
}
