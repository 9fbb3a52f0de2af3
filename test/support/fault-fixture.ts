import { afterEach } from 'vitest';
import { LockClient } from '../../src/client/index.js';
import { LockCaller } from './lock-caller.js';
import { startServerProcess, type ServerProcess } from './server-process.js';

export interface FaultFixture {
  /** Starts `lockstream serve <args>` in its own process, killed after the test. */
  readonly serve: (args: string[]) => Promise<ServerProcess>;
  /** An SDK client of `address`, closed after the test. */
  readonly client: (address: string) => LockClient;
  /** A raw gRPC caller of `server` on a connection of its own, closed after the test. */
  readonly caller: (server: ServerProcess) => LockCaller;
  /** Anything else to undo after the test (undone last first, with the rest). */
  readonly later: (cleanup: () => Promise<unknown> | void) => void;
}

/**
 * What a fault test starts (server processes, SDK clients, proxies, drivers), undone after each
 * test, last started first. A server is killed with SIGKILL, which ends a paused (SIGSTOP) one
 * too, and one that exited already is left be. Call at the top of a `describe`.
 */
export function faultFixture(): FaultFixture {
  const cleanups: Array<() => Promise<unknown> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  return {
    serve: async (args) => {
      const server = await startServerProcess(args);
      cleanups.push(() => server.kill('SIGKILL'));
      return server;
    },
    client: (address) => {
      const locks = new LockClient(address);
      cleanups.push(() => locks.close());
      return locks;
    },
    caller: (server) => {
      const locks = new LockCaller(server.address, { 'grpc.use_local_subchannel_pool': 1 });
      cleanups.push(() => locks.close());
      return locks;
    },
    later: (cleanup) => {
      cleanups.push(cleanup);
    },
  };
}
