import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nodePrefix, queueOrder } from '../../src/server/engine/lock-nodes.js';
import {
  holders,
  position,
  releaseFreesWatchers,
  waiterPlaces,
  type Position,
} from '../../src/server/engine/queue-position.js';

/*
 * The grant fold (queue-position.ts) against a naive model written plainly here: on random
 * queues, who holds, how many are ahead of each request, what each waiter watches (the one node
 * whose deletion it needs, as the recipe has it), and the engine's shortcuts that grant without
 * listing again.
 */

type LockModeName = 'mutex' | 'read' | 'write';

/** A sequence suffix as ZooKeeper writes it: Java's `%010d` of the parent's (signed int) cversion. */
function zkSequence(n: number): string {
  return n < 0 ? `-${String(-n).padStart(9, '0')}` : String(n).padStart(10, '0');
}

function requestId(n: number): string {
  return `00000000-0000-4000-8000-${n.toString(16).padStart(12, '0')}`;
}

/** Node names for a queue in queue order: growing sequences with gaps, from `start`. */
function nodeNames(prefixes: readonly string[], start: number, gaps: readonly number[]): string[] {
  let sequence = start;
  return prefixes.map((prefix, i) => {
    sequence += 1 + (gaps[i] ?? 0);
    return `${prefix}${zkSequence(sequence)}`;
  });
}

/** The queue's order in a listing: any (ZooKeeper lists children unsorted), foreign nodes among them. */
function listing(names: readonly string[], order: readonly number[], foreign: boolean): string[] {
  const keyed = names.map((name, i) => ({ name, key: order[i] ?? 0 }));
  const children = keyed.sort((a, b) => a.key - b.key).map(({ name }) => name);
  return foreign ? ['lock', ...children, `read-${requestId(0)}-7`] : children;
}

const queueShape = {
  start: fc.oneof(fc.integer({ min: 0, max: 1000 }), fc.integer({ min: -2147483648, max: -2147483630 })),
  gaps: fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 12 }),
  order: fc.array(fc.nat(), { minLength: 12, maxLength: 12 }),
  foreign: fc.boolean(),
  /** Which requests a "what if they were gone" check removes. */
  removed: fc.array(fc.boolean(), { minLength: 12, maxLength: 12 }),
};

// The model, for the lock modes: reads share with reads, every other pair excludes; the head
// always holds; a request holds when nothing ahead of it excludes it.
function modelHolds(modes: readonly LockModeName[], i: number): boolean {
  for (let j = 0; j < i; j += 1) {
    if (modes[i] !== 'read' || modes[j] !== 'read') return false;
  }
  return true;
}

/** Whether request `i` of `modes` holds once the requests with `gone[j]` are deleted. */
function modelHoldsWithout(modes: readonly LockModeName[], i: number, gone: (j: number) => boolean): boolean {
  const kept = modes.flatMap((mode, j) => (j === i || !gone(j) ? [{ mode, j }] : []));
  return modelHolds(
    kept.map(({ mode }) => mode),
    kept.findIndex(({ j }) => j === i),
  );
}

