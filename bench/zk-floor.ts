/**
 * The ZooKeeper floor: the least a gRPC lock server in front of ZooKeeper can do per lock, so
 * that lockstream's figures can be read against what its design (SDK → gRPC → server →
 * ZooKeeper) costs before any of lockstream's own work. It speaks the Session RPC as lockstream
 * does (and Acquire, a stream per lock), so the same SDK and load generator drive it, and per
 * request it does only this:
 * - acquire: one create of an EPHEMERAL_SEQUENTIAL node (create2, whose czxid is the token),
 *   through lockstream's own ZooKeeper protocol client; `acquired` once the create has answered
 *   and every request ahead of it in this process's queue allows it;
 * - release: one delete; `released` and `ended` once the delete has committed, and the next
 *   requests in the queue granted at the same moment.
 *
 * Nothing else: no listing, no watch, no view of other instances (it is the only one, and its
 * queue is the order of its own creates on one session), no validation, no metrics, no
 * logging. A lock's parent is created the first time its name is used. It is a yardstick, not
 * a lock service: it is wrong the moment a second instance or a ZooKeeper session loss exists.
 *
 * With `--fenced`, each create and delete goes as lockstream sends them when its sessions can
 * move between instances: in a multi behind a check of the version of a record the instance
 * owns (see OwnershipGuard), so that a paused old owner can change nothing once it woke.
 *
 * `node --import tsx bench/zk-floor.ts CONNECT_STRING [--fenced]`; it speaks to the benchmark as
 * floor-server.ts says.
 */
import * as grpc from '@grpc/grpc-js';
import { serveFloor } from './floor-server.js';
import { ZooKeeperConnection } from '../dist/server/stores/zookeeper/protocol/connection.js';
import { CreateMode, OPEN_ACL_UNSAFE } from '../dist/server/stores/zookeeper/protocol/records.js';
import {
  LockMode,
  type AcquireRequest,
  type AcquireResponse,
  type SessionRequest,
  type SessionResponse,
} from '../dist/gen/lockstream/v1/lockstream.js';

const [connectString, fencedFlag] = process.argv.slice(2);
if (!connectString) throw new Error('usage: zk-floor.ts CONNECT_STRING [--fenced]');
const ROOT = '/zk-floor';
const zk = await ZooKeeperConnection.connect({ servers: connectString.split(','), sessionTimeoutMs: 10_000 });
const EMPTY = Buffer.alloc(0);
await zk.create(ROOT, EMPTY, OPEN_ACL_UNSAFE, CreateMode.persistent).catch(() => {});
/** The record every write is checked against, with --fenced. */
const owned =
  fencedFlag === '--fenced'
    ? (await zk.create(`${ROOT}/owner-`, EMPTY, OPEN_ACL_UNSAFE, CreateMode.ephemeralSequential)).path
    : undefined;

/** Creates a lock node: its path and creation id (the token). */
async function createNode(prefix: string): Promise<{ path: string; token: bigint }> {
  if (owned === undefined) {
    const created = await zk.create(prefix, EMPTY, OPEN_ACL_UNSAFE, CreateMode.ephemeralSequential);
    return { path: created.path, token: created.stat.czxid };
  }
  const [, created] = await zk.multi([
    { op: 'check', path: owned, version: 0 },
    { op: 'create', path: prefix, data: EMPTY, acl: OPEN_ACL_UNSAFE, mode: CreateMode.ephemeralSequential },
  ]);
  if (created?.op !== 'create') throw new Error('the multi did not create');
  return { path: created.path, token: created.czxid };
}

async function deleteNode(path: string): Promise<void> {
  if (owned === undefined) await zk.delete(path);
  else
    await zk.multi([
      { op: 'check', path: owned, version: 0 },
      { op: 'delete', path, version: -1 },
    ]);
}

/** One lock request, whichever RPC carries it: how to tell its caller, and where it stands. */
interface Request {
  readonly name: string;
  readonly shared: boolean;
  readonly granted: (token: bigint) => void;
  /** Its node is deleted: `held` says whether it was granted first. */
  readonly ended: (held: boolean) => void;
  /** The node's path once its create has answered. */
  path?: string;
  token?: bigint;
  held: boolean;
  leaving: boolean;
}

/** Each lock's requests in the order of their creates (one session: ZooKeeper's order too). */
const queues = new Map<string, Request[]>();
const parents = new Map<string, Promise<unknown>>();

function parentOf(name: string): Promise<unknown> {
  let made = parents.get(name);
  if (!made) {
    made = zk
      .create(`${ROOT}/${encodeURIComponent(name)}`, EMPTY, OPEN_ACL_UNSAFE, CreateMode.persistent)
      .catch(() => {});
    parents.set(name, made);
  }
  return made;
}

