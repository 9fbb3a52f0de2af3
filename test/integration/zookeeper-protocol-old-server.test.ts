import { once } from 'node:events';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ZooKeeperConnection } from '../../src/server/stores/zookeeper/protocol/connection.js';
import { JuteWriter } from '../../src/server/stores/zookeeper/protocol/jute.js';
import type { PersistentWatcher } from '../../src/server/stores/zookeeper/protocol/persistent-watches.js';
import { AddWatchMode, ErrorCode, OpCode } from '../../src/server/stores/zookeeper/protocol/records.js';
import {
  UnsupportedOperationError,
  type ZooKeeperError,
} from '../../src/server/stores/zookeeper/protocol/zookeeper-error.js';

/**
 * Persistent watches on a server that has none: ZooKeeper 3.5. No 3.5 server can be run for the
 * tests (Debian ships 3.8, and 3.5 is no longer served as a package), so this scripted peer does
 * what 3.5's source does with an operation it does not know (ZooKeeperServer.submitRequest ->
 * UnimplementedRequestProcessor): it answers UNIMPLEMENTED at once, ahead of the replies to the
 * requests before it, and closes the connection, while the session lives on.
 */

const SESSION_ID = 0x35n;
const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

function packet(body: (writer: JuteWriter) => void): Buffer {
  const writer = new JuteWriter();
  const at = writer.startPacket();
  body(writer);
  writer.endPacket(at);
  return Buffer.from(writer.bytes());
}

interface Request {
  readonly connection: number;
  readonly xid: number;
  readonly op: number;
}

/**
 * A peer that grants session SESSION_ID on every connection (recording the session each asks
 * for) and hands each request to `onRequest` with the number of its connection (from 1).
 */
async function scriptedPeer(
  onRequest: (socket: Socket, request: Request) => void,
): Promise<{ address: string; sessionsAsked: bigint[]; requests: Request[] }> {
  const sessionsAsked: bigint[] = [];
  const requests: Request[] = [];
  const server = createServer((socket) => {
    let connection = 0;
    let pending = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 4 && pending.length >= 4 + pending.readInt32BE(0)) {
        const body = pending.subarray(4, 4 + pending.readInt32BE(0));
        pending = pending.subarray(4 + body.length);
        if (connection === 0) {
          // ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId, passwd.
          sessionsAsked.push(body.readBigInt64BE(16));
          connection = sessionsAsked.length;
          socket.write(
            packet((w) => w.int(0).int(9_000).long(SESSION_ID).buffer(Buffer.alloc(16, 7)).bool(false)),
          );
        } else {
          const request = { connection, xid: body.readInt32BE(0), op: body.readInt32BE(4) };
          requests.push(request);
          if (request.op === OpCode.closeSession)
            socket.end(packet((w) => w.int(request.xid).long(0n).int(ErrorCode.ok)));
          else if (request.op !== OpCode.ping) onRequest(socket, request);
        }
      }
    });
    socket.on('error', () => {});
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { address: `127.0.0.1:${(server.address() as AddressInfo).port}`, sessionsAsked, requests };
}

/** What a 3.5 server answers to an operation it does not know: UNIMPLEMENTED, then it hangs up. */
function answerUnimplemented(socket: Socket, xid: number): void {
  socket.end(packet((w) => w.int(xid).long(0n).int(ErrorCode.unimplemented)));
}

describe('ZooKeeperConnection and a server without persistent watches (ZooKeeper 3.5)', () => {
  it('rejects addWatch with UnsupportedOperationError, even answered ahead of an earlier request, and keeps its session', async () => {
    const peer = await scriptedPeer((socket, { xid, op }) => {
      if (op === OpCode.addWatch) answerUnimplemented(socket, xid);
      // An exists after the reconnect: the node is missing. The getData before addWatch is
      // left unanswered, as 3.5's pipeline may still hold it when it hangs up.
      if (op === OpCode.exists) socket.write(packet((w) => w.int(xid).long(9n).int(ErrorCode.noNode)));
    });
    const zk = await ZooKeeperConnection.connect({ servers: [peer.address], sessionTimeoutMs: 9_000 });
    closers.push(() => zk.close());
    const watcher: PersistentWatcher = { changed: () => {}, resumed: () => {}, ended: () => {} };
    const reconnected = once(zk, 'connected');
    const earlier = zk.getData('/before');
    const added = zk.addWatch('/locks', AddWatchMode.persistentRecursive, watcher);
    await expect(added).rejects.toBeInstanceOf(UnsupportedOperationError);
    await expect(added).rejects.toMatchObject({
      code: ErrorCode.unimplemented,
      operation: 'addWatch',
      message:
        'addWatch /locks: this ZooKeeper server does not implement addWatch (ZooKeeper 3.6 or newer does)',
    });
    await expect(earlier).rejects.toMatchObject({ code: ErrorCode.connectionLoss });

    await reconnected;
    expect(peer.sessionsAsked).toEqual([0n, SESSION_ID]);
    expect(await zk.exists('/locks')).toBeNull();
    expect(peer.requests.filter(({ op }) => op === OpCode.setWatches || op === OpCode.setWatches2)).toEqual(
      [],
    );
  });

  it('ends persistent watches a reconnect cannot set again, and sets the one-shot ones on the next connection', async () => {
    let firstConnection: Socket | undefined;
    const peer = await scriptedPeer((socket, { connection, xid, op }) => {
      // exists: missing (with a watcher, an existence watch).
      if (op === OpCode.exists) socket.write(packet((w) => w.int(xid).long(6n).int(ErrorCode.noNode)));
      if (connection === 1) {
        firstConnection = socket;
        // A 3.6+ member: addWatch answered with an ErrorResponse of 0.
        if (op === OpCode.addWatch) socket.write(packet((w) => w.int(xid).long(5n).int(0).int(0)));
      } else if (op === OpCode.setWatches2) {
        // The connection moved to a 3.5 member.
        answerUnimplemented(socket, xid);
      } else if (op === OpCode.setWatches) {
        socket.write(packet((w) => w.int(xid).long(6n).int(0)));
      }
    });
    const zk = await ZooKeeperConnection.connect({ servers: [peer.address], sessionTimeoutMs: 9_000 });
    closers.push(() => zk.close());
    const ends: ZooKeeperError[] = [];
    let resumes = 0;
    await zk.addWatch('/locks', AddWatchMode.persistentRecursive, {
      changed: () => {},
      resumed: () => (resumes += 1),
      ended: (reason) => ends.push(reason),
    });
    expect(await zk.exists('/missing', () => {})).toBeNull();

    const backOnThird = new Promise<void>((resolve) => {
      const connected = (): void => {
        if (peer.sessionsAsked.length < 3) return;
        zk.off('connected', connected);
        resolve();
      };
      zk.on('connected', connected);
    });
    firstConnection!.destroy();
    await backOnThird;
    await zk.exists('/missing');
    expect(ends).toHaveLength(1);
    expect(ends[0]).toBeInstanceOf(UnsupportedOperationError);
    expect(resumes).toBe(0);
    const restores = peer.requests
      .filter(({ op }) => op === OpCode.setWatches || op === OpCode.setWatches2)
      .map(({ connection, op }) => ({ connection, op }));
    expect(restores).toEqual([
      { connection: 2, op: OpCode.setWatches2 },
      { connection: 3, op: OpCode.setWatches },
    ]);
    expect(peer.sessionsAsked).toEqual([0n, SESSION_ID, SESSION_ID]);
  });
});
