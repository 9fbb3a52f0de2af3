// A client-only project's view of lockstream: what installing @lockstream/client and
// `import ... from '@lockstream/client'` give a TypeScript user. Type-checked and run by
// scripts/check-package.sh against the packed tarball, outside this repository.
import { LockClient, LockTimeoutError, Status, type Lock } from '@lockstream/client';
import { formatFencingToken, parseFencingToken } from '@lockstream/client/fencing';
import { fencingTableSql, type PgQueryable } from '@lockstream/client/fencing/postgres';

const address = process.argv[2];
if (!address) throw new Error('usage: node consumer.js <host:port>');
const locks = new LockClient(address);

const lock: Lock = await locks.acquire('package/smoke', {
  mode: 'write',
  waitTimeout: 5_000,
  owner: 'consumer',
});
const token: bigint = lock.token;
console.log(`acquired token=${token}`);
// @lockstream/client/fencing and its PostgreSQL adapter type-check and load without pg or @types/pg.
const header: string = formatFencingToken(lock);
console.log(`fencing header round trip: ${parseFencingToken(header).token === token}`);
const noDatabase: PgQueryable | undefined = undefined;
console.log(`fencing table DDL: ${fencingTableSql().split('\n')[0]} (${noDatabase ?? 'no pg needed'})`);
const refused = await locks.tryAcquire('package/smoke', { mode: 'read' });
console.log(`tryAcquire while held: ${refused === null ? 'null' : 'a lock'}`);
await lock.release();

const result = await locks.withLock('package/smoke', { mode: 'read' }, async (signal) => {
  return signal.aborted ? 'lost' : 'ran under the lock';
});
console.log(`withLock: ${result}`);

{
  await using held = await locks.acquire('package/scoped');
  try {
    await locks.acquire('package/scoped', { waitTimeout: 100 });
  } catch (error) {
    if (!(error instanceof LockTimeoutError) || error.code !== Status.DEADLINE_EXCEEDED) throw error;
    console.log(`second acquire timed out: ${error.message}`);
  }
  console.log(`held token=${held.token} until the end of the scope`);
}
const after = await locks.tryAcquire('package/scoped');
console.log(`free after the scope: ${after !== null}`);
await after?.release();
locks.close();
