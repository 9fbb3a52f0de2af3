import type { LockMode } from './lock-mode.js';
import { isExclusive } from './lock-mode.js';

/** One request in a lock's queue, parsed from its node name `<mode>-<request id>-<sequence>`. */
export interface QueueEntry {
  readonly nodeName: string;
  readonly mode: LockMode;
  readonly requestId: string;
  /** ZooKeeper's sequence suffix: queue order within one lifetime of the lock's parent. */
  readonly sequence: number;
}

export type Position =
  | { readonly kind: 'held'; readonly ahead: number }
  | {
      readonly kind: 'waiting';
      /** How many requests are ahead of ours, holders included. */
      readonly ahead: number;
      /** The one node whose deletion can change our position (no herd: never the parent). */
      readonly predecessor: string;
      /**
       * The predecessor is the head of the queue: once it is deleted, nothing that blocks us
       * remains ahead (later nodes queue behind us), so we hold without listing again.
       */
      readonly predecessorIsHead: boolean;
    }
  | { readonly kind: 'missing' };

// ZooKeeper formats the sequence with %010d: ten digits, or a sign and 9-10 digits once the
// parent's signed 32-bit counter has overflowed (-2147483648 .. -000000001).
const NODE_NAME = /^(mutex|read|write)-([0-9a-f-]{36})-(\d{10}|-\d{9,10})$/;

/** The node name prefix for a request; the store appends the sequence number. */
export function nodePrefix(mode: LockMode, requestId: string): string {
  return `${mode}-${requestId}-`;
}

export function parseNodeName(nodeName: string): QueueEntry | null {
  const match = NODE_NAME.exec(nodeName);
  if (!match) return null;
  const [, mode, requestId, sequence] = match as unknown as [string, LockMode, string, string];
  return { nodeName, mode, requestId, sequence: Number(sequence) };
}

/** Children in queue order: by the numeric sequence suffix, never by the whole name. */
export function queueOrder(children: readonly string[]): QueueEntry[] {
  const entries: QueueEntry[] = [];
  for (const child of children) {
    const entry = parseNodeName(child);
    // Nodes that are not lock requests (written by someone else) take no part in the queue.
    if (entry) entries.push(entry);
  }
  return entries.sort((a, b) => a.sequence - b.sequence);
}

/**
 * Where our request stands. Exclusive requests (mutex, write) hold when they are first and
 * otherwise wait for the node just before them; shared requests (read) hold when no exclusive
 * request is ahead and otherwise wait for the last exclusive request ahead of them.
 */
export function position(children: readonly string[], me: string): Position {
  const queue = queueOrder(children);
  const index = queue.findIndex((entry) => entry.nodeName === me);
  const mine = queue[index];
  if (!mine) return { kind: 'missing' };

  let blocker = index - 1;
  if (!isExclusive(mine.mode)) {
    while (blocker >= 0 && !isExclusive(queue[blocker]!.mode)) blocker -= 1;
  }
  const predecessor = queue[blocker];
  if (!predecessor) return { kind: 'held', ahead: index };
  return {
    kind: 'waiting',
    ahead: index,
    predecessor: predecessor.nodeName,
    predecessorIsHead: blocker === 0,
  };
}
