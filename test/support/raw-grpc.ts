import { connect, constants, type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import { once } from 'node:events';

/** What a message type offers for the wire: ts-proto's generated encode/decode. */
export interface WireCodec<T> {
  encode(message: T): { finish(): Uint8Array };
  decode(bytes: Uint8Array): T;
}

export interface RawCallEnd {
  /** grpc-status from the trailers (or from headers, for a trailers-only answer). */
  readonly code: number;
  readonly details: string;
}

/**
 * One gRPC call spoken directly over HTTP/2, so a test controls every header the client sends
 * (a `grpc-timeout` no library would produce) and sees exactly what comes back.
 */
export class RawGrpcCall<Request, Response> {
  readonly #stream: ClientHttp2Stream;
  readonly #requests: WireCodec<Request>;
  readonly #received: Response[] = [];
  readonly #waiting: Array<{ match: (message: Response) => boolean; resolve: (message: Response) => void }> =
    [];
  #buffered = Buffer.alloc(0);
  /** Resolves with the call's status once the server has ended it (its trailers have arrived). */
  readonly ended: Promise<RawCallEnd>;

  constructor(
    session: ClientHttp2Session,
    path: string,
    headers: Record<string, string>,
    codecs: { request: WireCodec<Request>; response: WireCodec<Response> },
  ) {
    this.#requests = codecs.request;
    this.#stream = session.request({
      [constants.HTTP2_HEADER_METHOD]: 'POST',
      [constants.HTTP2_HEADER_PATH]: path,
      'content-type': 'application/grpc',
      te: 'trailers',
      ...headers,
    });
    let code: number | undefined;
    let details = '';
    const readStatus = (fields: Record<string, string | string[] | undefined>): void => {
      if (fields['grpc-status'] === undefined) return;
      code = Number(fields['grpc-status']);
      details = decodeURIComponent(String(fields['grpc-message'] ?? ''));
    };
    this.#stream.on('response', readStatus);
    this.#stream.on('trailers', readStatus);
    this.#stream.on('data', (chunk: Buffer) => {
      this.#buffered = Buffer.concat([this.#buffered, chunk]);
      // Length-prefixed messages: a compression flag byte, a 4-byte big-endian length.
      while (this.#buffered.length >= 5 && this.#buffered.length >= 5 + this.#buffered.readUInt32BE(1)) {
        const length = this.#buffered.readUInt32BE(1);
        this.#deliver(codecs.response.decode(this.#buffered.subarray(5, 5 + length)));
        this.#buffered = this.#buffered.subarray(5 + length);
      }
    });
    // The server's end of the stream, trailers included; our side may still be open.
    this.ended = Promise.race([once(this.#stream, 'end'), once(this.#stream, 'close')]).then(() => ({
      code: code ?? -1,
      details,
    }));
  }

  send(message: Request): void {
    const body = this.#requests.encode(message).finish();
    const frame = Buffer.alloc(5 + body.length);
    frame.writeUInt32BE(body.length, 1);
    frame.set(body, 5);
    this.#stream.write(frame);
  }

  halfClose(): void {
    this.#stream.end();
  }

  /** Every message received so far, in order. */
  get received(): readonly Response[] {
    return this.#received;
  }

  /** The first message, already received or still to come, that `match` accepts; rejects if the call ends first. */
  next(match: (message: Response) => boolean): Promise<Response> {
    const seen = this.#received.find(match);
    if (seen !== undefined) return Promise.resolve(seen);
    return Promise.race([
      new Promise<Response>((resolve) => this.#waiting.push({ match, resolve })),
      this.ended.then((end) => {
        throw new Error(`the call ended (${end.code} ${end.details}) before the awaited message`);
      }),
    ]);
  }

  #deliver(message: Response): void {
    this.#received.push(message);
    for (const waiter of this.#waiting.splice(0)) {
      if (waiter.match(message)) waiter.resolve(message);
      else this.#waiting.push(waiter);
    }
  }
}

/** An HTTP/2 connection to a plaintext gRPC server; close it when done. */
export async function connectRaw(address: string): Promise<ClientHttp2Session> {
  const session = connect(`http://${address}`);
  await once(session, 'connect');
  return session;
}
