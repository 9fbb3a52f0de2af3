import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TreeView, type ListingTicket } from '../../src/server/stores/zookeeper/tree-view.js';

/*
 * The tree's view against the tree itself, on random histories: lock parents made and removed,
 * nodes created and deleted, listings of a parent and scans of the locks path sent, answered
 * (with the tree as it is at that moment) and taken in later, or dropped, and gaps (a reconnect:
 * nothing known). Whatever the view says it knows must be the tree as of the last event told:
 * a waiter trusts it without asking ZooKeeper.
 */

const LOCKS = '/root/locks';
const PARENTS = ['a', 'b', 'c'] as const;

/** A listing on its way: sent, then answered at some later moment, then taken in (or dropped). */
interface Listing {
  readonly ticket: ListingTicket;
  /** The parent listed, or undefined for a scan of the locks path. */
  readonly parent: string | undefined;
  /** The answer, once ZooKeeper has answered: the names listed, or null for NONODE. */
  answer?: string[] | null;
}

type Step = readonly [kind: number, pick: number, other: number];

function run(steps: readonly Step[], limit: number): void {
  const view = new TreeView(LOCKS, limit);
  // The tree: each existing lock parent's children.
  const tree = new Map<string, Set<string>>();
  const listings: Listing[] = [];
  let sequence = 0;
  // The tree's first steps happen before the watch is set: what they made is learnt by listing.
  let watching = false;

  const dirOf = (parent: string): string => `${LOCKS}/${parent}`;
  const tell = (kind: 'created' | 'deleted', path: string): void => view.changed(kind, path);

  for (const [index, [kind, pick, other]] of steps.entries()) {
    if (!watching && index >= steps.length / 4) {
      watching = true;
      view.started();
    }
    const parent = PARENTS[pick % PARENTS.length]!;
    const children = tree.get(parent);
    switch (kind) {
      case 0: // a lock parent made (a create's parent, in its multi)
        if (!children) {
          tree.set(parent, new Set());
          tell('created', dirOf(parent));
        }
        break;
      case 1: // an empty lock parent removed (ZooKeeper's container reaper)
        if (children && children.size === 0) {
          tree.delete(parent);
          tell('deleted', dirOf(parent));
        }
        break;
      case 2: // a node created (names are never used twice)
      case 3:
        if (children) {
          const name = `write-${String((sequence += 1)).padStart(10, '0')}`;
          children.add(name);
          tell('created', `${dirOf(parent)}/${name}`);
        }
        break;
      case 4: // a node deleted
        if (children && children.size > 0) {
          const names = [...children];
          const name = names[other % names.length]!;
          children.delete(name);
          tell('deleted', `${dirOf(parent)}/${name}`);
        }
        break;
      case 5: // a listing sent: of a parent, or (one in four) a scan of the locks path
        if (other % 4 === 0) listings.push({ ticket: view.listing(LOCKS), parent: undefined });
        else listings.push({ ticket: view.listing(dirOf(parent)), parent });
        break;
      case 6: {
        // ZooKeeper answers the oldest listing not yet answered (a session is answered in order)
        const listing = listings.find((each) => each.answer === undefined);
        if (listing)
          listing.answer =
            listing.parent === undefined
              ? [...tree.keys()]
              : tree.has(listing.parent)
                ? [...tree.get(listing.parent)!]
                : null;
        break;
      }
      case 7: {
        // an answer taken in (some turns later), or dropped
        const index = listings.findIndex((each) => each.answer !== undefined);
        if (index === -1) break;
        const [listing] = listings.splice(index, 1);
        const { ticket, parent, answer } = listing!;
        if (other % 5 === 0) view.unlisted(ticket);
        else if (parent === undefined) view.scanned(ticket, answer ?? []);
        else if (answer === null || answer === undefined) view.unlisted(ticket);
        else view.listed(ticket, answer);
        break;
      }
      case 8: // a gap: the watch set again after a reconnect; answers on their way are stale
        if (other % 3 === 0) view.started();
        break;
    }

    for (const name of PARENTS) {
      const dir = dirOf(name);
      const truth = tree.get(name);
      const exists = view.exists(dir);
      if (exists !== undefined) expect(exists, `exists(${name})`).toBe(truth !== undefined);
      if (view.inStep(dir))
        expect(view.children(dir)!.sort(), `children(${name})`).toEqual([...(truth ?? [])].sort());
      for (const child of truth ?? []) {
        const has = view.has(`${dir}/${child}`);
        if (has !== undefined) expect(has, `has(${name}/${child})`).toBe(true);
      }
    }
  }
}

describe('TreeView against the tree', () => {
  const step = fc.tuple(fc.nat(8), fc.nat(99), fc.nat(99));

  it('knows each lock parent in step as the tree is, through late answers, dropped ones and gaps', () => {
    fc.assert(
      fc.property(fc.array(step, { minLength: 40, maxLength: 300 }), (steps) => run(steps, 10_000)),
      { numRuns: 500 },
    );
  });

  it('does so while forgetting parents past its limit (answered from the scan of the locks path)', () => {
    fc.assert(
      fc.property(fc.array(step, { minLength: 40, maxLength: 300 }), (steps) => run(steps, 1)),
      { numRuns: 500 },
    );
  });
});
