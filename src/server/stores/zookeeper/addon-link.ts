/* A ZooKeeperLink on the `zookeeper` addon, the native Apache C client. */
import type { NodeData } from '../store.js';
import { ErrorCode, type Acl } from './protocol/records.js';
import {
  ZooKeeper,
  zk,
  type ZooKeeperConfig,
  type ZooKeeperHandle,
  type ZooKeeperNative,
} from './zookeeper-client.js';
import type {
  CreatedZNode,
  LinkEvents,
  LinkOptions,
  LinkReply,
  NodeMode,
  ZooKeeperLink,
} from './zookeeper-link.js';

const FLAGS: Readonly<Record<NodeMode, number>> = {
  persistent: zk.ZOO_PERSISTENT,
  container: zk.ZOO_CONTAINER,
  ephemeral: zk.ZOO_EPHEMERAL,
  ephemeralSequential: zk.ZOO_EPHEMERAL_SEQUENTIAL,
};

/**
 * A link on the `zookeeper` addon (the native Apache C client, 7.x). It has no create2 (the
 * creation id takes a read), no ACL on create (a setACL follows the create), and zxids reach
 * JavaScript as doubles, exact below 2^53. Its watches go to the handle's default watcher:
 * the addon never frees a per-call watcher function, so one each would leak per lock cycle.
 */
export class AddonLink implements ZooKeeperLink {
  readonly createsWithAcl = false;
  readonly #handle: ZooKeeperHandle;
  readonly #native: ZooKeeperNative;
  #closed = false;
  #initialized = false;

  constructor(options: LinkOptions, events: LinkEvents) {
    const config: ZooKeeperConfig = {
      connect: options.connectString,
      timeout: options.sessionTimeoutMs,
      // 0 turns the C client's and the addon's own logging off: they printf to stdout, in the
      // middle of the server's JSON log lines.
      debug_level: 0,
      host_order_deterministic: false,
      ...(options.session
        ? {
            client_id: options.session.id.toString(16),
            client_password: Buffer.from(options.session.password).toString('hex'),
          }
        : {}),
    };
    const handle = new ZooKeeper(config);
    this.#handle = handle;
    this.#native = handle.native;
    // The C client does not say when it sent its handshake.
    handle.on('connect', () => events.connected(undefined));
    handle.on('connecting', () => events.disconnected());
    handle.on('close', (_self: unknown, code: number) => {
      const expired = code === zk.ZOO_EXPIRED_SESSION_STATE;
      if (!this.#closed)
        events.ended(expired, expired ? 'ZooKeeper session expired' : `ZooKeeper session closed (${code})`);
    });
    handle.on('deleted', (_self: unknown, path: string) => events.node('deleted', path));
    handle.on('changed', (_self: unknown, path: string) => events.node('changed', path));
    handle.on('child', (_self: unknown, path: string) => events.node('children', path));
    handle.on('created', (_self: unknown, path: string) => events.node('created', path));
    // A handle replacing another may be opened inside the native callback in which the old one
    // closed its socket: a socket opened now could reuse that descriptor while the old handle's
    // libuv poll handle still watches it, and two poll handles on one descriptor crash the
    // process (uv_poll_start / uv__io_stop assertions). One turn of the event loop lets it go.
    setImmediate(() => {
      if (this.#closed) return;
      this.#initialized = true;
      handle.init(config);
      // The C client sends the credentials ahead of every other request, after each connect too.
      if (options.digest !== undefined) handle.native.add_auth('digest', options.digest, () => {});
    });
  }

  get sessionId(): string {
    return this.#handle.client_id;
  }

  get credentials(): { readonly id: bigint; readonly password: Uint8Array } {
    return {
      id: BigInt(`0x${this.#handle.client_id || '0'}`),
      password: Buffer.from(this.#handle.client_password, 'hex'),
    };
  }

  get negotiatedTimeoutMs(): number {
    return this.#handle.timeout;
  }

  create(
    path: string,
    data: Uint8Array,
    mode: NodeMode,
    acl?: readonly Acl[],
  ): Promise<LinkReply<CreatedZNode>> {
    const created = this.#send<CreatedZNode>((done) =>
      this.#native.a_create(path, toBuffer(data), FLAGS[mode], (rc, _error, value) =>
        done(rc, rc === ErrorCode.ok ? { path: value } : null),
      ),
    );
    if (!acl) return created;
    return created.then(async (reply) => {
      if (reply.rc !== ErrorCode.ok || reply.value === null) return reply;
      const secured = await this.setAcl(reply.value.path, acl);
      return secured.rc === ErrorCode.ok ? reply : { rc: secured.rc, value: null };
    });
  }

  exists(path: string, watch: boolean): Promise<LinkReply<bigint>> {
    return this.#send((done) =>
      this.#native.a_exists(path, watch, (rc, _error, stat) => done(rc, stat ? BigInt(stat.czxid) : null)),
    );
  }

