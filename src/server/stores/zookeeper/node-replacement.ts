/* Replaces a node by another in one multi on ZooKeeper (NodeReplacement: a WRITE hold's downgrade). */
import { LockError } from '../../lock-error.js';
import type { NodeFollow } from '../node-follow.js';
import { joinPath, parentPath } from '../node-paths.js';
import type { NodeData, ReplacedNode, StoreSession } from '../store.js';
import type { NodeWatches } from './node-watches.js';
import { ErrorCode } from './protocol/records.js';
import type { SessionKeeper } from './session-keeper.js';
import type { TreeProtection } from './tree-protection.js';
import { MAX_ATTEMPTS, isConnectionLoss, multiUnsupported, unavailable } from './zookeeper-failures.js';
import type { LinkOp } from './zookeeper-link.js';

/** What replaceNode works with: the store's session, its node watches and its ACLs. */
export interface ReplacementParts {
  readonly keeper: SessionKeeper;
  readonly watches: NodeWatches;
  readonly protection: TreeProtection;
}

/**
 * The store's other create (see CoordinationStore.replaceNode): node `name` beside `path`, made
 * in the same multi that deletes `path` at `version` (the compare in the compare-and-set), and
 * followed from then on. 'conflict' when `path` changed, 'missing' when it is gone or no longer
 * this store's session's.
 */
export async function replaceNode(
  { keeper, watches, protection }: ReplacementParts,
  path: string,
  name: string,
  data: Uint8Array,
  version: number,
  session: StoreSession,
  follow: NodeFollow,
): Promise<ReplacedNode | 'missing' | 'conflict'> {
  if (!keeper.link.multi) throw multiUnsupported('one node replaced by another in one step');
  const dir = parentPath(path);
  const newPath = joinPath(dir, name);
  const ops: LinkOp[] = [
    { op: 'create', path: newPath, data, mode: 'ephemeral', acl: protection.aclFor(dir) },
    { op: 'delete', path, version },
  ];
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt += 1) {
    await keeper.whenConnected('multi');
    // An ephemeral node belongs to the session that creates it: never one other than the old
    // node's. Lost, given up or taken over, the old node is not this store's to replace any
    // more (a taken one lives on, someone else's; nothing is written to it).
    if (session !== keeper.session) return 'missing';
    const reply = await keeper.write(ops, keeper.session);
    const created = reply.value?.[0];
    if (reply.rc === ErrorCode.ok && created?.op === 'create') {
      const followed = await watches.watchNode(newPath, follow);
      return followed ? { path: newPath, creationId: created.creationId ?? followed.creationId } : 'missing';
    }
    if (reply.rc === ErrorCode.badVersion) return 'conflict';
    if (reply.rc === ErrorCode.noNode) return 'missing';
    if (reply.rc !== ErrorCode.nodeExists && !isConnectionLoss(reply.rc))
      throw unavailable('multi', reply.rc);
    // The reply was lost (or an earlier try was applied and its reply lost): look before trying again.
    await keeper.whenConnected('multi');
    if (session !== keeper.session) return 'missing';
    const existing: NodeData | null = await watches.watchNode(newPath, follow);
    if (existing) return { path: newPath, creationId: existing.creationId };
  }
  throw new LockError('UNAVAILABLE', `ZooKeeper multi under ${dir} kept losing its connection`);
}
