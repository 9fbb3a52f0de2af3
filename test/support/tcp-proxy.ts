import net from 'node:net';

/**
 * A loopback TCP proxy in front of a server, for fault injection: it can hold back the server's
 * replies and cut every connection, which is how a client sees a connection loss after its
 * request was already applied.
 */
export class TcpProxy {
  readonly #server: net.Server;
  readonly #target: { host: string; port: number };
  readonly #pairs = new Set<{ client: net.Socket; upstream: net.Socket }>();
  #holding = false;
  #held = Buffer.alloc(0);
  readonly #heldWaiters: Array<() => void> = [];

  private constructor(target: { host: string; port: number }) {
    this.#target = target;
    this.#server = net.createServer((client) => this.#accept(client));
  }

  /** Starts a proxy on a free loopback port in front of `host:port`. */
  static async start(target: string): Promise<TcpProxy> {
    const [host = '127.0.0.1', port = '0'] = target.split(':');
    const proxy = new TcpProxy({ host, port: Number(port) });
    await new Promise<void>((resolve) => proxy.#server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get address(): string {
    const address = this.#server.address() as net.AddressInfo;
    return `127.0.0.1:${address.port}`;
  }

  /** From now on, bytes from the server are kept here instead of reaching the client. */
  holdReplies(): void {
    this.#holding = true;
  }

  /** Resolves once the held-back server bytes contain `text` (e.g. a created node's path). */
  async heldReplyContaining(text: string): Promise<void> {
    while (!this.#held.includes(text)) {
      await new Promise<void>((resolve) => this.#heldWaiters.push(resolve));
    }
  }

  /** Cuts every connection (held bytes are dropped) and forwards normally again. */
  severAll(): void {
    this.#holding = false;
    this.#held = Buffer.alloc(0);
    for (const { client, upstream } of this.#pairs) {
      client.destroy();
      upstream.destroy();
    }
    this.#pairs.clear();
  }

  async close(): Promise<void> {
    this.severAll();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #accept(client: net.Socket): void {
    const upstream = net.connect(this.#target);
    const pair = { client, upstream };
    this.#pairs.add(pair);
    client.on('data', (chunk: Buffer) => upstream.write(chunk));
    upstream.on('data', (chunk: Buffer) => {
      if (!this.#holding) {
        client.write(chunk);
        return;
      }
      this.#held = Buffer.concat([this.#held, chunk]);
      for (const wake of this.#heldWaiters.splice(0)) wake();
    });
    const drop = (): void => {
      this.#pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  }
}
