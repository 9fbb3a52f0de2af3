import { describe, expect, it } from 'vitest';
import { TreeView } from '../../src/server/stores/zookeeper/tree-view.js';

/**
 * The view's bookkeeping for listings: an answer is taken in after the rest of its round trip
 * (the create before it, the reads behind it), and the watch may have told changes meanwhile.
 */
const LOCKS = '/root/locks';
const DIR = `${LOCKS}/job`;
const node = (sequence: number): string => `write-${String(sequence).padStart(10, '0')}`;

function watching(): TreeView {
  const view = new TreeView(LOCKS);
  view.started();
  return view;
}

describe('TreeView listings', () => {
  it('keeps no node deleted after its listing was answered: what was told since it was sent is replayed onto it', () => {
    const view = watching();
    const ticket = view.listing(DIR);
    // Told after the listing was answered (its answer still holds node 0), before it is taken in.
    view.changed('deleted', `${DIR}/${node(0)}`);
    view.changed('created', `${DIR}/${node(2)}`);
    view.listed(ticket, [node(0), node(1)]);
    expect(view.children(DIR)?.sort()).toEqual([node(1), node(2)]);
    expect(view.has(`${DIR}/${node(0)}`)).toBe(false);
  });

  it('replays a change its answer already holds without harm (a node is created once, deleted once)', () => {
    const view = watching();
    const ticket = view.listing(DIR);
    view.changed('created', `${DIR}/${node(1)}`);
    view.changed('deleted', `${DIR}/${node(0)}`);
    view.listed(ticket, [node(1)]);
    expect(view.children(DIR)).toEqual([node(1)]);
  });

  it('takes in the parent going after its listing: known gone, then made again empty', () => {
    const view = watching();
    const gone = view.listing(DIR);
    view.changed('deleted', `${DIR}/${node(0)}`);
    view.changed('deleted', DIR);
    view.listed(gone, [node(0)]);
    expect(view.exists(DIR)).toBe(false);
    expect(view.children(DIR)).toEqual([]);

    const again = view.listing(DIR);
    view.changed('created', DIR);
    view.changed('created', `${DIR}/${node(0)}`);
    view.listed(again, []);
    expect(view.children(DIR)).toEqual([node(0)]);
  });

  it('ignores a listing sent before a gap, and one whose answer is not wanted', () => {
    const view = watching();
    const before = view.listing(DIR);
    view.started(); // the watch set again after a reconnect: nothing known
    view.listed(before, [node(0)]);
    expect(view.inStep(DIR)).toBe(false);

    const failed = view.listing(DIR);
    view.unlisted(failed);
    view.changed('created', `${DIR}/${node(1)}`);
    expect(view.inStep(DIR)).toBe(false);
  });
});

describe('TreeView scan of the locks path', () => {
  it('replays the lock parents made and removed while the scan was on its way', () => {
    // Room for one parent in step: the others are answered from the scan's set of parents.
    const view = new TreeView(LOCKS, 1);
    view.started();
    const ticket = view.listing(LOCKS);
    // Told before the scan's answer is taken in (the answer still lists `old`, not `made`).
    view.changed('created', `${LOCKS}/made`);
    view.changed('deleted', `${LOCKS}/old`);
    view.changed('created', `${LOCKS}/other`); // the one kept in step: `made` and `old` leave it
    view.scanned(ticket, ['old', 'kept']);
    expect(view.inStep(`${LOCKS}/made`)).toBe(false);
    expect(view.exists(`${LOCKS}/made`)).toBe(true);
    expect(view.exists(`${LOCKS}/old`)).toBe(false);
    expect(view.exists(`${LOCKS}/kept`)).toBe(true);
  });

  it('ignores a scan sent before a gap, and knows nothing of parents until a scan is taken in', () => {
    const view = new TreeView(LOCKS, 1);
    view.started();
    const before = view.listing(LOCKS);
    view.started();
    view.scanned(before, ['kept']);
    expect(view.exists(`${LOCKS}/kept`)).toBeUndefined();
    const after = view.listing(LOCKS);
    view.scanned(after, ['kept']);
    expect(view.exists(`${LOCKS}/kept`)).toBe(true);
  });
});
