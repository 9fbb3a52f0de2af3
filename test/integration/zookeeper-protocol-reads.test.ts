import { once } from 'node:events';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ZooKeeperConnection } from '../../src/server/stores/zookeeper/protocol/connection.js';
import { JuteWriter } from '../../src/server/stores/zookeeper/protocol/jute.js';
import {
  ErrorCode,
  EventType,
  KeeperState,
  type WatcherEvent,
} from '../../src/server/stores/zookeeper/protocol/records.js';

/**
 * How the client reads what arrives together. A real ZooKeeper decides how its replies and
 * notifications are cut into TCP reads, so this scripted peer (it speaks only the handshake and
 * writes chosen bytes) makes the case a real server produces only sometimes: a reply and the
 * notification right behind it in one read. Everything else is tested against real ZooKeeper
 * (the other test/integration/zookeeper-protocol*.test.ts).
 */

const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** Length-prefixed packets, concatenated into one buffer: one write, one read. */
function packets(...bodies: Array<(writer: JuteWriter) => void>): Buffer {
  const writer = new JuteWriter();
  for (const body of bodies) {
    const at = writer.startPacket();
    body(writer);
    writer.endPacket(at);
  }
  return Buffer.from(writer.bytes());
}

/** A peer that grants a session, then hands each request's first 8 bytes (xid, op) to `onRequest`. */
async function scriptedPeer(onRequest: (socket: Socket, xid: number, op: number) => void): Promise<string> {
  const server = createServer((socket) => {
    let handshaken = false;
    let pending = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 4 && pending.length >= 4 + pending.readInt32BE(0)) {
        const body = pending.subarray(4, 4 + pending.readInt32BE(0));
        pending = pending.subarray(4 + body.length);
        if (!handshaken) {
          handshaken = true;
          socket.write(
            packets((w) => w.int(0).int(9_000).long(0x1234n).buffer(Buffer.alloc(16, 7)).bool(false)),
          );
        } else {
          onRequest(socket, body.readInt32BE(0), body.readInt32BE(4));
        }
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('ZooKeeperConnection reading a reply and a notification in one read', () => {
  it('has armed the reply’s watch before it reads the notification behind it', async () => {
    const path = '/watched';
    const address = await scriptedPeer((socket, xid) => {
      // exists(path, watch) answered NONODE (an existence watch), and in the same write the
      // notification that the node was created.
      socket.write(
        packets(
          (w) => w.int(xid).long(10n).int(ErrorCode.noNode),
          (w) =>
            w.int(-1).long(11n).int(0).int(EventType.nodeCreated).int(KeeperState.syncConnected).string(path),
        ),
      );
    });
    const zk = await ZooKeeperConnection.connect({ servers: [address], sessionTimeoutMs: 9_000 });
    closers.push(() => void zk.close());
    const events: WatcherEvent[] = [];
    expect(await zk.exists(path, (event) => events.push(event))).toBeNull();
    expect(events).toEqual([{ type: EventType.nodeCreated, state: KeeperState.syncConnected, path }]);
  });
});
