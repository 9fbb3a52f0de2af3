/**
 * The ZooKeeper floor: the least a gRPC lock server in front of ZooKeeper can do per lock, so
 * that lockstream's figures can be read against what its design (SDK → gRPC → server →
 * ZooKeeper) costs before any of lockstream's own work. It speaks the Session RPC as lockstream
 * does, so the same SDK and load generator drive it, and per request it does only this:
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
 * `node --import tsx bench/zk-floor.ts CONNECT_STRING`. Prints `{"event":"listening","port":N}`;
 * answers a `cpu` line on stdin with `{"event":"cpu","micros":N}` (its own process.cpuUsage()).
 */
import { createInterface } from 'node:readline';
import * as grpc from '@grpc/grpc-js';
import { ZooKeeperConnection } from '../src/server/stores/zookeeper/protocol/connection.js';
import { CreateMode, OPEN_ACL_UNSAFE } from '../src/server/stores/zookeeper/protocol/records.js';
import {
  LockMode,
  LockServiceService,
  type LockServiceServer,
  type SessionRequest,
  type SessionResponse,
} from '../dist/gen/lockstream/v1/lockstream.js';

const connectString = process.argv[2];
if (!connectString) throw new Error('usage: zk-floor.ts CONNECT_STRING');
const ROOT = '/zk-floor';
const zk = await ZooKeeperConnection.connect({ servers: connectString.split(','), sessionTimeoutMs: 10_000 });
const EMPTY = Buffer.alloc(0);
await zk.create(ROOT, EMPTY, OPEN_ACL_UNSAFE, CreateMode.persistent).catch(() => {});

type Call = grpc.ServerDuplexStream<SessionRequest, SessionResponse>;

interface Request {
  readonly call: Call;
  readonly requestId: number;
  readonly name: string;
  readonly shared: boolean;
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
    request.call.write({
      requestId: request.requestId,
      kind: { $case: 'acquired', value: { fencingToken: request.token!, tokens: [] } },
    });
  }
}

async function acquire(request: Request): Promise<void> {
  const { name } = request;
  let queue = queues.get(name);
  if (!queue) queues.set(name, (queue = []));
  queue.push(request);
  await parentOf(name);
  const created = await zk.create(
    `${ROOT}/${encodeURIComponent(name)}/n-`,
    EMPTY,
    OPEN_ACL_UNSAFE,
    CreateMode.ephemeralSequential,
  );
  request.path = created.path;
  request.token = created.stat.czxid;
  if (request.leaving) return leave(request);
  grant(queue);
}

async function leave(request: Request): Promise<void> {
  const { name } = request;
  request.leaving = true;
  if (request.path === undefined) return; // its create's answer deletes it
  await zk.delete(request.path);
  const queue = queues.get(name) ?? [];
  queue.splice(queue.indexOf(request), 1);
  if (queue.length === 0) queues.delete(name);
  const { call, requestId, held } = request;
  if (call.writableEnded) return grant(queue);
  if (held) call.write({ requestId, kind: { $case: 'released', value: {} } });
  call.write({
    requestId,
    kind: { $case: 'ended', value: { code: held ? 0 : grpc.status.CANCELLED, message: '' } },
  });
  grant(queue);
}

function session(call: Call): void {
  const requests = new Map<number, Request>();
  const fail = (error: unknown): void => {
    call.destroy(error instanceof Error ? error : new Error(String(error)));
  };
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
        const request = {
          call,
          requestId,
          name,
          shared: mode === LockMode.READ,
          held: false,
          leaving: false,
        };
        requests.set(requestId, request);
        acquire(request).catch(fail);
        return;
      }
      case 'release':
      case 'cancel': {
        const request = requests.get(kind.value.requestId);
        if (!request || request.leaving) return;
        requests.delete(kind.value.requestId);
        leave(request).catch(fail);
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
    for (const request of requests.values()) if (!request.leaving) leave(request).catch(() => {});
    requests.clear();
  };
  call.on('end', () => {
    ended();
    call.end();
  });
  call.on('error', ended);
}

const unimplemented = (_call: unknown, callback: grpc.sendUnaryData<never>): void =>
  callback({ code: grpc.status.UNIMPLEMENTED, details: 'the ZooKeeper floor only locks through Session' });

const service: LockServiceServer = {
  acquire: (call) => call.destroy(new Error('unimplemented')),
  session,
  describeLock: unimplemented,
  listLocks: unimplemented,
  checkToken: unimplemented,
  revokeLock: unimplemented,
  watchLock: (call) => call.destroy(new Error('unimplemented')),
};

const server = new grpc.Server({ 'grpc.max_concurrent_streams': 100_000, 'grpc.enable_channelz': 0 });
server.addService(LockServiceService, service);
const port = await new Promise<number>((resolve, reject) =>
  server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) =>
    error ? reject(error) : resolve(bound),
  ),
);
process.stdout.write(`${JSON.stringify({ event: 'listening', port })}\n`);
for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() !== 'cpu') continue;
  const used = process.cpuUsage();
  process.stdout.write(`${JSON.stringify({ event: 'cpu', micros: used.user + used.system })}\n`);
}
server.forceShutdown();
await zk.close();
