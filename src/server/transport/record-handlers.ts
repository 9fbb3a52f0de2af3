/*
 * The RecordService's handlers: PutRecord, GetRecord and DeleteRecord, each admitting its caller
 * through the gate and carried out by GuardedRecords.
 */
import type { Logger } from 'pino';
import type { RecordServiceServer } from '../../gen/lockstream/v1/records.js';
import { isLockError } from '../lock-error.js';
import type { Metrics, RecordWriteOutcome } from '../observability/metrics.js';
import type { GuardedRecords, RecordWriter } from '../records/guarded-records.js';
import type { Caller, Gate } from '../security/gate.js';
import { unary } from './unary-handlers.js';

/** The RecordService: reads need the right to see a lock, writes the right to acquire it as its holder does. */
export function createRecordHandlers(
  records: GuardedRecords,
  { gate, logger, metrics }: { gate: Gate; logger: Logger; metrics: Metrics },
): RecordServiceServer {
  /** `write`'s result, its outcome counted. */
  const counted = async <T>(op: 'put' | 'delete', write: Promise<T>): Promise<T> => {
    let outcome: RecordWriteOutcome = 'failed';
    try {
      const result = await write;
      outcome = 'written';
      return result;
    } catch (error) {
      if (isLockError(error, 'NOT_HELD')) outcome = 'not_holder';
      else if (isLockError(error, 'REVISION_MISMATCH')) outcome = 'conflict';
      throw error;
    } finally {
      metrics.recordWrite(op, outcome);
    }
  };
  return {
    putRecord: unary(logger, gate, async (request, caller) => {
      const { name, key, value, fencingToken, expectedRevision, requestId } = request;
      caller.checkSee(name);
      const revision = await counted(
        'put',
        records.put(name, key, value, writer(caller, name, fencingToken), {
          expected: expectedRevision,
          requestId,
        }),
      );
      return { revision };
    }),
    getRecord: unary(logger, gate, async ({ name, key }, caller) => {
      caller.checkSee(name);
      const record = await records.get(name, key);
      return record === undefined
        ? { found: false, value: Buffer.alloc(0), revision: 0n }
        : { found: true, value: Buffer.from(record.value), revision: record.revision };
    }),
    deleteRecord: unary(logger, gate, async ({ name, key, fencingToken, expectedRevision }, caller) => {
      caller.checkSee(name);
      return {
        deleted: await counted(
          'delete',
          records.delete(name, key, writer(caller, name, fencingToken), expectedRevision),
        ),
      };
    }),
  };
}

function writer(caller: Caller, name: string, token: bigint): RecordWriter {
  return { token, authorize: (mode) => caller.checkAcquire(name, mode) };
}
