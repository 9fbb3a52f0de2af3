import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ZooKeeperConnection } from '../../src/server/stores/zookeeper/protocol/connection.js';
import { JuteWriter } from '../../src/server/stores/zookeeper/protocol/jute.js';
import { scaled } from '../support/timing.js';

/**
 * ZooKeeper closes a session's connection when another client attaches to the session: an
 * instance and the one taking its session over. Both reconnecting at once, each closed the
 * other's connection before either could send a request, for dozens of rounds (seen in the
 * hand-over conformance test, which failed when the taker's first listing lost its connection
 * five times in a row). This scripted peer does what ZooKeeper does to the loser of every such
 * round: it grants the session, then closes the connection.
 */

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** A peer that answers each handshake and closes the connection at once, noting when. */
async function closingPeer(onConnection: (at: number) => void): Promise<string> {
  const server = createServer((socket) => {
    socket.once('data', () => {
      const writer = new JuteWriter();
      const at = writer.startPacket();
      // ConnectResponse: protocolVersion, timeOut, sessionId, passwd, readOnly.
      writer.int(0).int(9_000).long(0x42n).buffer(Buffer.alloc(16, 7)).bool(false);
      writer.endPacket(at);
      socket.end(Buffer.from(writer.bytes()));
      onConnection(performance.now());
    });
    socket.on('error', () => {});
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('ZooKeeperConnection redial', () => {
  it(
    'pauses before dialling again after connections closed right after their handshake, longer each time: no storm of reconnects',
    async () => {
      const CONNECTIONS = 12;
      const times: number[] = [];
      let enough!: () => void;
      const reached = new Promise<void>((resolve) => (enough = resolve));
      const address = await closingPeer((at) => {
        times.push(at);
        if (times.length === CONNECTIONS) enough();
      });
      const connection = ZooKeeperConnection.open({ servers: [address], sessionTimeoutMs: 9_000 });
      closers.push(() => connection.close());
      await reached;
      // Redialling at once, twelve connections take a few milliseconds. With pauses drawn at
      // random below 10, 20, 40 … 1000 ms, the chance that all of them together come to less
      // than 200 ms is below one in ten thousand.
      expect(times[CONNECTIONS - 1]! - times[0]!).toBeGreaterThan(200);
    },
    scaled(30_000),
  );
});
