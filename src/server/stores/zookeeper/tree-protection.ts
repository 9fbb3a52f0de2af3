/* The ACL of lockstream's subtree (digest-only when protected), and the start-up check of the chroot. */
import { createHash } from 'node:crypto';
import { ancestors, joinPath } from '../node-paths.js';
import { chrootOf, missingChroot } from './chroot.js';
import type { LinkOperations } from './link-operations.js';
import { ErrorCode, Perms, type Acl } from './protocol/records.js';
import { protectionFailure } from './zookeeper-failures.js';

/**
 * Who may touch lockstream's subtree (its root): with digest credentials, the root, every node
 * the store creates below it, and the lock parents already there get an ACL that gives those
 * credentials everything and everyone else nothing: no one else can create or delete lock
 * nodes, or even list them. Without credentials, nodes are open (ZooKeeper's default).
 */
export class TreeProtection {
  readonly #root: string | undefined;
  /** The ACL of nodes in the protected subtree; undefined without protection. */
  readonly #acl: readonly Acl[] | undefined;

  constructor(protection: { readonly digest: string; readonly root: string } | undefined) {
    this.#root = protection?.root;
    this.#acl = protection && digestAcl(protection.digest);
  }

  /** The ACL a node at `path` gets: the protected one at or below the root, none elsewhere. */
  aclFor(path: string): readonly Acl[] | undefined {
    const root = this.#root;
    return root !== undefined && (path === root || path.startsWith(`${root}/`)) ? this.#acl : undefined;
  }

  /**
   * At start-up with protection: the root and the nodes of the lock layout below it
   * (`<root>/<dir>/<lock parent>`; request nodes under those have unguessable names and cannot
   * be listed by others) get the protected ACL, including those an unprotected server created.
   */
  async protect(ops: LinkOperations): Promise<void> {
    const root = this.#root;
    if (root === undefined) return;
    for (const ancestor of ancestors(root))
      await ops.createParent(ancestor, 'persistent', this.aclFor(ancestor));
    await ops.createParent(root, 'persistent', this.aclFor(root));
    // A root made before, by an unprotected server, is taken over; one that other credentials
    // protect stops start-up here (NOAUTH).
    await this.#setAcl(ops, root);
    for (const dir of await ops.children(root)) {
      const path = joinPath(root, dir);
      await this.#setAcl(ops, path);
      await Promise.all(
        (await ops.children(path)).map((parent) => this.#setAcl(ops, joinPath(path, parent))),
      );
    }
  }

  async #setAcl(ops: LinkOperations, path: string): Promise<void> {
    const acl = this.aclFor(path);
    if (!acl) return;
    const reply = await ops.call('setACL', (link) => link.setAcl(path, acl));
    if (reply.rc !== ErrorCode.ok && reply.rc !== ErrorCode.noNode) throw protectionFailure(path, reply.rc);
  }
}

/** A connect string's chroot must exist: ZooKeeper would answer every request with NONODE. */
export async function checkChroot(ops: LinkOperations, connectString: string): Promise<void> {
  const chroot = chrootOf(connectString);
  if (chroot === undefined) return;
  const reply = await ops.call('exists', (link) => link.exists('/', false));
  if (reply.rc === ErrorCode.noNode) throw missingChroot(chroot);
}

/**
 * Everything for the holder of `user:password`, nothing for anyone else. ZooKeeper's digest
 * scheme names an identity by `user:base64(sha1("user:password"))`.
 */
function digestAcl(credentials: string): readonly Acl[] {
  const user = credentials.slice(0, credentials.indexOf(':'));
  const hash = createHash('sha1').update(credentials, 'utf8').digest('base64');
  return [{ perms: Perms.all, scheme: 'digest', id: `${user}:${hash}` }];
}
