/*
 * The read-only HTTP server for operators: the probes (/livez, /readyz), Prometheus metrics, the
 * live page, and the page's JSON and event streams.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { writeDrained } from '../../common/abort.js';
import { valueText } from '../../common/value-text.js';
import { toJson } from '../../common/json.js';
import { isLockError } from '../lock-error.js';
import type { LockDescription, LockInspector, LockSummary } from '../engine/index.js';
import type { GuardedRecords } from '../records/guarded-records.js';
import type { Metrics } from './metrics.js';
import type { LockActivityReport } from './lock-activity.js';
import { PAGE_HTML } from './page.js';
import { Liveness } from './liveness.js';
import type { Readiness } from './readiness.js';

/** How often the overview stream looks for changes while a page is open. */
const OVERVIEW_INTERVAL_MS = 500;

/**
 * The HTTP side of an instance, for operators, read-only: the probes `/livez` (the process
 * answers) and `/readyz` (it should be sent calls), Prometheus metrics on `/metrics`, the
 * live page on `/`, and its JSON (`/api/locks`, `/api/locks/<name>`, `/api/locks/<name>/records`) and event streams
 * (`/api/events`, `/api/locks/<name>/events`). Bound to loopback unless configured otherwise.
 */
export class HttpServer {
  readonly #server: Server;
  readonly #metrics: Metrics;
  readonly #inspector: LockInspector;
  readonly #records: GuardedRecords;
  readonly #readiness: Readiness;
  readonly #liveness = new Liveness();
  readonly #logger: Logger;
  readonly #closing = new AbortController();

  readonly #admits: ((authorization: string | undefined) => boolean) | undefined;

