// Holds a lock while some work runs, then releases it. With a server running (`npm start`):
//   npx tsx examples/typescript/quick-start.ts
import { LockClient } from '@lockstream/client';

const locks = new LockClient(process.env['LOCKSTREAM_SERVER'] ?? '127.0.0.1:50051');
// Waits in a fair queue, here at most 30 s (then LockTimeoutError).
const lock = await locks.acquire('billing/invoices', { mode: 'write', waitTimeout: 30_000 });
try {
  // Hand lock.token to what the lock protects; lock.lost aborts if the lock is lost.
  console.log(`issuing invoices with fencing token ${lock.token}`);
} finally {
  await lock.release();
  locks.close();
}
