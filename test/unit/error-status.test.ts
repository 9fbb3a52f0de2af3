import { status } from '@grpc/grpc-js';
import { pino, type Logger } from 'pino';
import { describe, expect, it } from 'vitest';
import { LockError, type LockErrorCode } from '../../src/server/lock-error.js';
import { toCallStatus } from '../../src/server/transport/error-status.js';

interface LogLine {
  level: number;
  msg: string;
  err?: { type?: string; message?: string; stack?: string };
  [key: string]: unknown;
}

/** A logger whose JSON lines are parsed and kept, for assertions on what was logged. */
function capturingLogger(): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const logger = pino(
    { level: 'trace' },
    {
      write(chunk: string) {
        for (const line of chunk.split('\n')) if (line.trim() !== '') lines.push(JSON.parse(line) as LogLine);
      },
    },
  );
  return { logger, lines };
}

const INTERNAL_DETAILS = 'internal error; see the lockstream server log';

describe('toCallStatus', () => {
  const documented: Array<[LockErrorCode, status]> = [
    ['INVALID_ARGUMENT', status.INVALID_ARGUMENT],
    ['TIMEOUT', status.DEADLINE_EXCEEDED],
    ['CANCELLED', status.CANCELLED],
    ['LOCK_LOST', status.ABORTED],
    ['UNAVAILABLE', status.UNAVAILABLE],
    ['SHUTTING_DOWN', status.UNAVAILABLE],
    ['NOT_HELD', status.FAILED_PRECONDITION],
    ['KEPT_FOR_GRACE', status.FAILED_PRECONDITION],
    ['NOT_FOUND', status.NOT_FOUND],
    ['RESOURCE_EXHAUSTED', status.RESOURCE_EXHAUSTED],
    ['UNAUTHENTICATED', status.UNAUTHENTICATED],
    ['PERMISSION_DENIED', status.PERMISSION_DENIED],
    ['UNSUPPORTED', status.UNIMPLEMENTED],
    ['MISMATCHED_REQUEST', status.FAILED_PRECONDITION],
    ['REVISION_MISMATCH', status.ABORTED],
  ];

  it.each(documented)(
    'maps LockError %s to gRPC status %i, keeping the message, without logging',
    (code, expected) => {
      const { logger, lines } = capturingLogger();
      const message = `lock "jobs/nightly": ${code.toLowerCase()} happened`;
      expect(toCallStatus(new LockError(code, message), logger)).toEqual({
        code: expected,
        details: message,
      });
      expect(lines).toEqual([]);
    },
  );

  it('has a documented status for every LockErrorCode', () => {
    // Adding a code to LockErrorCode without mapping it fails type checking in error-status.ts;
    // this keeps the table above complete as well.
    const codes: Record<LockErrorCode, true> = {
      INVALID_ARGUMENT: true,
      TIMEOUT: true,
      CANCELLED: true,
      LOCK_LOST: true,
      UNAVAILABLE: true,
      SHUTTING_DOWN: true,
      NOT_HELD: true,
      KEPT_FOR_GRACE: true,
      NOT_FOUND: true,
      RESOURCE_EXHAUSTED: true,
      UNAUTHENTICATED: true,
      PERMISSION_DENIED: true,
      UNSUPPORTED: true,
      MISMATCHED_REQUEST: true,
      REVISION_MISMATCH: true,
    };
    expect(documented.map(([code]) => code).sort()).toEqual(Object.keys(codes).sort());
  });

  it('keeps a LockError message with a cause as it is, without the cause', () => {
    const { logger } = capturingLogger();
    const error = new LockError('UNAVAILABLE', 'ZooKeeper unreachable', {
      cause: new Error('ECONNREFUSED 10.0.0.7'),
    });
    expect(toCallStatus(error, logger)).toEqual({
      code: status.UNAVAILABLE,
      details: 'ZooKeeper unreachable',
    });
  });

  it('turns any other error into INTERNAL with a fixed message that reveals neither its message nor its stack', () => {
    const { logger } = capturingLogger();
    const secret = new TypeError(
      'cannot read properties of undefined (reading "password") at /srv/secret.ts',
    );
    const result = toCallStatus(secret, logger);
    expect(result).toEqual({ code: status.INTERNAL, details: INTERNAL_DETAILS });
    expect(result.details).not.toContain('password');
    expect(result.details).not.toContain(secret.message);
    expect(result.details).not.toContain('/srv/secret.ts');
    expect(result.details).not.toContain(secret.stack!.split('\n')[1]!.trim());
  });

  it('logs the unexpected error in full, at error level', () => {
    const { logger, lines } = capturingLogger();
    const fault = new RangeError('index 7 out of range');
    toCallStatus(fault, logger);
    expect(lines).toHaveLength(1);
    const [line] = lines;
    expect(line!.level).toBe(50);
    expect(line!.msg).toBe('unexpected failure in a call');
    expect(line!.err).toMatchObject({ type: 'RangeError', message: 'index 7 out of range' });
    expect(line!.err?.stack).toContain('index 7 out of range');
  });

  it('treats thrown non-errors as faults too', () => {
    for (const thrown of [
      'a string',
      42,
      null,
      undefined,
      { code: 'INVALID_ARGUMENT', message: 'looks like one' },
    ]) {
      const { logger, lines } = capturingLogger();
      expect(toCallStatus(thrown, logger)).toEqual({ code: status.INTERNAL, details: INTERNAL_DETAILS });
      expect(lines).toHaveLength(1);
      expect(lines[0]!.level).toBe(50);
    }
  });

  it('does not take an Error named LockError for a LockError', () => {
    const { logger, lines } = capturingLogger();
    const impostor = Object.assign(new Error('forged'), { name: 'LockError', code: 'INVALID_ARGUMENT' });
    expect(toCallStatus(impostor, logger)).toEqual({ code: status.INTERNAL, details: INTERNAL_DETAILS });
    expect(lines).toHaveLength(1);
  });
});
