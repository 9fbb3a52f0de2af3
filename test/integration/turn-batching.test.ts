import http2 from 'node:http2';
import { once } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { StreamWriter, batchedByTurn } from '../../src/server/transport/stream-writer.js';

/**
 * A real grpc-js server and a bare HTTP/2 client that sees the DATA frames as they arrive:
 * the messages a stream sends in one turn leave in one write, in order, and backpressure holds.
 * (What needs no socket is in test/unit/turn-batching.test.ts.)
 */
const identity = (buffer: Buffer): Buffer => buffer;
const METHOD = '/test.Batching/Stream';

type Handler = (call: grpc.ServerDuplexStream<Buffer, Buffer>) => void;

const cleanups: Array<() => Promise<unknown> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function serve(handler: Handler): Promise<number> {
  const server = new grpc.Server();
  server.addService(
    {
      stream: {
        path: METHOD,
        requestStream: true,
        responseStream: true,
        requestSerialize: identity,
        requestDeserialize: identity,
        responseSerialize: identity,
        responseDeserialize: identity,
      },
    },
    { stream: handler },
  );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  cleanups.push(() => new Promise<void>((resolve) => server.tryShutdown(() => resolve())));
  return port;
}

/** Opens the stream with one empty message; resolves with its DATA chunks, as they came. */
async function readChunks(port: number): Promise<Buffer[]> {
  const client = http2.connect(`http://127.0.0.1:${port}`);
  cleanups.push(() => void client.close());
  const stream = client.request({
    ':method': 'POST',
    ':path': METHOD,
    'content-type': 'application/grpc',
    te: 'trailers',
  });
  stream.end(Buffer.from([0, 0, 0, 0, 0]));
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(chunk));
  await once(stream, 'end');
  return chunks;
}

/** The length-prefixed gRPC messages in `chunk`, which holds whole ones. */
function splitMessages(chunk: Buffer): Buffer[] {
  const messages: Buffer[] = [];
  for (let at = 0; at < chunk.length;) {
    const length = chunk.readUInt32BE(at + 1);
    messages.push(chunk.subarray(at + 5, at + 5 + length));
    at += 5 + length;
  }
  return messages;
}

describe('batchedByTurn', () => {
  it("reaches below this grpc-js's call: the messages of one turn leave in one DATA frame, in order", async () => {
    let batched = false;
    const port = await serve((call) => {
      const writable = batchedByTurn(call);
      batched = writable !== call;
      const writer = new StreamWriter(writable);
      call.on('data', () => {
        for (const text of ['acquired', 'released', 'ended']) writer.write(0, Buffer.from(text));
        setImmediate(() => {
          writer.write(0, Buffer.from('next turn'));
          call.end();
        });
      });
    });
    const chunks = await readChunks(port);
    expect(batched).toBe(true);
    expect(chunks.map((chunk) => splitMessages(chunk).map(String))).toEqual([
      ['acquired', 'released', 'ended'],
      ['next turn'],
    ]);
  });

  it('sends what a callback and the promises it settles write in one DATA frame', async () => {
    const port = await serve((call) => {
      const writer = new StreamWriter(batchedByTurn(call));
      // The turn is a macrotask of its own (an immediate): a plain callback, not a promise's.
      call.on('data', () =>
        setImmediate(() => {
          writer.write(0, Buffer.from('queued'));
          void Promise.resolve()
            .then(() => writer.write(0, Buffer.from('acquired')))
            .then(() => queueMicrotask(() => writer.write(0, Buffer.from('released'))));
          setImmediate(() => {
            writer.write(0, Buffer.from('next turn'));
            call.end();
          });
        }),
      );
    });
    const chunks = await readChunks(port);
    expect(chunks.map((chunk) => splitMessages(chunk).map(String))).toEqual([
      ['queued', 'acquired', 'released'],
      ['next turn'],
    ]);
  });

  it('calls back once each message has gone out, and keeps to backpressure: false past the window, then drain', async () => {
    const sent: string[] = [];
    let refused = 0;
    const port = await serve((call) => {
      const writable = batchedByTurn(call);
      const writeAll = async (): Promise<void> => {
        for (let i = 0; i < 200; i += 1) {
          const message = Buffer.alloc(4096, i % 256);
          if (!writable.write(message, () => sent.push(String(i)))) {
            refused += 1;
            await new Promise<void>((resolve) => writable.once('drain', () => resolve()));
          }
        }
        call.end();
      };
      call.on('data', () => void writeAll());
    });
    const received = splitMessages(Buffer.concat(await readChunks(port)));
    expect(received).toHaveLength(200);
    expect(received.map((message) => message[0])).toEqual(Array.from({ length: 200 }, (_, i) => i % 256));
    expect(sent).toEqual(Array.from({ length: 200 }, (_, i) => String(i)));
    expect(refused).toBeGreaterThan(0);
  });
});
