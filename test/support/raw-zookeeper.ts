import {
  connectPlainHandle,
  zk,
  type ZooKeeperHandle,
} from '../../src/server/stores/zookeeper/zookeeper-client.js';

export interface Answer<T = unknown> {
  readonly rc: number;
  readonly value?: T;
}

/**
 * A plain ZooKeeper client (its own session, the native client without lockstream's store
 * around it), for tests that look at or poke lockstream's nodes as another ZooKeeper user would.
 */
export class RawZooKeeper {
  private constructor(readonly handle: ZooKeeperHandle) {}

  /** Connects to `connectString`, authenticated with digest `user:password` if given. */
  static async connect(connectString: string, digest?: string): Promise<RawZooKeeper> {
    return new RawZooKeeper(await connectPlainHandle(connectString, digest));
  }

  children(path: string): Promise<Answer<string[]>> {
    return this.#ask((done) => this.handle.native.a_get_children(path, false, done));
  }

  create(path: string, flags = zk.ZOO_PERSISTENT): Promise<Answer<string>> {
    return this.#ask((done) => this.handle.native.a_create(path, '', flags, done));
  }

  delete(path: string): Promise<Answer> {
    return this.#ask((done) => this.handle.native.a_delete_(path, -1, done));
  }

  getData(path: string): Promise<Answer<Buffer>> {
    return this.#ask((done) =>
      this.handle.native.a_get(path, false, (rc, error, _stat, data) => done(rc, error, data)),
    );
  }

  setData(path: string, data: string): Promise<Answer> {
    return this.#ask((done) => this.handle.native.a_set(path, Buffer.from(data), -1, done));
  }

  acl(path: string): Promise<Answer<Array<{ perms: number; scheme: string; auth: string }>>> {
    return this.#ask((done) => this.handle.native.a_get_acl(path, done));
  }

  close(): void {
    this.handle.close();
  }

  #ask<T>(send: (done: (rc: number, error: string, value?: T | null) => void) => number): Promise<Answer<T>> {
    return new Promise((resolve) => {
      const rc = send((replyRc, _error, value) =>
        resolve({ rc: replyRc, ...(value == null ? {} : { value }) }),
      );
      if (rc !== zk.ZOK) resolve({ rc });
    });
  }
}
