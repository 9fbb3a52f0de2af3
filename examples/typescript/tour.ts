// The TypeScript SDK in one program (docs/typescript.md shows the part between the [docs:tour]
// marks): a lock held while work runs, withLock, a try-lock, watch, a published value, a
// downgrade, a semaphore and a multi-lock. The work itself is stood in for by the small functions
// below. With a server running (`npm start`):
//
//   npx tsx examples/typescript/tour.ts
//
// Prints one line per step and `done` at the end.
import { setTimeout as sleep } from 'node:timers/promises';
import { LockClient } from '@lockstream/client';

// What the locks protect, stood in for: each takes the fencing token it would pass on.
const invoice = { id: 'inv-42', amount: 100 };
async function chargeCustomer(
  charged: typeof invoice,
  options: { fencingToken: bigint; signal: AbortSignal },
): Promise<void> {
  options.signal.throwIfAborted(); // the lock is lost: stop
  console.log(`charged ${charged.id} with token ${options.fencingToken}`);
}
async function buildDailyReport(options: { signal: AbortSignal }): Promise<string> {
  await sleep(10, undefined, options);
  return 'daily report';
}
async function rebuildCache(options: { fencingToken: bigint }): Promise<void> {
  console.log(`cache rebuilt with token ${options.fencingToken}`);
}
async function serveFromCache(): Promise<void> {
  console.log('served from the cache');
}
async function train(options: { fencingToken: bigint }): Promise<void> {
  console.log(`trained with token ${options.fencingToken}`);
}
async function move(amount: number, tokens: { from: bigint; to: bigint }): Promise<void> {
  console.log(`moved ${amount} with tokens ${tokens.from} and ${tokens.to}`);
}
// Ends the waits and the watch below if the program runs for too long.
const signal = AbortSignal.timeout(60_000);

// [docs:tour]
const locks = new LockClient(process.env['LOCKSTREAM_SERVER'] ?? '127.0.0.1:50051');

// 1. Hold a lock while some work runs, and release it however the work ends.
const lock = await locks.acquire('billing/invoice-42', {
  mode: 'write', // 'mutex' (default), 'read' or 'write'
  waitTimeout: 5_000, // ms in the queue before LockTimeoutError; omit to wait until `signal` aborts
  owner: 'invoicer', // shown to operators
  signal, // aborting it while queued leaves the queue
});
try {
  // lock.token is the fencing token (a bigint); lock.lost aborts if the lock is lost.
  await chargeCustomer(invoice, { fencingToken: lock.token, signal: lock.lost });
} finally {
  await lock.release();
}
// A Lock is AsyncDisposable: `await using lock = await locks.acquire(...)` releases it at the
// end of the block.

// 2. Run a function under a lock; the lock is always released. If it was lost while the function
//    ran, withLock rejects with LockLostError even when the function succeeded.
const report = await locks.withLock('reports/daily', { waitTimeout: 60_000 }, async (lost) => {
  return buildDailyReport({ signal: lost });
});
console.log(`built the ${report}`);

// 3. Take it only if it is free right now (never jumps the queue).
const rebuild = await locks.tryAcquire('cache/rebuild');
if (rebuild === null) console.log('someone else is rebuilding the cache');
else await rebuild.release();

// 4. Follow a lock: who holds it and who waits, now and after every change, until `signal`
//    aborts (the loop then ends quietly) or the loop is left.
for await (const state of locks.watch('reports/daily', { signal })) {
  console.log(
    state.holders.map((holder) => holder.owner),
    `${state.waiters.length} waiting`,
  );
  break; // this program only looks once
}

// 5. Leader election by hand: the leader holds the lock and publishes where to reach it (at most
//    1024 bytes); followers read it from describe() or watch(). setValue() resolves once every
//    server shows the new value. (locks.campaign() is the election API: docs/elections.md.)
const leadership = await locks.acquire('services/api/leader', { value: '10.0.0.7:8443' });
await leadership.setValue('10.0.0.7:9443'); // moved to another port, still the leader
const [leader] = (await locks.describe('services/api/leader')).holders;
console.log(`leader at ${leader?.value.toString()} (token ${leader?.token})`);
await leadership.release();

// 6. Downgrade: rebuild a cache under a write lock, then keep reading it under a read lock
//    without letting another writer in between (readers queued behind are granted at once).
const cache = await locks.acquire('reports/cache', { mode: 'write' });
await rebuildCache({ fencingToken: cache.token });
await cache.downgrade(); // cache.mode === 'read' now; the token is the same
await serveFromCache();
await cache.release();

// 7. Semaphore: at most 8 units of GPU memory in use across the fleet; a big job takes 6 of
//    them. Granted in queue order (a small job queued behind a big one waits for it: no
//    starvation); each holder has its own token. Every request for the name names the same limit.
const gpu = await locks.acquire('gpu/memory', { limit: 8, weight: 6, owner: 'train-7' });
const { limit, usedWeight } = await locks.describe('gpu/memory'); // 8, 6 (or more)
console.log(`gpu/memory: ${usedWeight} of ${limit} in use`);
await train({ fencingToken: gpu.token });
await gpu.release();

// 8. Several locks at once, all or none: a transfer between two accounts. Sets that overlap, in
//    any order, never deadlock, and no lock of a set is ever held without the others.
const transfer = await locks.acquireAll(['accounts/17', { name: 'accounts/42', mode: 'write' }], {
  waitTimeout: 10_000,
});
const [from, to] = transfer.tokens; // { name, token } per lock, in the order asked
await move(100, { from: from!.token, to: to!.token });
await transfer.release(); // one release (and one `lost`) for the whole set

locks.close();
// [/docs:tour]
console.log('done');