  /**
   * `admits`, if given, decides from its `Authorization` header whether a request gets in; the
   * probes, which tell nothing of the locks, are open to all (a kubelet sends no credentials).
   */
  constructor(options: {
    metrics: Metrics;
    inspector: LockInspector;
    records: GuardedRecords;
    readiness: Readiness;
    logger: Logger;
    admits?: ((authorization: string | undefined) => boolean) | undefined;
  }) {
    this.#admits = options.admits;
    this.#metrics = options.metrics;
    this.#inspector = options.inspector;
    this.#records = options.records;
    this.#readiness = options.readiness;
    this.#logger = options.logger;
    this.#server = createServer((request, response) => {
      this.#route(request, response).catch((error: unknown) => this.#fail(response, error));
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
    this.#closing.abort();
    this.#liveness.stop();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #route(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = new URL(request.url ?? '/', 'http://localhost').pathname;
    if (
      (path === '/livez' || path === '/readyz') &&
      (request.method === 'GET' || request.method === 'HEAD')
    ) {
      this.#probe(path, response);
      return;
    }
    if (this.#admits && !this.#admits(request.headers.authorization)) {
      response
        .writeHead(401, {
          'www-authenticate': 'Basic realm="lockstream", charset="UTF-8"',
          'content-type': 'text/plain',
        })
        .end('credentials required: Basic (caller name and token) or Bearer token\n');
      return;
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (path === '/') {
      response
        .writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' })
        .end(PAGE_HTML);
      return;
    }
    if (path === '/metrics') {
      const text = await this.#metrics.registry.metrics();
      response.writeHead(200, { 'content-type': this.#metrics.registry.contentType }).end(text);
      return;
    }
    if (path === '/api/locks') {
      sendJson(response, await this.#overview());
      return;
    }
    if (path === '/api/events') {
      this.#streamOverview(request, response);
      return;
    }
    const lock = /^\/api\/locks\/([^/]+)(\/events|\/records)?$/.exec(path);
    if (lock) {
      const name = decodeURIComponent(lock[1] ?? '');
      if (lock[2] === '/events') this.#streamLock(name, request, response);
      else if (lock[2] === '/records') sendJson(response, await this.#recordsJson(name));
      else
        sendJson(
          response,
          describeJson(await this.#inspector.describe(name), this.#metrics.activity.report(name)),
        );
      return;
    }
    response.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
  }

  /**
   * `/livez`: 200 whenever the process answers (what it checked, and how late its event loop
   * runs). `/readyz`: 200 while the store's session is up and the instance is not draining, else
   * 503 with the reasons; the same answer as gRPC health checking.
   */
  #probe(path: '/livez' | '/readyz', response: ServerResponse): void {
    if (path === '/livez') {
      sendJson(response, this.#liveness.report(), 200, true);
      return;
    }
    const report = this.#readiness.report();
    sendJson(response, report, report.ready ? 200 : 503, true);
  }

  /** A lock's guarded records, each value as base64 and as text for people (see valueText). */
  async #recordsJson(name: string): Promise<Record<string, unknown>> {
    const records = await this.#records.list(name);
    return {
      name,
      records: records.map(({ key, value, revision }) => ({
        key,
        revision: revision.toString(),
        bytes: value.byteLength,
        value: Buffer.from(value).toString('base64'),
        valueText: valueText(value),
      })),
    };
  }

  /** Every lock, and what happened to this instance's sessions since it started. */
  async #overview(): Promise<{ locks: LockSummary[]; sessions: Readonly<Record<string, number>> }> {
    return { locks: await this.#allLocks(), sessions: { ...this.#metrics.sessionCounts } };
  }

  async #allLocks(): Promise<LockSummary[]> {
    const locks: LockSummary[] = [];
    let pageToken = '';
    do {
      const page = await this.#inspector.list({ prefix: '', pageSize: 1000, pageToken });
      locks.push(...page.locks);
      pageToken = page.nextPageToken;
    } while (pageToken !== '');
    return locks;
  }

  /** Server-sent events: the list of locks now, and again whenever it changes. */
  #streamOverview(request: IncomingMessage, response: ServerResponse): void {
    const stop = openEventStream(request, response, this.#closing.signal);
    let last = '';
    const tick = async (): Promise<void> => {
      let data: string;
      try {
        data = toJson(await this.#overview());
      } catch (error) {
        data = toJson({ error: isLockError(error) ? error.message : 'could not list the locks' });
      }
      // A reader that has not taken the last update gets the newest one once it has.
      if (data === last || stop.aborted || response.writableNeedDrain) return;
      response.write(`data: ${data}\n\n`);
      last = data;
    };
    void tick();
    const timer = setInterval(() => void tick(), OVERVIEW_INTERVAL_MS);
    stop.addEventListener('abort', () => clearInterval(timer), { once: true });
  }

  /**
   * Server-sent events: one lock's state now, and after every change (WatchLock's source); and
   * again when this instance's activity on it changed (a grant recorded after the change that
   * showed it), looked at as often as the overview is.
   */
  #streamLock(name: string, request: IncomingMessage, response: ServerResponse): void {
    const stop = openEventStream(request, response, this.#closing.signal);
    let state: LockDescription | undefined;
    let sent = '';
    const send = async (): Promise<void> => {
      if (!state) return;
      const json = describeJson(state, this.#metrics.activity.report(name));
      // Unchanged but for the clock: nothing to send.
      const unchanged = toJson({ ...json, now: undefined });
      if (unchanged === sent) return;
      sent = unchanged;
      await writeDrained(response, `data: ${toJson(json)}\n\n`, stop);
    };
    const timer = setInterval(() => {
      if (!response.writableNeedDrain) void send();
    }, OVERVIEW_INTERVAL_MS);
    stop.addEventListener('abort', () => clearInterval(timer), { once: true });
    this.#inspector
      .watch(name, stop, (described) => {
        state = described;
        return send();
      })
      .catch((error: unknown) => {
        const message = isLockError(error) ? error.message : 'could not describe the lock';
        if (!stop.aborted) response.end(`data: ${toJson({ error: message })}\n\n`);
      });
  }

  #fail(response: ServerResponse, error: unknown): void {
    if (isLockError(error, 'INVALID_ARGUMENT')) {
      sendJson(response, { error: error.message }, 400);
      return;
    }
    if (isLockError(error)) {
      sendJson(response, { error: error.message }, 503);
      return;
    }
    this.#logger.error({ err: error }, 'HTTP request failed');
    if (!response.headersSent) response.writeHead(500);
    response.end();
  }
}

/** Starts an event stream; the returned signal aborts when the client goes or the server closes. */
function openEventStream(
  request: IncomingMessage,
  response: ServerResponse,
  closing: AbortSignal,
): AbortSignal {
  response.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-store',
    connection: 'keep-alive',
  });
  const stop = new AbortController();
  const end = (): void => stop.abort();
  request.once('close', end);
  closing.addEventListener('abort', end, { once: true });
  stop.signal.addEventListener('abort', () => closing.removeEventListener('abort', end), { once: true });
  return stop.signal;
}

/**
 * A lock's state for the page and scripts, with what this instance saw of it lately: its recent
 * grants, releases and losses, the waits of those grants, and when each holder it granted was.
 */
function describeJson(description: LockDescription, activity: LockActivityReport): Record<string, unknown> {
  const request = (info: LockDescription['holders'][number]): unknown => ({
    mode: info.mode,
    owner: info.owner,
    token: info.fencingToken,
    requestedAt: info.requestedAt?.toISOString(),
    grantedAt: activity.grantedAt.get(info.fencingToken)?.toISOString(),
    instance: info.instance,
    peer: info.peer,
    // Base64, as grpcurl prints bytes; `valueText` for people (see valueText).
    value: Buffer.from(info.value).toString('base64'),
    valueText: valueText(info.value),
    weight: info.weight,
  });
  return {
    name: description.name,
    holders: description.holders.map(request),
    waiters: description.waiters.map(request),
    limit: description.limit,
    usedWeight: description.usedWeight,
    // The server's clock, for the page to count durations from timestamps it did not take.
    now: new Date().toISOString(),
    activity: {
      events: activity.events.map((event) => ({ ...event, at: event.at.toISOString() })),
      waits: activity.waits,
    },
  };
}

function sendJson(response: ServerResponse, body: unknown, status = 200, fresh = false): void {
  const headers = { 'content-type': 'application/json', ...(fresh ? { 'cache-control': 'no-store' } : {}) };
  response.writeHead(status, headers).end(toJson(body));
}
