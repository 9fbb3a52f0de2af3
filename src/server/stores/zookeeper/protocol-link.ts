/* A ZooKeeperLink on lockstream's own ZooKeeper client (protocol/). */
import type { NodeData } from '../store.js';
import { ZooKeeperConnection } from './protocol/connection.js';
import { parseConnectString } from './protocol/connection-options.js';
import type { Watcher } from './protocol/watch-registry.js';
import { ZooKeeperError } from './protocol/zookeeper-error.js';
import {
  AddWatchMode,
  CreateMode,
  ErrorCode,
  EventType,
  OPEN_ACL_UNSAFE,
  type Acl,
} from './protocol/records.js';
import type {
  CreatedZNode,
  LinkEvents,
  LinkOp,
  LinkOpResult,
  LinkOptions,
  LinkReply,
  NodeEventKind,
  NodeMode,
  TreeWatcher,
  ZooKeeperLink,
} from './zookeeper-link.js';

const MODES: Readonly<Record<NodeMode, number>> = {
  persistent: CreateMode.persistent,
  container: CreateMode.container,
  ephemeral: CreateMode.ephemeral,
  ephemeralSequential: CreateMode.ephemeralSequential,
};

const EVENT_KINDS = new Map<number, NodeEventKind>([
  [EventType.nodeCreated, 'created'],
  [EventType.nodeDeleted, 'deleted'],
  [EventType.nodeDataChanged, 'changed'],
  [EventType.nodeChildrenChanged, 'children'],
]);

/**
 * A link on lockstream's own ZooKeeper client (`protocol/`): creates answer with the node's
 * creation id (create2) and carry their ACL, zxids are exact bigints, and requests and replies
 * are batched per turn of the event loop. Every watch goes to one function, as the addon's do.
 */
export class ProtocolLink implements ZooKeeperLink {
  readonly createsWithAcl = true;
  readonly #connection: ZooKeeperConnection;
  readonly #watcher: Watcher;

  constructor(options: LinkOptions, events: LinkEvents) {
    const { servers, chroot } = parseConnectString(options.connectString);
    const connection = ZooKeeperConnection.open({
      servers,
      sessionTimeoutMs: options.sessionTimeoutMs,
      ...(chroot === undefined ? {} : { chroot }),
      ...(options.digest === undefined ? {} : { auth: [{ scheme: 'digest', credentials: options.digest }] }),
      ...(options.session ? { session: options.session } : {}),
    });
    this.#connection = connection;
    connection.on('connected', () => events.connected(connection.handshakeSentAt));
    connection.on('disconnected', () => events.disconnected());
    connection.on('expired', () => events.ended(true, 'ZooKeeper session expired'));
    this.#watcher = (event) => {
      const kind = EVENT_KINDS.get(event.type);
      if (kind !== undefined) events.node(kind, event.path);
    };
  }

  get sessionId(): string {
    return this.#connection.sessionId.toString(16);
  }

  get credentials(): { readonly id: bigint; readonly password: Uint8Array } {
    return { id: this.#connection.sessionId, password: this.#connection.sessionPassword };
  }

  get negotiatedTimeoutMs(): number {
    return this.#connection.sessionTimeoutMs;
  }

  create(
    path: string,
    data: Uint8Array,
    mode: NodeMode,
    acl?: readonly Acl[],
  ): Promise<LinkReply<CreatedZNode>> {
    return answer(
      this.#connection
        .create(path, data, acl ?? OPEN_ACL_UNSAFE, MODES[mode])
        .then((created) => ({ path: created.path, creationId: created.stat.czxid })),
    );
  }

  exists(path: string, watch: boolean): Promise<LinkReply<bigint>> {
    // The connection answers a missing node with null: no error to make and catch again.
    return this.#connection
      .exists(path, watch ? this.#watcher : undefined)
      .then((stat) => (stat === null ? MISSING : { rc: ErrorCode.ok, value: stat.czxid }), failed);
  }

  getData(path: string, watch: boolean): Promise<LinkReply<NodeData>> {
    return answer(
      this.#connection
        .getData(path, watch ? this.#watcher : undefined)
        .then(({ data, stat }) => ({ creationId: stat.czxid, data, version: stat.version })),
    );
  }

  getChildren(path: string, watch: boolean): Promise<LinkReply<string[]>> {
    return answer(this.#connection.getChildren(path, watch ? this.#watcher : undefined));
  }

  sync(path: string): Promise<LinkReply<undefined>> {
    return answer(this.#connection.sync(path));
  }

  setData(path: string, data: Uint8Array, version: number): Promise<LinkReply<undefined>> {
    return answer(this.#connection.setData(path, data, version).then(() => undefined));
  }

  setAcl(path: string, acl: readonly Acl[]): Promise<LinkReply<undefined>> {
    return answer(this.#connection.setACL(path, acl).then(() => undefined));
  }

  delete(path: string): Promise<LinkReply<undefined>> {
    return answer(this.#connection.delete(path).then(() => undefined));
  }

  readonly multi = (ops: readonly LinkOp[]): Promise<LinkReply<LinkOpResult[]>> =>
    answer(
      this.#connection
        .multi(
          ops.map((op) =>
            op.op === 'create'
              ? {
                  op: 'create',
                  path: op.path,
                  data: op.data,
                  acl: op.acl ?? OPEN_ACL_UNSAFE,
                  mode: MODES[op.mode],
                }
              : op,
          ),
        )
        .then((results) =>
          results.map((result): LinkOpResult => {
            switch (result.op) {
              case 'create':
                return { op: 'create', path: result.path, creationId: result.czxid };
              case 'setData':
                return { op: 'setData', version: result.stat.version };
              case 'delete':
              case 'check':
                return { op: result.op };
              case 'error':
                throw new ZooKeeperError(ErrorCode.marshallingError, `multi: unexpected ${result.op} result`);
            }
          }),
        ),
    );

  readonly multiGetChildren = (paths: readonly string[]): Promise<LinkReply<Array<LinkReply<string[]>>>> =>
    answer(
      this.#connection
        .multiGetChildren(paths)
        .then((results) =>
          results.map((result) =>
            'children' in result
              ? { rc: ErrorCode.ok, value: result.children }
              : { rc: result.err, value: null },
          ),
        ),
    );

  readonly moveOn = (): void => this.#connection.moveOn();

  readonly getEphemerals = (prefix: string): Promise<LinkReply<string[]>> =>
    answer(this.#connection.getEphemerals(prefix));

  readonly drop = (): void => this.#connection.drop();

  readonly watchTree = (path: string, watcher: TreeWatcher): Promise<LinkReply<undefined>> =>
    answer(
      this.#connection
        .addWatch(path, AddWatchMode.persistentRecursive, {
          changed: (event) => {
            const kind = EVENT_KINDS.get(event.type);
            if (kind !== undefined) watcher.changed(kind, event.path);
          },
          resumed: () => watcher.resumed(),
          ended: () => watcher.ended(),
        })
        .then(() => undefined),
    );

  close(): void {
    void this.#connection.close();
  }
}

const MISSING: LinkReply<never> = { rc: ErrorCode.noNode, value: null };

function answer<T>(request: Promise<T>): Promise<LinkReply<T>> {
  return request.then((value) => ({ rc: ErrorCode.ok, value }), failed);
}

function failed(error: unknown): LinkReply<never> {
  if (error instanceof ZooKeeperError) {
    return error.failedOp === undefined
      ? { rc: error.code, value: null }
      : { rc: error.code, value: null, failedOp: error.failedOp };
  }
  // A reply that does not read as the request's record.
  return { rc: ErrorCode.marshallingError, value: null };
}
