import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  FENCING_HEADER,
  HighWaterMarks,
  fencedFetch,
  fencingHeaders,
  fencingMiddleware,
  type FencingMiddlewareOptions,
} from '../../src/fencing/index.js';

/**
 * The HTTP pair of lockstream/fencing: fencingMiddleware in a real node:http server, called with
 * fetch through fencedFetch and fencingHeaders (and node:http for what fetch cannot send).
 */

interface Resource {
  readonly url: string;
  readonly handled: string[];
}

const servers: http.Server[] = [];

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    server.close();
    await once(server, 'close');
  }
});

/** A node:http server whose handler runs behind the middleware, Connect-style. */
async function startResource(options: FencingMiddlewareOptions = {}): Promise<Resource> {
  const handled: string[] = [];
  const fencing = fencingMiddleware(options);
  const server = http.createServer((req, res) => {
    fencing(req, res, (error) => {
      if (error !== undefined) {
        res.writeHead(500, { 'content-type': 'text/plain' }).end(`next(error): ${(error as Error).message}`);
        return;
      }
      handled.push(`${req.method} ${req.url}`);
      res.writeHead(200, { 'content-type': 'text/plain' }).end('written');
    });
  });
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, handled };
}

describe('the HTTP middleware of lockstream/fencing', () => {
  it('admits equal and higher tokens and answers a stale one 409 with a JSON body', async () => {
    const { url, handled } = await startResource();
    const older = { name: 'reports/daily', token: 41n };
    const newer = { name: 'reports/daily', token: 42n };
    expect((await fencedFetch(older, `${url}/a`, { method: 'PUT', body: 'a' })).status).toBe(200);
    expect((await fencedFetch(newer, `${url}/b`, { method: 'PUT', body: 'b' })).status).toBe(200);
    expect((await fencedFetch(newer, `${url}/c`, { method: 'PUT', body: 'c' })).status).toBe(200);

    const stale = await fencedFetch(older, `${url}/d`, { method: 'PUT', body: 'd' });
    expect(stale.status).toBe(409);
    expect(stale.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(await stale.json()).toEqual({
      error: 'stale_fencing_token',
      message:
        'stale fencing token for resource "reports/daily": lock "reports/daily" token 41 is below the ' +
        "resource's high-water mark 42",
      resource: 'reports/daily',
      lock: 'reports/daily',
      token: '41',
      mark: '42',
    });
    expect(handled).toEqual(['PUT /a', 'PUT /b', 'PUT /c']);
  });

  it('answers a malformed header 400 and a missing one 428, and passes a missing one when told to', async () => {
    const { url, handled } = await startResource();
    const malformed = await fetch(url, { headers: { [FENCING_HEADER]: 'reports%2Fdaily' } });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toEqual({
      error: 'malformed_fencing_token',
      message:
        'malformed lockstream-fencing-token "reports%2Fdaily": no \':\' between the lock name and the token ' +
        '(<percent-encoded name>:<decimal token>)',
    });
    const missing = await fetch(url, { method: 'POST' });
    expect(missing.status).toBe(428);
    expect(await missing.json()).toEqual({
      error: 'missing_fencing_token',
      message: 'POST request carries no lockstream-fencing-token; this resource takes fenced calls only',
    });
    expect(handled).toEqual([]);

    const lenient = await startResource({ missingToken: 'pass' });
    expect((await fetch(`${lenient.url}/bare`)).status).toBe(200);
    expect(lenient.handled).toEqual(['GET /bare']);
  });

  it('refuses a request that carries the header twice (400), as node:http can send it', async () => {
    const { url } = await startResource();
    const request = http.request(`${url}/twice`, { headers: { [FENCING_HEADER]: ['a:1', 'a:2'] } });
    request.end();
    const [response] = (await once(request, 'response')) as [http.IncomingMessage];
    let body = '';
    for await (const chunk of response) body += String(chunk);
    expect(response.statusCode).toBe(400);
    expect(JSON.parse(body)).toMatchObject({
      message: 'malformed lockstream-fencing-token "a:1, a:2": 2 values; a call carries exactly one',
    });
  });

  it('keeps the caller’s own headers, from init or from a Request, beside the token', async () => {
    let seen: http.IncomingHttpHeaders = {};
    const server = http.createServer((req, res) => {
      seen = req.headers;
      res.end();
    });
    servers.push(server);
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const lock = { name: 'ünïcode:name', token: 18446744073709551615n };
    await fencedFetch(lock, url, { headers: { 'x-request-id': 'r1' } });
    expect(seen['x-request-id']).toBe('r1');
    expect(seen[FENCING_HEADER]).toBe('%C3%BCn%C3%AFcode%3Aname:18446744073709551615');
    await fencedFetch(lock, new Request(url, { headers: { 'x-request-id': 'r2' } }));
    expect(seen['x-request-id']).toBe('r2');
    await fetch(url, {
      headers: { ...fencingHeaders({ name: 'services/leader', term: 3n }), accept: 'text/plain' },
    });
    expect(seen[FENCING_HEADER]).toBe('services%2Fleader:3');
  });

  it('maps requests to resources as told, and refuses another lock on a fenced resource', async () => {
    const marks = new HighWaterMarks();
    const { url } = await startResource({
      marks,
      resource: (_fence, req) => new URL(req.url!, 'http://x').pathname,
    });
    expect((await fencedFetch({ name: 'ledger-lock', token: 10n }, `${url}/ledger`)).status).toBe(200);
    const other = await fencedFetch({ name: 'other-lock', token: 11n }, `${url}/ledger`);
    expect(other.status).toBe(409);
    expect(await other.json()).toEqual({
      error: 'fencing_lock_mismatch',
      message:
        'resource "/ledger" is fenced by lock "ledger-lock" (high-water mark 10), not by lock "other-lock" (token 11)',
      resource: '/ledger',
      lock: 'other-lock',
      token: '11',
      markLock: 'ledger-lock',
      mark: '10',
    });
    expect(await marks.mark('/ledger')).toEqual({ lockName: 'ledger-lock', token: 10n });
  });

  it("hands a mark store's failure to next(error)", async () => {
    const marks = new HighWaterMarks({
      store: {
        raise: () => Promise.reject(new Error('mark store down')),
        get: () => Promise.resolve(undefined),
      },
    });
    const { url, handled } = await startResource({ marks });
    const response = await fencedFetch({ name: 'x', token: 1n }, url);
    expect(response.status).toBe(500);
    expect(await response.text()).toBe('next(error): mark store down');
    expect(handled).toEqual([]);
  });
});
