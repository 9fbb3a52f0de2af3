import net from 'node:net';

interface Pair {
  readonly client: net.Socket;
  readonly upstream: net.Socket;
  /** Bytes held back while frozen, per direction, in arrival order. */
  readonly heldUp: Buffer[];
  readonly heldDown: Buffer[];
  /** Server bytes held back by a lag, each with the performance.now() it is due at, in order. */
  readonly lagged: Array<{ readonly dueAt: number; readonly chunk: Buffer }>;
  lagTimer: NodeJS.Timeout | undefined;
}

/**
 * A loopback TCP proxy in front of a server, for fault injection. It can hold back the server's
 * replies, freeze a link in both directions without closing it (a network that silently drops
 * everything, as a partition or a dead host looks), thaw it again, make the server's replies fall
 * further and further behind (a server or network ever slower, though never silent for long),
 * cut every connection, and cut connections that stay idle too long (as load balancers and NAT
 * gateways do).
 */
export class TcpProxy {
  readonly #server: net.Server;
  #target: { host: string; port: number };
  readonly #pairs = new Set<Pair>();
  #holdingReplies = false;
  #frozen = false;
  /** performance.now() when replies started to lag; undefined when they do not. */
  #lagSince: number | undefined;
  #held = Buffer.alloc(0);
  #idleCutMs: number | undefined;
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

  /** New connections go to `target` from now on (those open stay where they are). */
  retarget(target: string): void {
    const [host = '127.0.0.1', port = '0'] = target.split(':');
    this.#target = { host, port: Number(port) };
  }

  get address(): string {
    const address = this.#server.address() as net.AddressInfo;
    return `127.0.0.1:${address.port}`;
  }

  /** From now on, bytes from the server are kept here instead of reaching the client. */
  holdReplies(): void {
    this.#holdingReplies = true;
  }

  /** Resolves once the held-back server bytes contain `text` (e.g. a created node's path). */
  async heldReplyContaining(text: string): Promise<void> {
    while (!this.#held.includes(text)) {
      await new Promise<void>((resolve) => this.#heldWaiters.push(resolve));
    }
  }

  /** Nothing passes in either direction, on open or new connections, and nothing is closed. */
  freeze(): void {
    this.#frozen = true;
  }

  /** Ends a freeze: what was held back is delivered in order, and traffic flows again. */
  thaw(): void {
    this.#frozen = false;
    for (const pair of this.#pairs) {
      for (const chunk of pair.heldUp.splice(0)) pair.upstream.write(chunk);
      for (const chunk of pair.heldDown.splice(0)) pair.client.write(chunk);
    }
  }

  /**
   * From now on, each chunk from the server reaches the client as late as the time since this
   * call: a reply to a request sent t ms into the lag arrives about 2t ms into it. The client
   * keeps hearing something (every request is answered, later and later), while the age of the
   * newest answered request grows without end.
   */
  lagReplies(): void {
    this.#lagSince = performance.now();
  }

  /** Ends a lag: what it holds back is delivered at once, in order, and replies flow again. */
  endLag(): void {
    this.#lagSince = undefined;
    for (const pair of this.#pairs) this.#deliverLagged(pair, Infinity);
  }

  /** From now on, a connection that carries no byte in either direction for `ms` is cut. */
  cutIdleAfter(ms: number): void {
    this.#idleCutMs = ms;
  }

  /** Cuts every connection (held bytes are dropped) and forwards normally again. */
  severAll(): void {
    this.#holdingReplies = false;
    this.#frozen = false;
    this.#held = Buffer.alloc(0);
    for (const { client, upstream } of this.#pairs) {
      client.destroy();
      upstream.destroy();
    }
    for (const pair of this.#pairs) clearTimeout(pair.lagTimer);
    this.#pairs.clear();
  }

  async close(): Promise<void> {
    this.severAll();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  /** Writes the lagged chunks due by `now` to the client, and wakes for the next one. */
  #deliverLagged(pair: Pair, now: number): void {
    clearTimeout(pair.lagTimer);
    pair.lagTimer = undefined;
    while (pair.lagged.length > 0 && pair.lagged[0]!.dueAt <= now)
      pair.client.write(pair.lagged.shift()!.chunk);
    const next = pair.lagged[0];
    if (next)
      pair.lagTimer = setTimeout(() => this.#deliverLagged(pair, performance.now()), next.dueAt - now);
  }

  #accept(client: net.Socket): void {
    // No Nagle delays: the proxy must not slow down small request/reply traffic.
    const upstream = net.connect({ ...this.#target, noDelay: true });
    client.setNoDelay(true);
    const pair: Pair = { client, upstream, heldUp: [], heldDown: [], lagged: [], lagTimer: undefined };
    this.#pairs.add(pair);
    let idle: NodeJS.Timeout | undefined;
    const active = (): void => {
      clearTimeout(idle);
      if (this.#idleCutMs !== undefined) idle = setTimeout(drop, this.#idleCutMs);
    };
    client.on('data', active);
    upstream.on('data', active);
    client.on('data', (chunk: Buffer) => {
      if (this.#frozen) pair.heldUp.push(chunk);
      else upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (this.#frozen) {
        pair.heldDown.push(chunk);
      } else if (this.#lagSince !== undefined || pair.lagged.length > 0) {
        const now = performance.now();
        pair.lagged.push({ dueAt: now + (now - (this.#lagSince ?? now)), chunk });
        this.#deliverLagged(pair, now);
      } else if (this.#holdingReplies) {
        this.#held = Buffer.concat([this.#held, chunk]);
        for (const wake of this.#heldWaiters.splice(0)) wake();
      } else {
        client.write(chunk);
      }
    });
    const drop = (): void => {
      clearTimeout(idle);
      clearTimeout(pair.lagTimer);
      this.#pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    active();
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  }
}
