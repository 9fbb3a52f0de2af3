import { randomUUID } from 'node:crypto';
import { pino, type Logger } from 'pino';
import { afterEach, beforeEach, expect } from 'vitest';
import { loadConfig, type Config } from '../../src/server/config.js';
import { startServer, type RunningServer } from '../../src/server/main.js';
import { type LockRpc, LockCaller, type RequestStream } from '../support/lock-caller.js';

// What every conformance sub-suite shares: the back end under test, and a server of its own for
// each test. lock-conformance.ts runs the sub-suites; they import this, never it.

/** How a conformance run reaches one back end. */
export interface BackendUnderTest {
  /** Extra `lockstream serve` arguments selecting the back end (the root path is added). */
  readonly serveArgs: () => string[];
  /** Ends the server's store session as an expiry would (its ephemeral nodes vanish). */
  readonly expireSession: (server: RunningServer) => Promise<void>;
  /**
   * Puts the server's store session in doubt (as a lost connection to the back end does) or
   * confirms it again; resolves once the store says so.
   */
  readonly setSessionConfirmed: (server: RunningServer, confirmed: boolean) => Promise<void>;
  /** The back end's watched paths under `rootPath`, where it can tell (ZooKeeper's `wchp`). */
  readonly watchedPaths?: (rootPath: string) => Promise<string[]>;
  /**
   * False for a back end that cannot replace a node atomically (ZooKeeper through the addon
   * client: no multi), where a downgrade must be refused with UNIMPLEMENTED.
   */
  readonly replaces?: boolean;
  /**
   * True for a back end whose children watch is used up by each change it tells (ZooKeeper
   * through the addon client: no persistent watch), so that arming it again is a listing too.
   */
  readonly rearmsChildrenWatch?: boolean;
}

export interface ConformanceContext {
  server: RunningServer;
  caller: LockCaller;
  rootPath: string;
  address: string;
}

/**
 * Starts a server for one test on its own root path (`--shutdown-grace 2s` and `extraArgs`
 * added to the back end's arguments) and a caller over `rpc`.
 */
export async function startConformanceServer(
  ctx: ConformanceContext,
  backend: BackendUnderTest,
  rpc: LockRpc,
  extraArgs: string[] = [],
): Promise<void> {
  ctx.rootPath = `/test-${randomUUID()}`;
  const config: Config = loadConfig({}, [
    '--port',
    '0',
    '--root',
    ctx.rootPath,
    '--shutdown-grace',
    '2s',
    ...extraArgs,
    ...backend.serveArgs(),
  ]);
  ctx.server = await startServer(config, testLogger());
  ctx.address = `127.0.0.1:${ctx.server.port}`;
  ctx.caller = new LockCaller(ctx.address, {}, undefined, rpc);
}

/**
 * For a `describe` block over one RPC: a server of its own for every test, and `open` for the
 * requests a test makes; whatever a test left open is cancelled after it, and the server must
 * then be left clean (see stopConformanceServer).
 */
export function useConformanceServer(
  backend: BackendUnderTest,
  rpc: LockRpc,
): {
  readonly ctx: ConformanceContext;
  readonly open: (start: Parameters<LockCaller['open']>[0]) => RequestStream;
  /** Has a stream opened otherwise (a resume, an empty stream) cancelled after the test too. */
  readonly track: <T extends RequestStream>(stream: T) => T;
} {
  const ctx = {} as ConformanceContext;
  const streams: RequestStream[] = [];
  beforeEach(async () => {
    await startConformanceServer(ctx, backend, rpc);
  });
  afterEach(async () => {
    const leftOpen = streams.splice(0);
    for (const stream of leftOpen) stream.cancel();
    await Promise.all(leftOpen.map((s) => s.outcome));
    await stopConformanceServer(ctx, backend);
  });
  const track = <T extends RequestStream>(stream: T): T => {
    streams.push(stream);
    return stream;
  };
  return { ctx, open: (start) => track(ctx.caller.open(start)), track };
}

/**
 * Ends a test once its streams are closed: every withdrawn, released or cancelled request must
 * have deleted its node, and no resumable request or back-end watch may be left behind.
 */
export async function stopConformanceServer(
  ctx: ConformanceContext,
  backend: BackendUnderTest,
): Promise<void> {
  ctx.caller.close();
  await ctx.server.whenIdle();
  await expectNoLockNodes(ctx);
  expect(ctx.server.sessions.size).toBe(0);
  // No watch left on any lock or node: the one on the locks path itself is the instance's watch
  // of the whole lock tree (ZooKeeper 3.6+), there for as long as the instance is.
  const treeWatch = `${ctx.rootPath}/locks`;
  const watched = (await backend.watchedPaths?.(ctx.rootPath)) ?? [];
  expect(watched.filter((path) => path !== treeWatch)).toEqual([]);
  await ctx.server.stop();
}

/** No lock request node is left under the test's root. */
export async function expectNoLockNodes(ctx: ConformanceContext): Promise<void> {
  const store = ctx.server.store;
  const locksPath = `${ctx.rootPath}/locks`;
  const leftovers: string[] = [];
  for (const dir of await store.children(locksPath)) {
    for (const node of await store.children(`${locksPath}/${dir}`)) leftovers.push(`${dir}/${node}`);
  }
  expect(leftovers).toEqual([]);
}

/** Silent unless LOCKSTREAM_TEST_LOG names a level (e.g. debug) for a failing run. */
export function testLogger(): Logger {
  return pino({ level: process.env['LOCKSTREAM_TEST_LOG'] ?? 'silent' });
}