describe('the grant fold, against a naive model', () => {
  it('on random queues of MUTEX, READ and WRITE requests: holders, ahead counts, and what each waiter watches', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom<LockModeName>('mutex', 'read', 'write'), { minLength: 1, maxLength: 12 }),
        fc.record(queueShape),
        (modes, { start, gaps, order, foreign, removed }) => {
          const names = nodeNames(
            modes.map((mode, i) => nodePrefix(mode, requestId(i + 1))),
            start,
            gaps,
          );
          const children = listing(names, order, foreign);
          const positions: Position[] = names.map((me) => position(children, me));
          const held = modes.map((_, i) => modelHolds(modes, i));

          positions.forEach((p, i) => {
            expect(p.kind).toBe(held[i] ? 'held' : 'waiting');
            if (p.kind === 'missing') return;
            expect(p.ahead).toBe(i);
            expect(p.head).toBe(i === 0 ? undefined : names[0]);
            if (p.kind === 'held') return;
            const watched = names.indexOf(p.predecessor);
            expect(watched).toBeGreaterThanOrEqual(0);
            expect(watched).toBeLessThan(i);
            // No herd: an exclusive request watches the node just before it, a read the last
            // exclusive node before it (every reader behind one writer is granted together).
            let lastExclusive = i - 1;
            while (lastExclusive >= 0 && modes[lastExclusive] === 'read') lastExclusive -= 1;
            expect(watched).toBe(modes[i] === 'read' ? lastExclusive : i - 1);
            // Its deletion is necessary: whatever else ahead goes, while it stays we wait.
            expect(modelHoldsWithout(modes, i, (j) => j !== watched && removed[j] === true)).toBe(false);
            expect(p.predecessorIsHead).toBe(watched === 0);
            // The shortcut that grants without a listing is sound: once the watched node goes,
            // we hold, even if it went by a downgrade (a WRITE node replaced by a READ one).
            if (p.heldOncePredecessorGoes) {
              expect(modelHoldsWithout(modes, i, (j) => j === watched)).toBe(true);
              if (modes[watched] === 'write') {
                const downgraded = modes.map((mode, j) => (j === watched ? 'read' : mode));
                expect(modelHolds(downgraded, i)).toBe(true);
              }
            }
            expect(p.heldOncePredecessorGoes).toBe(
              watched === 0 && !(modes[watched] === 'write' && modes[i] !== 'read'),
            );
          });

          // The holders are the leading requests, as holders() counts them.
          const holderCount = held.filter(Boolean).length;
          expect(held.slice(0, holderCount).every(Boolean)).toBe(true);
          const queue = queueOrder(children);
          expect(holders(queue).count).toBe(holderCount);
          expect(waiterPlaces(queue)).toEqual(
            new Map(names.flatMap((_, i) => (held[i] ? [] : [[queue[i]!.sequence, i]]))),
          );

          // A holder whose release frees its watchers: each of them holds once it is gone.
          held.forEach((isHeld, h) => {
            if (!isHeld || !releaseFreesWatchers(modes[h]!)) return;
            positions.forEach((p, w) => {
              if (p.kind === 'waiting' && p.predecessor === names[h]) {
                expect(modelHoldsWithout(modes, w, (j) => j === h)).toBe(true);
              }
            });
          });
        },
      ),
      { numRuns: 500 },
    );
  });

  it('on random semaphore queues: holders and used weight, ahead counts, and what each waiter waits for', () => {
    const semaphoreQueue = fc.integer({ min: 1, max: 8 }).chain((limit) =>
      fc.record({
        limit: fc.constant(limit),
        weights: fc.array(fc.integer({ min: 1, max: limit }), { minLength: 1, maxLength: 12 }),
      }),
    );
    fc.assert(
      fc.property(
        semaphoreQueue,
        fc.record(queueShape),
        ({ limit, weights }, { start, gaps, order, foreign, removed }) => {
          const names = nodeNames(
            weights.map((weight, i) => nodePrefix('semaphore', requestId(i + 1), { limit, weight })),
            start,
            gaps,
          );
          const children = listing(names, order, foreign);
          // The model: granted in queue order while the weights up to and including one fit the limit.
          const holdsWith = (ws: readonly number[], i: number): boolean =>
            ws.slice(0, i + 1).reduce((sum, w) => sum + w, 0) <= limit;
          const held = weights.map((_, i) => holdsWith(weights, i));
          const holderCount = held.filter(Boolean).length;

          names.forEach((me, i) => {
            const p = position(children, me);
            expect(p.kind).toBe(held[i] ? 'held' : 'waiting');
            if (p.kind === 'missing') return;
            expect(p.ahead).toBe(i);
            if (p.kind === 'held') {
              expect(p.successor).toBe(names[i + 1]);
              return;
            }
            if (i === holderCount) {
              // The first waiter watches the holders: until one of them goes, it waits.
              expect(p.wake?.kind).toBe('release');
              if (p.wake?.kind !== 'release') return;
              expect([...p.wake.holders].sort()).toEqual(names.slice(0, i).sort());
              expect(holdsWith(weights, i)).toBe(false);
            } else {
              // A later waiter watches the waiter right ahead: while that one waits (whatever
              // else ahead goes), so does it.
              expect(p.wake).toEqual({ kind: 'grant', predecessor: names[i - 1] });
              const left = weights.flatMap((w, j) => (j >= i - 1 || !removed[j] ? [w] : []));
              const me = left.length - 1;
              if (!holdsWith(left, me - 1)) expect(holdsWith(left, me)).toBe(false);
            }
          });

          const queue = queueOrder(children);
          expect(holders(queue)).toEqual({
            count: holderCount,
            usedWeight: weights.slice(0, holderCount).reduce((sum, w) => sum + w, 0),
          });
          expect(waiterPlaces(queue)).toEqual(
            new Map(names.flatMap((_, i) => (held[i] ? [] : [[queue[i]!.sequence, i]]))),
          );
        },
      ),
      { numRuns: 500 },
    );
  });
});
