/**
 * The textbook ZooKeeper lock recipe (zookeeper.apache.org, "Recipes and Solutions": Locks and
 * Shared Locks), in-process on one shared session of the native client, with nothing clever:
 * every step waits for the previous reply, and every wake-up lists the children again. The
 * benchmark's baseline: what an application gets by writing the recipe itself.
 */
import {
  connectPlainHandle,
  zk,
  type ZooKeeperHandle,
} from '../dist/server/stores/zookeeper/zookeeper-client.js';
import type { LockMode, LockSession } from './workloads.js';

export class NaiveRecipe implements LockSession {
  readonly #handle: ZooKeeperHandle;
  readonly #root: string;
  /** Exists watches armed, by path: woken by the default watcher's deletion events. */
  readonly #deletionWaiters = new Map<string, Array<() => void>>();

  private constructor(handle: ZooKeeperHandle, root: string) {
    this.#handle = handle;
    this.#root = root;
    handle.on('deleted', (_self: unknown, path: string) => this.#wake(path));
    handle.on('changed', (_self: unknown, path: string) => this.#wake(path));
  }

  static async connect(connectString: string, root: string): Promise<NaiveRecipe> {
    return new NaiveRecipe(await connectPlainHandle(connectString), root);
  }

  async acquire(name: string, mode: LockMode): Promise<() => Promise<void>> {
    const dir = `${this.#root}/${name}`;
    const prefix = mode === 'read' ? 'read-' : 'write-';
    const path = await this.#create(`${dir}/${prefix}`);
    const me = path.slice(dir.length + 1);
    for (;;) {
      const children = (await this.#children(dir)).sort((a, b) => sequence(a) - sequence(b));
      const index = children.indexOf(me);
      // A reader waits only for the last writer ahead of it; a writer for whoever is just ahead.
      const blockers =
        mode === 'read'
          ? children.slice(0, index).filter((c) => c.startsWith('write-'))
          : children.slice(0, index);
      const blocker = blockers.at(-1);
      if (blocker === undefined) return () => this.#delete(path);
      await this.#whenDeleted(`${dir}/${blocker}`);
    }
  }

  close(): void {
    this.#handle.close();
  }

  #wake(path: string): void {
    const waiters = this.#deletionWaiters.get(path);
    this.#deletionWaiters.delete(path);
    for (const wake of waiters ?? []) wake();
  }

  /** exists() with a watch: resolves once the node is gone (at once if it already is). */
  #whenDeleted(path: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#handle.native.a_exists(path, true, (rc) => {
        if (rc === zk.ZNONODE) return resolve();
        if (rc !== zk.ZOK) return reject(new Error(`exists ${path}: ${rc}`));
        const waiters = this.#deletionWaiters.get(path) ?? [];
        waiters.push(resolve);
        this.#deletionWaiters.set(path, waiters);
      });
    });
  }

  async #create(path: string): Promise<string> {
    for (;;) {
      const { rc, value } = await new Promise<{ rc: number; value: string }>((resolve) =>
        this.#handle.native.a_create(path, '', zk.ZOO_EPHEMERAL_SEQUENTIAL, (rc, _e, value) =>
          resolve({ rc, value }),
        ),
      );
      if (rc === zk.ZOK) return value;
      if (rc !== zk.ZNONODE) throw new Error(`create ${path}: ${rc}`);
      await this.#createParents(path.slice(0, path.lastIndexOf('/')));
    }
  }

  async #createParents(dir: string): Promise<void> {
    const parts = dir.split('/').slice(1);
    for (let i = 1; i <= parts.length; i += 1) {
      const path = `/${parts.slice(0, i).join('/')}`;
      const rc = await new Promise<number>((resolve) =>
        this.#handle.native.a_create(path, '', zk.ZOO_PERSISTENT, (code) => resolve(code)),
      );
      if (rc !== zk.ZOK && rc !== zk.ZNODEEXISTS) throw new Error(`create ${path}: ${rc}`);
    }
  }

  #children(dir: string): Promise<string[]> {
    return new Promise((resolve, reject) =>
      this.#handle.native.a_get_children(dir, false, (rc, _e, children) =>
        rc === zk.ZOK && children ? resolve(children) : reject(new Error(`getChildren ${dir}: ${rc}`)),
      ),
    );
  }

  #delete(path: string): Promise<void> {
    return new Promise((resolve, reject) =>
      this.#handle.native.a_delete_(path, -1, (rc) =>
        rc === zk.ZOK || rc === zk.ZNONODE ? resolve() : reject(new Error(`delete ${path}: ${rc}`)),
      ),
    );
  }
}

function sequence(node: string): number {
  return Number(node.slice(-10));
}
