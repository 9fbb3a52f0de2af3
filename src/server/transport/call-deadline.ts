/*
 * Call deadlines that hold: grpc-js's handling of `grpc-timeout` replaced with one that neither
 * overflows nor ends a call before its time.
 */
import { createRequire } from 'node:module';
import { status as Status } from '@grpc/grpc-js';

/**
 * A call's deadline, as gRPC defines it: `grpc-timeout` is 1 to 8 ASCII digits and a unit
 * (hours, minutes, seconds, milli-, micro-, nanoseconds), so anything from 1 ns to 99,999,999
 * hours. grpc-js 1.14 reads it with `(value * unit) | 0` and one `setTimeout`: a timeout past
 * 2^31 − 1 ms wraps or overflows to about 1 ms, and a lock holder whose client asked for
 * 25 days loses its lock at once; sub-millisecond parts round down, ending a call before its
 * time. lockstream ends a call no earlier than its deadline says, whatever the client.
 */

const TIMEOUT_PATTERN = /^(\d{1,8})([HMSmun])$/;
const UNIT_MS: Readonly<Record<string, number>> = {
  H: 3_600_000,
  M: 60_000,
  S: 1_000,
  m: 1,
  u: 1e-3,
  n: 1e-6,
};
/** The longest delay a Node.js timer takes as given. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** The timeout a `grpc-timeout` value asks for, in whole milliseconds rounded up; undefined if malformed. */
export function parseGrpcTimeout(value: string): number | undefined {
  const match = TIMEOUT_PATTERN.exec(value);
  if (match === null) return undefined;
  return Math.ceil(Number(match[1]) * UNIT_MS[match[2]!]!);
}

/**
 * Calls `onExpired` once `timeoutMs` have passed by the monotonic clock, never before: long
 * timeouts run as a chain of timers, and a timer that fires early (Node's loop clock may lag
 * behind) is re-armed for what is left.
 */
export function armDeadline(
  timeoutMs: number,
  onExpired: () => void,
  setHandle: (timer: NodeJS.Timeout) => void,
): void {
  const endsAt = performance.now() + timeoutMs;
  const arm = (): void => {
    const remainingMs = endsAt - performance.now();
    if (remainingMs <= 0) {
      onExpired();
      return;
    }
    setHandle(setTimeout(arm, Math.min(Math.ceil(remainingMs), MAX_TIMER_MS)));
  };
  arm();
}

/** The parts of grpc-js's server call the replacement touches. */
interface BaseServerCall {
  deadline: number;
  deadlineTimer: NodeJS.Timeout | null;
  sendStatus(status: { code: Status; details: string; metadata: null }): void;
  handleTimeoutHeader(value: unknown): void;
}

let installed = false;

/**
 * Replaces grpc-js's server-side `grpc-timeout` handling with `parseGrpcTimeout` and
 * `armDeadline`. grpc-js arms the deadline in its call's constructor, before any interceptor
 * or handler runs, so this is the one place it can be corrected. It fails loudly if a grpc-js
 * upgrade moves the method, rather than silently leaving the overflow in place.
 */
export function installCallDeadlines(): void {
  if (installed) return;
  const require = createRequire(import.meta.url);
  const interceptors = require('@grpc/grpc-js/build/src/server-interceptors.js') as {
    BaseServerInterceptingCall?: { prototype: BaseServerCall };
  };
  const prototype = interceptors.BaseServerInterceptingCall?.prototype;
  if (typeof prototype?.handleTimeoutHeader !== 'function') {
    throw new Error(
      '@grpc/grpc-js changed: BaseServerInterceptingCall.handleTimeoutHeader is gone; revisit call-deadline.ts',
    );
  }
  prototype.handleTimeoutHeader = function (this: BaseServerCall, value: unknown): void {
    const text = String(value);
    const timeoutMs = parseGrpcTimeout(text);
    if (timeoutMs === undefined) {
      // As grpc-js answers it, after the constructor has finished.
      process.nextTick(() => {
        this.sendStatus({
          code: Status.INTERNAL,
          details: `Invalid grpc-timeout value "${text}"`,
          metadata: null,
        });
      });
      return;
    }
    this.deadline = Date.now() + timeoutMs;
    armDeadline(
      timeoutMs,
      () => {
        this.sendStatus({ code: Status.DEADLINE_EXCEEDED, details: 'Deadline exceeded', metadata: null });
      },
      (timer) => {
        this.deadlineTimer = timer;
      },
    );
  };
  installed = true;
}
