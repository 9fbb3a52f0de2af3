/**
 * The benchmark's client of etcd's lock RPC (v3lockpb.Lock): every client of a workload has a
 * lease of its own (etcd's lock key is the name plus the lease, and two Lock calls with one lease
 * are one acquisition), and all of them share one gRPC channel, as the clients of one process
 * would; grpc-js, the library lockstream's SDK uses, so the two rows differ by server.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { fileURLToPath } from 'node:url';
import type { LockSession } from '../workloads.js';

/** Leases outlive any benchmark run, so nothing needs keeping alive while it measures. */
const LEASE_TTL_SECONDS = 3_600;

type Unary<Request, Response> = (
  request: Request,
  callback: (error: grpc.ServiceError | null, response?: Response) => void,
) => void;

interface LockService extends grpc.Client {
  Lock: Unary<{ name: Buffer; lease: string }, { key: Buffer }>;
  Unlock: Unary<{ key: Buffer }, unknown>;
}
interface LeaseService extends grpc.Client {
  LeaseGrant: Unary<{ TTL: number }, { ID: string; error: string }>;
  LeaseRevoke: Unary<{ ID: string }, unknown>;
}

function call<Request, Response>(
  client: grpc.Client,
  method: Unary<Request, Response>,
  request: Request,
): Promise<Response> {
  return new Promise((resolve, reject) => {
    method.call(client, request, (error, response) =>
      error ? reject(error) : resolve(response as Response),
    );
  });
}

export async function openEtcdLocks(
  address: string,
  count: number,
): Promise<{ sessions: LockSession[]; close: () => Promise<void> }> {
  const definition = protoLoader.loadSync(fileURLToPath(new URL('v3lock.proto', import.meta.url)), {
    longs: String,
    includeDirs: [fileURLToPath(new URL('.', import.meta.url))],
  });
  const loaded = grpc.loadPackageDefinition(definition) as unknown as {
    v3lockpb: { Lock: new (address: string, credentials: grpc.ChannelCredentials) => LockService };
    etcdserverpb: {
      Lease: new (
        address: string,
        credentials: grpc.ChannelCredentials,
        options: grpc.ClientOptions,
      ) => LeaseService;
    };
  };
  const credentials = grpc.credentials.createInsecure();
  const locks = new loaded.v3lockpb.Lock(address, credentials);
  const leases = new loaded.etcdserverpb.Lease(address, credentials, { channelOverride: locks.getChannel() });
  const leaseIds: string[] = [];
  for (let i = 0; i < count; i += 1) {
    const granted = await call(leases, leases.LeaseGrant, { TTL: LEASE_TTL_SECONDS });
    if (granted.error) throw new Error(`etcd LeaseGrant: ${granted.error}`);
    leaseIds.push(granted.ID);
  }
  const sessions = leaseIds.map((lease): LockSession => ({
    async acquire(name, mode) {
      if (mode !== 'mutex') throw new Error("etcd's lock RPC has mutexes only: no read/write locks");
      const { key } = await call(locks, locks.Lock, { name: Buffer.from(name), lease });
      return async () => void (await call(locks, locks.Unlock, { key }));
    },
  }));
  return {
    sessions,
    close: async () => {
      await Promise.all(leaseIds.map((ID) => call(leases, leases.LeaseRevoke, { ID })));
      locks.close();
    },
  };
}
