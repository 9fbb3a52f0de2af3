import { describe, expect, it } from 'vitest';
import { mulberry32 } from '../support/random.js';
import { conflicts, isExclusive, type LockMode } from '../../src/server/engine/lock-request.js';
import { nodePrefix, parseNodeName, queueOrder } from '../../src/server/engine/lock-nodes.js';
import { disagreement, holders, position, type Position } from '../../src/server/engine/queue-position.js';

/** A sequence suffix as ZooKeeper writes it: Java's `%010d` of the parent's (signed int) cversion. */
function zkSequence(n: number): string {
  return n < 0 ? `-${String(-n).padStart(9, '0')}` : String(n).padStart(10, '0');
}

let uuidCounter = 0;
/** A well-formed request id; `fill` picks its hex digit, so tests can make ids sort any way. */
function requestId(fill?: string): string {
  if (fill !== undefined) {
    const f = fill.repeat(32);
    return `${f.slice(0, 8)}-${f.slice(8, 12)}-${f.slice(12, 16)}-${f.slice(16, 20)}-${f.slice(20, 32)}`;
  }
  uuidCounter += 1;
  const hex = uuidCounter.toString(16).padStart(12, '0');
  return `00000000-0000-4000-8000-${hex}`;
}

function node(mode: LockMode, sequence: number, id = requestId()): string {
  return `${nodePrefix(mode, id)}${zkSequence(sequence)}`;
}

/** Builds a queue from modes, in sequence order: `queue('mutex', 'read')`. */
function queue(...modes: LockMode[]): string[] {
  return modes.map((mode, i) => node(mode, i));
}

function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i -= 1) {
    const j = Math.floor(random() * (i + 1));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy;
}

describe('the grant rule', () => {
  it('lets reads share and makes every other pair of modes conflict', () => {
    const modes: LockMode[] = ['mutex', 'read', 'write'];
    const table = modes.map((a) => modes.map((b) => (conflicts(a, b) ? 'x' : '.')).join('')).join(' ');
    // Rows and columns: mutex, read, write.
    expect(table).toBe('xxx x.x xxx');
  });
});

describe('parseNodeName and nodePrefix', () => {
  it('parses what nodePrefix and a ZooKeeper sequence make', () => {
    const id = requestId();
    expect(parseNodeName(`${nodePrefix('write', id)}0000000042`)).toEqual({
      nodeName: `write-${id}-0000000042`,
      mode: 'write',
      requestId: id,
      sequence: 42,
      limit: 0,
      weight: 0,
    });
    expect(parseNodeName(`${nodePrefix('semaphore', id, { limit: 10, weight: 3 })}0000000007`)).toEqual({
      nodeName: `sem-10-3-${id}-0000000007`,
      mode: 'semaphore',
      requestId: id,
      sequence: 7,
      limit: 10,
      weight: 3,
    });
  });

  it('rejects names that are not lock requests', () => {
    const id = requestId();
    for (const name of [
      'lock',
      '',
      `shared-${id}-0000000001`,
      `mutex-not-a-uuid-0000000001`,
      `mutex-${id}-1`,
      `mutex-${id}-00000000001`,
      `mutex-${id}-0000000001-extra`,
      `MUTEX-${id}-0000000001`,
      `sem-3-${id}-0000000001`,
      `sem--1-${id}-0000000001`,
      `sem-12345678-1-${id}-0000000001`,
      `sem-3-x-${id}-0000000001`,
      `semaphore-3-1-${id}-0000000001`,
    ]) {
      expect(parseNodeName(name), name).toBeNull();
    }
  });

  it('parses the negative sequences ZooKeeper writes after its counter overflows, from -2147483648 to -000000001', () => {
    const id = requestId();
    for (const sequence of [-2147483648, -2147483647, -1000000000, -999999999, -5, -1]) {
      const name = `mutex-${id}-${zkSequence(sequence)}`;
      expect(parseNodeName(name)?.sequence, name).toBe(sequence);
    }
  });
});

describe('queueOrder', () => {
  it('orders by the numeric sequence, not by the whole name', () => {
    // The request ids sort the opposite way from the sequences.
    const first = node('mutex', 7, requestId('f'));
    const second = node('mutex', 8, requestId('a'));
    const third = node('mutex', 10, requestId('0'));
    expect([second, third, first].sort()).not.toEqual([first, second, third]);
    expect(queueOrder([third, first, second]).map((e) => e.nodeName)).toEqual([first, second, third]);
  });

  it('puts a negative sequence (after overflow) first, and orders negatives numerically', () => {
    const big = node('mutex', 2147483647);
    const min = node('mutex', -2147483648);
    const next = node('mutex', -2147483647);
    // Lexically "-2147483647" < "-2147483648"; numerically it is the other way round.
    expect(queueOrder([big, next, min]).map((e) => e.nodeName)).toEqual([min, next, big]);
  });

  it('leaves foreign node names out of the queue', () => {
    const a = node('read', 1);
    const b = node('write', 2);
    expect(queueOrder(['lock', b, 'read-zzz-0000000000', a]).map((e) => e.nodeName)).toEqual([a, b]);
  });
});

