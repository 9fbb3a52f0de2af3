/*
 * A WRITE hold's downgrade in the store: its node replaced by a READ node in the same place of the
 * queue, with the same record and fencing token.
 */
import { LockError } from '../lock-error.js';
import type { CoordinationStore, NodeFollow, NodeReplacement, StoreSession } from '../stores/store.js';
import { readNodeName } from './lock-nodes.js';
import { encodeNodeRecord, parseNodeRecord } from './lock-nodes.js';

/** What a held lock lends the replacement of its node (see replaceWithReadNode). */
export interface ReplacedHold {
  /** Throws unless the lock is still held; asked before every try. */
  checkHeld(): void;
  /** A follow for the replacement node. */
  newFollow(): NodeFollow;
  /** Set while the store replaces the node: the old node's deletion is then the replacement's. */
  replacing(on: boolean): void;
}

/**
 * A WRITE hold's downgrade, in the store: the node at `path` is replaced by a READ node with the
 * same place in the queue (the same sequence number) and the same record, with `token` written
 * in it (the fencing token stays), so no writer or reader changes places in between; readers
 * queued behind it that waited only for it are granted (their watch on the old node fires). A
 * revocation written meanwhile makes the store refuse the replacement: it is copied too, on the
 * next try. Resolves with the new node's path and follow, or undefined if the node is gone
 * (deleted by a forced revocation, or with its session).
 */
export async function replaceWithReadNode(
  store: CoordinationStore,
  replacement: NodeReplacement | undefined,
  path: string,
  token: bigint,
  session: StoreSession,
  lease: ReplacedHold,
): Promise<{ path: string; follow: NodeFollow } | undefined> {
  if (!replacement)
    throw new LockError('UNSUPPORTED', 'this store cannot replace a node atomically: a downgrade needs it');
  const name = readNodeName(path.slice(path.lastIndexOf('/') + 1));
  for (;;) {
    lease.checkHeld();
    const node = await store.nodeData(path);
    if (!node) return undefined;
    const record = { ...parseNodeRecord(node.data), token: token.toString() };
    const follow = lease.newFollow();
    lease.replacing(true);
    let replaced;
    try {
      replaced = await replacement.replaceNode(
        path,
        name,
        encodeNodeRecord(record),
        node.version,
        session,
        follow,
      );
    } catch (error) {
      follow.stop();
      throw error;
    } finally {
      lease.replacing(false);
    }
    if (replaced === 'conflict') {
      follow.stop();
      continue;
    }
    if (replaced === 'missing') {
      follow.stop();
      return undefined;
    }
    return { path: replaced.path, follow };
  }
}
