// A job that carries on where the last run stopped: under the lock `--name`, it reads the
// guarded record `checkpoint` (the last batch done), does the next batch, and writes the
// checkpoint back as the lock's holder. Run it twice:
//
//   npx tsx examples/typescript/records.ts --name examples/nightly-export
//
// Prints `batch N done (revision R)`: 1 the first time, 2 the next, and so on, on any instance.
// A run whose lock was lost before it wrote (it was paused past its grace, say) writes nothing
// and prints `lost the lock: the checkpoint stays at the next holder's`; exit code 2.
// On failure: `error: <STATUS>: <details>` on stderr and exit code 1.
import { parseArgs } from 'node:util';
import { LockClient, LockClientError, Status, TokenNotHeldError } from '@lockstream/client';

const { values: flags } = parseArgs({
  options: {
    address: { type: 'string', default: '127.0.0.1:50051' },
    name: { type: 'string', default: 'examples/nightly-export' },
  },
});

const locks = new LockClient(flags.address);
try {
  // [docs:records]
  await using lock = await locks.acquire(flags.name, { waitTimeout: 10_000 });
  const records = locks.records(lock.name, lock.token);
  // Read, change, write back at the revision read: written only while this lock is held.
  const written = await records.update('checkpoint', (current) => {
    const done = current === undefined ? 0 : Number(Buffer.from(current.value).toString());
    return String(done + 1); // this run's batch: the one after the last done
  });
  console.log(`batch ${Buffer.from(written.value).toString()} done (revision ${written.revision})`);
  // [/docs:records]
} catch (error) {
  if (error instanceof TokenNotHeldError) {
    console.log("lost the lock: the checkpoint stays at the next holder's");
    process.exitCode = 2;
  } else if (error instanceof LockClientError) {
    console.error(`error: ${Status[error.code]}: ${error.details}`);
    process.exitCode = 1;
  } else {
    throw error;
  }
} finally {
  locks.close();
}
