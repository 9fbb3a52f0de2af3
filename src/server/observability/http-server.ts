import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { Metrics } from './metrics.js';

/**
 * The HTTP side of an instance, for operators: Prometheus metrics on `/metrics`. Read-only;
 * bound to loopback unless configured otherwise.
 */
export class HttpServer {
  readonly #server: Server;

  constructor(options: { metrics: Metrics; logger: Logger }) {
    const { metrics, logger } = options;
    this.#server = createServer((request, response) => {
      const path = new URL(request.url ?? '/', 'http://localhost').pathname;
      if (request.method !== 'GET' && request.method !== 'HEAD') {
        response.writeHead(405, { allow: 'GET, HEAD' }).end();
        return;
      }
      if (path === '/metrics') {
        metrics.registry.metrics().then(
          (text) => response.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
          (error: unknown) => {
            logger.error({ err: error }, 'could not collect metrics');
            response.writeHead(500).end();
          },
        );
        return;
      }
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
    });
  }

  /** Binds `host:port` (0 picks a free port) and resolves with the bound port. */
  async listen(host: string, port: number): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(port, host, () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    return (this.#server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