describe('position', () => {
  it('holds a mutex that is alone in the queue', () => {
    const [me] = queue('mutex');
    expect(position([me!], me!)).toMatchObject({ kind: 'held', ahead: 0 });
  });

  it('makes a second mutex wait for the head', () => {
    const [head, me] = queue('mutex', 'mutex');
    expect(position([head!, me!], me!)).toMatchObject({
      kind: 'waiting',
      ahead: 1,
      predecessor: head,
      predecessorIsHead: true,
    });
  });

  it('makes an exclusive request wait for the node just before it, not the head', () => {
    const [a, b, me] = queue('mutex', 'mutex', 'write');
    expect(position([a!, b!, me!], me!)).toMatchObject({
      kind: 'waiting',
      ahead: 2,
      predecessor: b,
      predecessorIsHead: false,
    });
  });

  it('queues mutex and write requests in one queue, both exclusive', () => {
    const [w, m] = queue('write', 'mutex');
    expect(position([w!, m!], w!)).toMatchObject({ kind: 'held', ahead: 0 });
    expect(position([w!, m!], m!)).toMatchObject({ kind: 'waiting', predecessor: w });
    const [m2, w2] = queue('mutex', 'write');
    expect(position([m2!, w2!], w2!)).toMatchObject({ kind: 'waiting', predecessor: m2 });
  });

  it('lets readers share: every reader before the first exclusive request holds', () => {
    const children = queue('read', 'read', 'read', 'write', 'read');
    expect(position(children, children[0]!)).toMatchObject({ kind: 'held', ahead: 0 });
    expect(position(children, children[1]!)).toMatchObject({ kind: 'held', ahead: 1 });
    expect(position(children, children[2]!)).toMatchObject({ kind: 'held', ahead: 2 });
    expect(position(children, children[3]!)).toMatchObject({ kind: 'waiting', ahead: 3 });
    expect(position(children, children[4]!)).toMatchObject({ kind: 'waiting', ahead: 4 });
  });

  it('makes a writer behind readers wait for the reader just before it', () => {
    const [r1, r2, w] = queue('read', 'read', 'write');
    expect(position([r1!, r2!, w!], w!)).toMatchObject({
      kind: 'waiting',
      ahead: 2,
      predecessor: r2,
      predecessorIsHead: false,
    });
  });

  it('makes a reader wait for the LAST exclusive request before it, not the first', () => {
    const [w1, w2, r] = queue('write', 'mutex', 'read');
    expect(position([w1!, w2!, r!], r!)).toMatchObject({
      kind: 'waiting',
      ahead: 2,
      predecessor: w2,
      predecessorIsHead: false,
    });
  });

  it('makes readers skip the readers between them and the last exclusive request', () => {
    const [w1, r1, w2, r2, r3] = queue('write', 'read', 'write', 'read', 'read');
    const children = [w1!, r1!, w2!, r2!, r3!];
    expect(position(children, r1!)).toMatchObject({
      kind: 'waiting',
      ahead: 1,
      predecessor: w1,
      predecessorIsHead: true,
    });
    expect(position(children, w2!)).toMatchObject({
      kind: 'waiting',
      ahead: 2,
      predecessor: r1,
      predecessorIsHead: false,
    });
    expect(position(children, r2!)).toMatchObject({
      kind: 'waiting',
      ahead: 3,
      predecessor: w2,
      predecessorIsHead: false,
    });
    expect(position(children, r3!)).toMatchObject({
      kind: 'waiting',
      ahead: 4,
      predecessor: w2,
      predecessorIsHead: false,
    });
  });

  it('reports predecessorIsHead for a reader whose only blocker is the head writer, several readers back', () => {
    const [w, r1, r2] = queue('write', 'read', 'read');
    expect(position([w!, r1!, r2!], r2!)).toMatchObject({
      kind: 'waiting',
      ahead: 2,
      predecessor: w,
      predecessorIsHead: true,
    });
  });

  it('gives the same answer for unsorted children', () => {
    const children = queue('read', 'write', 'read', 'mutex', 'read');
    const random = mulberry32(7);
    for (let round = 0; round < 20; round += 1) {
      const mixed = shuffled(children, random);
      for (const me of children) expect(position(mixed, me)).toMatchObject(position(children, me));
    }
  });

  it('orders by sequence even when the request ids sort the other way', () => {
    const holder = node('mutex', 9, requestId('f'));
    const me = node('mutex', 10, requestId('0'));
    expect(position([me, holder], me)).toMatchObject({ kind: 'waiting', predecessor: holder });
    expect(position([me, holder], holder)).toMatchObject({ kind: 'held', ahead: 0 });
  });

  it('puts a node created after the sequence overflowed (negative) ahead of positive ones', () => {
    const positive = node('mutex', 2147483647);
    const negative = node('mutex', -2147483648);
    expect(position([positive, negative], negative)).toMatchObject({ kind: 'held', ahead: 0 });
    expect(position([positive, negative], positive)).toMatchObject({
      kind: 'waiting',
      predecessor: negative,
    });
  });

  it('ignores foreign node names: they neither block nor count as ahead', () => {
    const [holder, me] = queue('mutex', 'mutex');
    const children = ['zookeeper', 'lock-0000000000', holder!, 'mutex-x-0000000001', me!];
    expect(position(children, holder!)).toMatchObject({ kind: 'held', ahead: 0 });
    expect(position(children, me!)).toMatchObject({
      kind: 'waiting',
      ahead: 1,
      predecessor: holder,
      predecessorIsHead: true,
    });
  });

  it('is `missing` when our node is not among the children', () => {
    const [a, b, me] = queue('mutex', 'read', 'read');
    expect(position([a!, b!], me!)).toMatchObject({ kind: 'missing' });
    expect(position([], me!)).toMatchObject({ kind: 'missing' });
  });

  it('is `missing` for a foreign name, even when it is listed', () => {
    expect(position(['lock', 'other'], 'lock')).toMatchObject({ kind: 'missing' });
  });

  it('counts everything ahead, holders included', () => {
    const children = queue('read', 'read', 'write', 'read', 'mutex', 'read');
    expect(children.map((me) => (position(children, me) as { ahead: number }).ahead)).toEqual([
      0, 1, 2, 3, 4, 5,
    ]);
  });
});

