import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { InteractiveProcess } from '../support/interactive-process.js';
import { LockCaller, LockMode } from '../support/lock-caller.js';
import { RawZooKeeper } from '../support/raw-zookeeper.js';
import { RecordCaller, refusalOf } from '../support/record-caller.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { startServerProcess, type ServerProcess } from '../support/server-process.js';

/*
 * A guarded record's write with the token of a hold that has ended, once the lock has been
 * granted to someone else, is refused: in every one of 1,000 trials across both stores. The old
 * holder is a separate process; in most trials it is paused (SIGSTOP) before its hold is taken
 * away, so it has not been told when its token is tried. Its hold ends by its own release, by a
 * forced revocation, and on ZooKeeper also by its node's deletion behind its instance's back (as
 * when its session expires). The writes go through either instance; the new holder's write
 * right after shows that the refused one left nothing behind.
 */

const connectString = requireZooKeeper(inject('zookeeperConnectString'));
const REPL = fileURLToPath(new URL('../support/holder-repl.ts', import.meta.url));
const TRIALS_PER_STORE = 500;

type Way = 'released' | 'revoked' | 'revoked-paused' | 'node-deleted-paused';

for (const store of ['embedded', 'zookeeper'] as const) {
  describe(`a stale token's record write on the ${store} store`, () => {
    const root = `/stale-records-${randomUUID()}`;
    const servers: ServerProcess[] = [];
    let holder: InteractiveProcess;
    let locks: LockCaller;
    let records: RecordCaller[];
    let raw: RawZooKeeper | undefined;

    beforeAll(async () => {
      const args = store === 'embedded' ? [] : ['--zookeeper', connectString, '--root', root];
      servers.push(await startServerProcess(args));
      // On ZooKeeper the old holder is served by one instance, the new one by another.
      if (store === 'zookeeper') servers.push(await startServerProcess(args));
      holder = new InteractiveProcess(process.execPath, ['--import', 'tsx', REPL, servers[0]!.address]);
      locks = new LockCaller(servers.at(-1)!.address);
      records = servers.map((server) => new RecordCaller(server.address));
      if (store === 'zookeeper') raw = await RawZooKeeper.connect(connectString);
    });
    afterAll(async () => {
      holder?.endInput();
      await holder?.exited;
      locks?.close();
      for (const caller of records ?? []) caller.close();
      raw?.close();
      await Promise.all(servers.map((server) => server.kill('SIGTERM')));
    });

    it(`refuses it in each of ${TRIALS_PER_STORE} trials, told or not, through either instance`, async () => {
      const ways: Way[] =
        store === 'zookeeper'
          ? ['released', 'revoked', 'revoked-paused', 'node-deleted-paused']
          : ['released', 'revoked', 'revoked-paused'];
      const tally = new Map<Way, { refused: number; untold: number }>(
        ways.map((way) => [way, { refused: 0, untold: 0 }]),
      );
      for (let trial = 0; trial < TRIALS_PER_STORE; trial += 1) {
        const way = ways[trial % ways.length]!;
        const name = `stale-${trial}-${randomUUID()}`;
        const through = records[trial % records.length]!;
        const from = holder.stdout.length;
        holder.typeLine(`acquire ${name}`);
        const oldToken = BigInt((await holder.waitFor(new RegExp(`acquired ${name} (\\d+)`), from))[1]!);
        const revision = await through.put(name, 'counter', `${trial}`, oldToken);

        const next = locks.open({ name, mode: LockMode.MUTEX });
        const paused = way.endsWith('-paused');
        if (paused) holder.signal('SIGSTOP');
        if (way === 'released') holder.typeLine(`release ${name}`);
        else if (way === 'node-deleted-paused') await deleteHolderNode(raw!, `${root}/locks/${name}`);
        else await locks.revoke(name, 'stale token trial', 0);
        const newToken = await next.acquired();

        const refused = await refusalOf(through.put(name, 'counter', 'stale', oldToken));
        const told = holder.stdout.slice(from).includes(`ended ${name}`);
        expect(refused.code, `trial ${trial} (${way})`).toBe(status.FAILED_PRECONDITION);
        const counted = tally.get(way)!;
        counted.refused += 1;
        if (!told) counted.untold += 1;
        // Nothing of the refused write: the new holder writes on from the old one's revision.
        expect(await through.put(name, 'counter', 'next', newToken, revision)).toBe(revision + 1n);

        if (paused) holder.signal('SIGCONT');
        await holder.waitFor(new RegExp(`ended ${name} \\d+`), from);
        next.sendRelease();
        await next.outcome;
      }
      const refusedAll = [...tally.values()].reduce((sum, { refused }) => sum + refused, 0);
      expect(refusedAll).toBe(TRIALS_PER_STORE);
      // Paused, the old holder cannot have read its end before its token was tried.
      for (const way of ways.filter((w) => w.endsWith('-paused')))
        expect(tally.get(way)!.untold).toBe(tally.get(way)!.refused);
      console.log(
        `${store}: ${refusedAll} stale writes refused; ${[...tally]
          .map(([way, { refused, untold }]) => `${way} ${refused} (${untold} before the old holder was told)`)
          .join(', ')}`,
      );
    });
  });
}

/** Deletes the node of a lock's holder (the queue's first) behind its instance's back. */
async function deleteHolderNode(raw: RawZooKeeper, lockPath: string): Promise<void> {
  const listed = await raw.children(lockPath);
  const first = [...(listed.value ?? [])].sort((a, b) => a.slice(-10).localeCompare(b.slice(-10)))[0];
  if (first === undefined) throw new Error(`no node under ${lockPath}`);
  const deleted = await raw.delete(`${lockPath}/${first}`);
  if (deleted.rc !== 0) throw new Error(`delete of ${first} answered ${deleted.rc}`);
}
