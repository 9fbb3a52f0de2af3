/* The typed surface of the `zookeeper` addon (the native C client) that lockstream uses. */
import type { EventEmitter } from 'node:events';
import { createRequire } from 'node:module';

/**
 * The part of the `zookeeper` package (the native Apache C client) that lockstream uses, typed
 * here because the package's own declarations declare global ambient modules ("index",
 * "helper") that would leak into our type checking.
 */
export interface ZooKeeperHandle extends EventEmitter {
  init(config: ZooKeeperConfig): this;
  close(): void;
  /** Hex session id; "0" before the first connection. */
  readonly client_id: string;
  /** Hex session password. */
  readonly client_password: string;
  /** Negotiated session timeout in ms (-1 when closed). */
  readonly timeout: number;
  readonly state: number;
  /** The binding object itself: calling it directly skips the wrapper's per-call util.inspect. */
  readonly native: ZooKeeperNative;
}

export interface ZooKeeperNative {
  a_create(path: string, data: Buffer | string, flags: number, cb: StringCallback): number;
  a_exists(path: string, watch: boolean, cb: StatCallback): number;
  a_get(path: string, watch: boolean, cb: DataCallback): number;
  a_get_children(path: string, watch: boolean, cb: ChildrenCallback): number;
  a_delete_(path: string, version: number, cb: VoidCallback): number;
  a_set(path: string, data: Buffer, version: number, cb: StatCallback): number;
  a_set_acl(path: string, version: number, acl: readonly ZooKeeperAcl[], cb: VoidCallback): number;
  a_get_acl(path: string, cb: AclCallback): number;
  /** Answers once the member has caught up with the leader (zoo_async). */
  a_sync(path: string, cb: StringCallback): number;
  add_auth(scheme: string, auth: string, cb: VoidCallback): number;
}

/** One ACL entry as the addon takes it (`perm`, singular, is what its C++ reads). */
export interface ZooKeeperAcl {
  readonly perm: number;
  readonly scheme: string;
  readonly auth: string;
}

export interface ZooKeeperConfig {
  connect: string;
  timeout: number;
  debug_level: number;
  host_order_deterministic: boolean;
  data_as_buffer?: boolean;
  /** Attach to an existing session instead of creating one (with `client_password`). */
  client_id?: string;
  client_password?: string;
}

export interface ZooKeeperStat {
  /** The zxid that created the node. A double: exact below 2^53 (see README: fencing tokens). */
  readonly czxid: number;
  readonly ephemeralOwner: string;
  /** The data's version: one more per setData. */
  readonly version: number;
}

type StringCallback = (rc: number, error: string, value: string) => void;
type StatCallback = (rc: number, error: string, stat: ZooKeeperStat | null) => void;
type DataCallback = (rc: number, error: string, stat: ZooKeeperStat | null, data: Buffer | null) => void;
type ChildrenCallback = (rc: number, error: string, children: string[] | null) => void;
type VoidCallback = (rc: number, error: string) => void;
type AclCallback = (
  rc: number,
  error: string,
  acl: Array<{ perms: number; scheme: string; auth: string }> | null,
  stat: ZooKeeperStat | null,
) => void;

interface ZooKeeperModule {
  new (config: ZooKeeperConfig): ZooKeeperHandle;
  readonly constants: Readonly<Record<string, number>>;
}

const zookeeper = createRequire(import.meta.url)('zookeeper') as ZooKeeperModule;

export const ZooKeeper = zookeeper;

/**
 * A bare handle connected to `connect` (a session of its own, no store around it), for the
 * benchmark's textbook recipe and for tests that act as another ZooKeeper user. `digest`
 * (`user:password`) authenticates the session.
 */
export async function connectPlainHandle(connect: string, digest?: string): Promise<ZooKeeperHandle> {
  const config = { connect, timeout: 10_000, debug_level: 0, host_order_deterministic: false };
  const handle = new ZooKeeper(config);
  const connected = new Promise<void>((resolve) => handle.once('connect', () => resolve()));
  handle.init(config);
  if (digest !== undefined) handle.native.add_auth('digest', digest, () => {});
  await connected;
  return handle;
}

function constant(name: string): number {
  const value = zookeeper.constants[name];
  if (value === undefined) throw new Error(`INVARIANT: zookeeper constant ${name} is missing`);
  return value;
}

/** Return codes, node flags and event types of the C client. */
export const zk = {
  ZOK: constant('ZOK'),
  ZNONODE: constant('ZNONODE'),
  ZNODEEXISTS: constant('ZNODEEXISTS'),
  ZNOAUTH: constant('ZNOAUTH'),
  ZOO_PERM_ALL: constant('ZOO_PERM_ALL'),
  ZCONNECTIONLOSS: constant('ZCONNECTIONLOSS'),
  ZOPERATIONTIMEOUT: constant('ZOPERATIONTIMEOUT'),
  ZSESSIONEXPIRED: constant('ZSESSIONEXPIRED'),
  ZOO_PERSISTENT: constant('ZOO_PERSISTENT'),
  ZOO_CONTAINER: constant('ZOO_CONTAINER'),
  ZOO_EPHEMERAL: constant('ZOO_EPHEMERAL'),
  ZOO_EPHEMERAL_SEQUENTIAL: constant('ZOO_EPHEMERAL_SEQUENTIAL'),
  ZOO_DELETED_EVENT: constant('ZOO_DELETED_EVENT'),
  ZOO_CHANGED_EVENT: constant('ZOO_CHANGED_EVENT'),
  ZOO_SESSION_EVENT: constant('ZOO_SESSION_EVENT'),
  ZOO_EXPIRED_SESSION_STATE: constant('ZOO_EXPIRED_SESSION_STATE'),
} as const;