describe('position, on 500 random queues', () => {
  const MODES: readonly LockMode[] = ['mutex', 'read', 'write'];

  it('grants exactly the leading readers or the single leading exclusive request, and makes every waiter wait on an earlier node that can block it', () => {
    const random = mulberry32(0x5eed);
    for (let testCase = 0; testCase < 500; testCase += 1) {
      const length = 1 + Math.floor(random() * 12);
      // Mostly readers, so that reader runs of every length occur.
      const modes = Array.from({ length }, () =>
        random() < 0.5 ? 'read' : MODES[Math.floor(random() * MODES.length)]!,
      );
      // Growing sequences with gaps (deleted nodes), sometimes starting below zero.
      let sequence = random() < 0.2 ? -2147483648 + Math.floor(random() * 10) : Math.floor(random() * 1000);
      const names = modes.map((mode) => {
        sequence += 1 + Math.floor(random() * 3);
        return node(mode, sequence);
      });
      const foreign = random() < 0.3 ? ['lock', `read-${requestId()}-7`] : [];
      const children = shuffled([...names, ...foreign], random);
      const where = `case ${testCase}: ${modes.join(' ')}`;

      const positions: Position[] = names.map((me) => position(children, me));

      // The grant rule itself: a request holds when nothing ahead of it conflicts with it.
      const expectedHeld = new Set<number>();
      modes.forEach((mode, i) => {
        if (modes.slice(0, i).every((ahead) => !conflicts(ahead, mode))) expectedHeld.add(i);
      });
      const held = new Set(positions.flatMap((p, i) => (p.kind === 'held' ? [i] : [])));
      expect([...held], where).toEqual([...expectedHeld]);
      // The inspector's count of holders says the same.
      expect(holders(queueOrder(children)).count, where).toBe(expectedHeld.size);

      positions.forEach((p, i) => {
        expect(p.kind, where).not.toBe('missing');
        if (p.kind === 'missing') return;
        expect(p.ahead, where).toBe(i);
        if (p.kind === 'held') return;
        const predecessor = names.indexOf(p.predecessor);
        expect(predecessor, where).toBeGreaterThanOrEqual(0);
        expect(predecessor, where).toBeLessThan(i);
        expect(p.predecessorIsHead, where).toBe(predecessor === 0);
        if (isExclusive(modes[i]!)) {
          expect(predecessor, `${where}: an exclusive request waits on the node just before it`).toBe(i - 1);
        } else {
          expect(isExclusive(modes[predecessor]!), `${where}: a reader waits on an exclusive node`).toBe(
            true,
          );
          const between = modes.slice(predecessor + 1, i);
          expect(between.some(isExclusive), `${where}: a reader waits on the last exclusive node`).toBe(
            false,
          );
        }
      });
    }
  });
});