  sync(path: string): Promise<LinkReply<undefined>> {
    return this.#send((done) => this.#native.a_sync(path, (rc) => done(rc, null)));
  }

  getData(path: string, watch: boolean): Promise<LinkReply<NodeData>> {
    return this.#send((done) =>
      this.#native.a_get(path, watch, (rc, _error, stat, data) =>
        done(
          rc,
          stat ? { creationId: BigInt(stat.czxid), data: toBytes(data), version: stat.version } : null,
        ),
      ),
    );
  }

  getChildren(path: string, watch: boolean): Promise<LinkReply<string[]>> {
    return this.#send((done) =>
      this.#native.a_get_children(path, watch, (rc, _error, children) => done(rc, children)),
    );
  }

  setData(path: string, data: Uint8Array, version: number): Promise<LinkReply<undefined>> {
    return this.#send((done) =>
      this.#native.a_set(path, toBuffer(data), version, (rc) => done(rc, undefined)),
    );
  }

  setAcl(path: string, acl: readonly Acl[]): Promise<LinkReply<undefined>> {
    const entries = acl.map(({ perms, scheme, id }) => ({ perm: perms, scheme, auth: id }));
    return this.#send((done) => this.#native.a_set_acl(path, -1, entries, (rc) => done(rc, undefined)));
  }

  delete(path: string): Promise<LinkReply<undefined>> {
    return this.#send((done) => this.#native.a_delete_(path, -1, (rc) => done(rc, undefined)));
  }

  /** The addon does not expose the C client's zoo_amulti. */
  readonly multi = undefined;

  /** Nor its multiRead. */
  readonly multiGetChildren = undefined;

  /** The C client cannot be told to leave its member for another. */
  readonly moveOn = undefined;
  /** Nor getEphemerals. */
  readonly getEphemerals = undefined;

  /** The C client ends the session whenever it closes a handle: it cannot let one go alive. */
  readonly drop = undefined;

  /** The addon's C client has no persistent watches. */
  readonly watchTree = undefined;

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#initialized) this.#handle.close();
  }

  /** Calls the addon; a request it refuses at once (`rc` not ZOK) answers with that code. */
  #send<T>(request: (done: (rc: number, value: T | null) => void) => number): Promise<LinkReply<T>> {
    return new Promise((resolve) => {
      const rc = request((replyRc, value) =>
        resolve({ rc: replyRc, value: replyRc === ErrorCode.ok ? value : null }),
      );
      if (rc !== ErrorCode.ok) resolve({ rc, value: null });
    });
  }
}

function toBuffer(data: Uint8Array): Buffer {
  return Buffer.isBuffer(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}

/** Node data as the addon hands it over (a Buffer, or a string with an encoding set). */
function toBytes(data: Buffer | string | null): Uint8Array {
  return typeof data === 'string' ? Buffer.from(data) : (data ?? Buffer.alloc(0));
}
