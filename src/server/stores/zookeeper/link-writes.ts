/* Sends a write without the ownership fence: one op as its plain request, several as a multi. */
import { ErrorCode } from './protocol/records.js';
import type { LinkOp, LinkOpResult, LinkReply, ZooKeeperLink } from './zookeeper-link.js';

/** A write without a fence: one op as its plain request, several as a multi. */
export async function plainWrite(
  link: ZooKeeperLink,
  ops: readonly LinkOp[],
): Promise<LinkReply<LinkOpResult[]>> {
  const [op] = ops;
  if (ops.length !== 1 || op === undefined) return link.multi!(ops);
  switch (op.op) {
    case 'create': {
      const reply = await link.create(op.path, op.data, op.mode, op.acl);
      const created = reply.value;
      return {
        rc: reply.rc,
        value:
          created &&
          (created.creationId === undefined
            ? [{ op: 'create', path: created.path }]
            : [{ op: 'create', path: created.path, creationId: created.creationId }]),
      };
    }
    case 'delete': {
      if (op.version !== -1) return link.multi!(ops);
      const reply = await link.delete(op.path);
      return { rc: reply.rc, value: reply.rc === ErrorCode.ok ? [{ op: 'delete' }] : null };
    }
    case 'setData': {
      const reply = await link.setData(op.path, op.data, op.version);
      // The new version is not needed where writes go unfenced.
      return { rc: reply.rc, value: reply.rc === ErrorCode.ok ? [{ op: 'setData', version: -1 }] : null };
    }
    case 'check':
      return link.multi!(ops);
  }
}