/** A semaphore request node of `limit` and `weight` at `sequence`. */
function semaphoreNode(limit: number, weight: number, sequence: number): string {
  return `${nodePrefix('semaphore', requestId(), { limit, weight })}${zkSequence(sequence)}`;
}

describe('semaphore positions', () => {
  it('holds while the weights up to ours fit the limit; the first waiter watches the holders, later ones the waiter ahead', () => {
    // limit 4: 2 + 1 hold, 2 waits for released weight, 1 waits for the grant ahead of it.
    const children = [2, 1, 2, 1].map((weight, i) => semaphoreNode(4, weight, i));
    const [a, b, c, d] = children as [string, string, string, string];
    expect(position(children, a)).toEqual({ kind: 'held', ahead: 0, head: undefined, successor: b });
    expect(position(children, b)).toEqual({ kind: 'held', ahead: 1, head: a, successor: c });
    expect(position(children, c)).toMatchObject({
      kind: 'waiting',
      ahead: 2,
      predecessor: b,
      head: a,
      wake: { kind: 'release', holders: [a, b] },
    });
    expect(position(children, d)).toMatchObject({
      kind: 'waiting',
      ahead: 3,
      predecessor: c,
      wake: { kind: 'grant', predecessor: c },
    });
    expect(holders(queueOrder(children)).count).toBe(2);
    expect(holders(queueOrder(children))).toEqual({ count: 2, usedWeight: 3 });
  });

  it('lets nothing pass a lock request ahead (one that is about to fail), and makes lock requests wait behind semaphore requests', () => {
    const sem = semaphoreNode(10, 1, 1);
    const mutex = node('mutex', 2);
    const later = semaphoreNode(10, 1, 3);
    expect(position([sem, mutex, later], later)).toMatchObject({
      kind: 'waiting',
      wake: { kind: 'grant', predecessor: mutex },
    });
    expect(position([sem, mutex, later], mutex)).toMatchObject({ kind: 'waiting', predecessor: sem });
  });

  it('agrees only with a queue of the same kind: one limit for a semaphore, any lock mode for a lock', () => {
    const five = semaphoreNode(5, 1, 1);
    expect(disagreement(five, semaphoreNode(5, 5, 2))).toBeUndefined();
    expect(disagreement(five, semaphoreNode(3, 1, 2))).toBe(
      'the request first in its queue uses it as a semaphore of limit 5; this request asks for a semaphore of limit 3',
    );
    expect(disagreement(five, node('read', 2))).toMatch(
      /a semaphore of limit 5; this request asks for READ mode/,
    );
    expect(disagreement(node('write', 1), five)).toMatch(
      /WRITE mode; this request asks for a semaphore of limit 5/,
    );
    expect(disagreement(node('write', 1), node('read', 2))).toBeUndefined();
  });

  it('grants, on 500 random queues, exactly the leading requests whose weights fit, and wakes each waiter on what can change its answer', () => {
    const random = mulberry32(0x5e3a);
    for (let testCase = 0; testCase < 500; testCase += 1) {
      const limit = 1 + Math.floor(random() * 6);
      const weights = Array.from(
        { length: 1 + Math.floor(random() * 10) },
        () => 1 + Math.floor(random() * limit),
      );
      const names = weights.map((weight, i) => semaphoreNode(limit, weight, 3 * i));
      const children = shuffled(names, random);
      const where = `case ${testCase}: limit ${limit}, weights ${weights.join(' ')}`;
      let sum = 0;
      const fits = weights.map((weight) => (sum += weight) <= limit);
      const held = fits.indexOf(false) === -1 ? fits.length : fits.indexOf(false);
      names.forEach((me, i) => {
        const p = position(children, me);
        if (i < held) {
          expect(p, where).toMatchObject({ kind: 'held', ahead: i, successor: names[i + 1] });
          return;
        }
        expect(p.kind, where).toBe('waiting');
        if (p.kind !== 'waiting') return;
        // Holders in any order: the listing's.
        const wake = p.wake?.kind === 'release' ? { ...p.wake, holders: [...p.wake.holders].sort() } : p.wake;
        expect(wake, where).toEqual(
          i === held
            ? { kind: 'release', holders: names.slice(0, i).sort() }
            : { kind: 'grant', predecessor: names[i - 1] },
        );
      });
      expect(holders(queueOrder(children)).count, where).toBe(held);
    }
  });
});