/** Grants, from the head of the queue, every created request that all ahead of it allow. */
function grant(queue: readonly Request[]): void {
  let exclusiveAhead = false;
  for (let i = 0; i < queue.length; i += 1) {
    const request = queue[i]!;
    if (request.path === undefined || exclusiveAhead || (!request.shared && i > 0)) return;
    exclusiveAhead = !request.shared;
    if (request.held || request.leaving) continue;
    request.held = true;
    request.granted(request.token!);
  }
}

function request(
  name: string,
  mode: LockMode,
  granted: Request['granted'],
  ended: Request['ended'],
): Request {
  return { name, shared: mode === LockMode.READ, granted, ended, held: false, leaving: false };
}

async function enqueue(request: Request): Promise<void> {
  const { name } = request;
  let queue = queues.get(name);
  if (!queue) queues.set(name, (queue = []));
  queue.push(request);
  await parentOf(name);
  const created = await createNode(`${ROOT}/${encodeURIComponent(name)}/n-`);
  request.path = created.path;
  request.token = created.token;
  if (request.leaving) return leave(request);
  grant(queue);
}

async function leave(request: Request): Promise<void> {
  request.leaving = true;
  if (request.path === undefined) return; // its create's answer deletes it
  await deleteNode(request.path);
  const queue = queues.get(request.name) ?? [];
  queue.splice(queue.indexOf(request), 1);
  if (queue.length === 0) queues.delete(request.name);
  request.ended(request.held);
  grant(queue);
}

const destroyer =
  (call: { destroy(error: Error): void }) =>
  (error: unknown): void => {
    call.destroy(error instanceof Error ? error : new Error(String(error)));
  };

/** Acquire: one request per stream, released by `release`, a half-close or a cancel. */
function acquire(call: grpc.ServerDuplexStream<AcquireRequest, AcquireResponse>): void {
  let current: Request | undefined;
  const fail = destroyer(call);
  const letGo = (): void => {
    if (current && !current.leaving) leave(current).catch(fail);
  };
  call.on('data', ({ kind }: AcquireRequest) => {
    if (kind?.$case === 'release') return letGo();
    if (kind?.$case !== 'start' || current) return;
    current = request(
      kind.value.name,
      kind.value.mode,
      (fencingToken) => call.write({ kind: { $case: 'acquired', value: { fencingToken, tokens: [] } } }),
      (held) => {
        if (call.writableEnded) return;
        if (held) call.write({ kind: { $case: 'released', value: {} } });
        call.end();
      },
    );
    enqueue(current).catch(fail);
  });
  call.on('end', letGo);
  call.on('error', letGo);
}

/** Session: many requests on one stream, each named by its request id. */
function session(call: grpc.ServerDuplexStream<SessionRequest, SessionResponse>): void {
  const requests = new Map<number, Request>();
  const fail = destroyer(call);
  call.on('data', ({ kind }: SessionRequest) => {
    switch (kind?.$case) {
      case 'open':
        call.write({
          requestId: 0,
          kind: { $case: 'opened', value: { resumeToken: '', resumeGrace: undefined } },
        });
        return;
      case 'acquire': {
        const { requestId, name, mode } = kind.value;
        const made = request(
          name,
          mode,
          (fencingToken) =>
            call.write({ requestId, kind: { $case: 'acquired', value: { fencingToken, tokens: [] } } }),
          (held) => {
            if (call.writableEnded) return;
            if (held) call.write({ requestId, kind: { $case: 'released', value: {} } });
            const code = held ? grpc.status.OK : grpc.status.CANCELLED;
            call.write({ requestId, kind: { $case: 'ended', value: { code, message: '' } } });
          },
        );
        requests.set(requestId, made);
        enqueue(made).catch(fail);
        return;
      }
      case 'release':
      case 'cancel': {
        const made = requests.get(kind.value.requestId);
        if (!made || made.leaving) return;
        requests.delete(kind.value.requestId);
        leave(made).catch(fail);
        return;
      }
      // The floor measures acquire/release only.
      case 'heartbeat':
      case 'resume':
      case 'setValue':
      case 'downgrade':
      case undefined:
        return;
    }
  });
  const ended = (): void => {
    for (const made of requests.values()) if (!made.leaving) leave(made).catch(() => {});
    requests.clear();
  };
  call.on('end', () => {
    ended();
    call.end();
  });
  call.on('error', ended);
}

await serveFloor('the ZooKeeper floor', { acquire, session });
await zk.close();
