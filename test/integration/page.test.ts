// playwright-core's declarations speak of DOM types; only this test (not the server build) needs them.
/// <reference lib="dom" />
import { mkdirSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { pino } from 'pino';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { LockClient } from '../../src/client/index.js';
import { loadConfig } from '../../src/server/config.js';
import { startServer, type RunningServer } from '../../src/server/main.js';
import { ElectionCaller } from '../support/election-caller.js';
import { deferred } from '../support/lock-caller.js';
import { requireZooKeeper } from '../support/require-zookeeper.js';
import { scaled } from '../support/timing.js';

const connectString = requireZooKeeper(inject('zookeeperConnectString'));

/** Where the screenshot goes (kept after the run, for people to look at). */
const SCREENSHOTS = new URL('../../.tmp/screenshots/', import.meta.url);

describe.each([
  ['the embedded store', false],
  ['two instances on one ZooKeeper (locks taken through one, the page served by the other)', true],
])('the live page on the HTTP port, in headless Chromium, on %s', (_backend, onZooKeeper) => {
  let lockServer: RunningServer;
  let server: RunningServer;
  let client: LockClient;
  let browser: Browser;

  beforeAll(async () => {
    const root = `/page-${randomUUID()}`;
    const backend = onZooKeeper ? ['--zookeeper', connectString, '--root', root] : [];
    const serve = (extra: string[]): Promise<RunningServer> =>
      startServer(loadConfig({}, ['--port', '0', ...backend, ...extra]), pino({ level: 'silent' }));
    server = await serve(['--http-port', '0']);
    lockServer = onZooKeeper ? await serve([]) : server;
    client = new LockClient(`127.0.0.1:${lockServer.port}`);
    // Debian's chromium (scripts/install-test-deps.sh installs it); as root it needs --no-sandbox.
    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
  }, scaled(60_000));

  afterAll(async () => {
    await browser?.close();
    client?.close();
    await server?.stop();
    if (lockServer !== server) await lockServer?.stop();
  });

  it('shows locks, holders and queues, and follows changes without a reload', async () => {
    const holder = await client.acquire('billing/invoice-42', {
      mode: 'write',
      owner: 'invoicer',
      value: 'worker-3:9000',
    });
    const queued = deferred();
    const waiting = client.acquire('billing/invoice-42', {
      mode: 'read',
      owner: 'reporter',
      onQueued: () => queued.resolve(),
    });
    await queued.promise;

    const page = await browser.newPage();
    await page.goto(`http://127.0.0.1:${server.httpPort}/`);
    const overview = page.locator('#locks tbody tr');
    await expect.poll(() => overview.allTextContents()).toEqual(['billing/invoice-4211write']);
    expect(await page.locator('#sessions').textContent()).toMatch(
      /^Sessions on this instance since it started: \d+ detached, \d+ resumed, \d+ expired, \d+ taken over from another instance$/,
    );

    await page.click('text=billing/invoice-42');
    const holders = page.locator('#holders tbody tr');
    const waiters = page.locator('#waiters tbody tr');
    await expect.poll(() => holders.count()).toBe(1);
    expect(await holders.first().textContent()).toContain('invoicer');
    expect(await holders.first().textContent()).toContain(holder.token.toString());
    expect(await holders.first().textContent()).toContain('worker-3:9000');
    expect(await waiters.first().textContent()).toContain('reporter');
    // A new value shows without a reload.
    await holder.setValue('worker-3:9001');
    await expect.poll(async () => holders.first().textContent()).toContain('worker-3:9001');
    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({
      path: new URL(`page-detail${onZooKeeper ? '-zookeeper' : ''}.png`, SCREENSHOTS).pathname,
      fullPage: true,
    });

    // The writer releases: the page, never reloaded, shows the reader holding and nobody waiting.
    await holder.release();
    const reader = await waiting;
    await expect.poll(async () => (await holders.allTextContents()).join()).toContain('reporter');
    expect(await waiters.count()).toBe(0);
    // Its records are read apart (none here), and shown once read.
    await expect
      .poll(() => page.locator('h2').allTextContents())
      .toEqual([
        'Holders (1)',
        'Waiting (0)',
        'Records (0)',
        'Recent activity on this instance (last 5 minutes)',
      ]);

    await page.click('text=lockstream');
    await reader.release();
    await expect.poll(() => page.locator('main').textContent()).toContain('No lock is held or waited for.');
    await page.screenshot({
      path: new URL(`page-empty${onZooKeeper ? '-zookeeper' : ''}.png`, SCREENSHOTS).pathname,
    });
    await page.close();
  });

  it('shows an election: its leader and term, and its candidates', async () => {
    const elections = new ElectionCaller(`127.0.0.1:${lockServer.port}`);
    const name = `elect/${randomUUID()}`;
    const leader = elections.campaign({ name, owner: 'primary-db', value: Buffer.from('10.0.0.7') });
    const term = await leader.elected();
    const next = elections.campaign({ name, owner: 'standby-db' });
    await next.next();
    const page = await browser.newPage();
    try {
      await page.goto(`http://127.0.0.1:${server.httpPort}/`);
      await expect
        .poll(() => page.locator('#locks tbody tr').allTextContents())
        .toContain(`${name}11election`);
      await page.click(`text=${name}`);
      await expect
        .poll(() => page.locator('.election').textContent())
        .toBe(`Election: term ${term} led by primary-db, 1 more candidates`);
      expect(await page.locator('#holders tbody tr').first().textContent()).toContain('leads');
      expect(await page.locator('#waiters tbody tr').first().textContent()).toContain('standby-db');
      leader.resign();
      const nextTerm = await next.elected();
      await expect
        .poll(() => page.locator('.election').textContent())
        .toBe(`Election: term ${nextTerm} led by standby-db, 0 more candidates`);
      next.resign();
      await Promise.all([leader.outcome, next.outcome]);
    } finally {
      await page.close();
      elections.close();
    }
  });

  it("shows a lock's guarded records, and a holder's write without a change of the queue, as JSON too", async () => {
    const name = `records/${randomUUID()}`;
    const lock = await client.acquire(name, { owner: 'exporter' });
    const records = client.records(name, lock.token);
    await records.put('checkpoint', 'batch 41');
    await records.put('offset', Buffer.from([0xff, 0x00]));
    const page = await browser.newPage();
    try {
      await page.goto(`http://127.0.0.1:${server.httpPort}/#/lock/${encodeURIComponent(name)}`);
      await expect
        .poll(() => page.locator('#records tbody tr').allTextContents())
        .toEqual(['checkpoint18 Bbatch 41', 'offset22 Bbase64:/wA=']);
      // Written while held: the queue does not change, the page reads the records again.
      await records.put('checkpoint', 'batch 42');
      await expect
        .poll(() => page.locator('#records tbody tr').first().textContent(), { timeout: scaled(10_000) })
        .toBe('checkpoint38 Bbatch 42');
      const json = (await (
        await fetch(`http://127.0.0.1:${server.httpPort}/api/locks/${encodeURIComponent(name)}/records`)
      ).json()) as unknown;
      expect(json).toEqual({
        name,
        records: [
          {
            key: 'checkpoint',
            revision: '3',
            bytes: 8,
            value: Buffer.from('batch 42').toString('base64'),
            valueText: 'batch 42',
          },
          { key: 'offset', revision: '2', bytes: 2, value: '/wA=', valueText: expect.any(String) },
        ],
      });
    } finally {
      await page.close();
      await lock.release();
    }
  });

  it("shows a semaphore's limit, the weight in use and each request's weight", async () => {
    const big = await client.acquire('render/farm', { limit: 4, weight: 3, owner: 'big-job' });
    const queued = deferred();
    const waiting = client.acquire('render/farm', {
      limit: 4,
      weight: 2,
      owner: 'next-job',
      onQueued: () => queued.resolve(),
    });
    await queued.promise;
    const page = await browser.newPage();
    await page.goto(`http://127.0.0.1:${server.httpPort}/`);
    await expect
      .poll(() => page.locator('#locks tbody tr').allTextContents())
      .toEqual(['render/farm11semaphore 3/4']);
    await page.click('text=render/farm');
    await expect.poll(() => page.locator('.capacity').textContent()).toBe('Semaphore: 3 of 4 in use');
    expect(await page.locator('#holders tbody tr').first().textContent()).toContain('semaphore×3');
    expect(await page.locator('#waiters tbody tr').first().textContent()).toContain('semaphore×2');
    const base = `http://127.0.0.1:${server.httpPort}`;
    expect(
      await (await fetch(`${base}/api/locks/${encodeURIComponent('render/farm')}`)).json(),
    ).toMatchObject({
      limit: 4,
      usedWeight: 3,
      holders: [{ owner: 'big-job', weight: 3 }],
      waiters: [{ owner: 'next-job', weight: 2 }],
    });
    await big.release();
    const next = await waiting;
    await expect.poll(() => page.locator('.capacity').textContent()).toBe('Semaphore: 2 of 4 in use');
    await next.release();
    await page.close();
  });

  it('counts how long each holder has held and each waiter waited, and shows the recent activity', async () => {
    const name = 'deploy/api';
    const first = await client.acquire(name, { mode: 'write', owner: 'deployer-1' });
    await first.release();
    const second = await client.acquire(name, { mode: 'write', owner: 'deployer-2' });
    const queued = deferred();
    const third = client.acquire(name, {
      mode: 'write',
      owner: 'deployer-3',
      onQueued: () => queued.resolve(),
    });
    await queued.promise;

    const page = await browser.newPage();
    await page.goto(`http://127.0.0.1:${server.httpPort}/#/lock/${encodeURIComponent(name)}`);
    const holder = page.locator('#holders tbody tr').first();
    const waiter = page.locator('#waiters tbody tr').first();
    await expect.poll(() => waiter.textContent()).toContain('deployer-3');
    // The instance that granted a hold knows when; another only that it was queued before.
    expect(await holder.textContent()).toMatch(onZooKeeper ? /held ≤ \d+s/ : /held \d+s/);
    // The waiter's time counts up without a new message from the server.
    const waited = async (): Promise<number> =>
      Number(/waiting (\d+)s/.exec((await waiter.textContent()) ?? '')?.[1]);
    const before = await waited();
    await expect.poll(waited, { timeout: scaled(10_000) }).toBeGreaterThan(before);

    const waits = page.locator('.waits');
    const activity = page.locator('#activity tbody tr');
    if (onZooKeeper) {
      // The page's instance granted nothing: it says so, and draws no hold.
      expect(await waits.textContent()).toBe('No grant here in the last 5 minutes.');
      expect(await page.locator('#timeline rect').count()).toBe(0);
    } else {
      expect(await waits.textContent()).toMatch(/^Waits: p50 [\d.]+ ms, p99 [\d.]+ ms over 2 grants$/);
      // Newest first: the second grant, the first release, the first grant.
      expect(await activity.allTextContents()).toEqual([
        expect.stringMatching(/^\d+s agogranted after [\d.]+ ms waitingdeployer-2/),
        expect.stringMatching(/^\d+s agoreleaseddeployer-1/),
        expect.stringMatching(/^\d+s agogranted after [\d.]+ ms waitingdeployer-1/),
      ]);
      // Two bars: the first hold, ended, and the second, still going.
      expect(await page.locator('#timeline rect.hold').count()).toBe(2);
      expect(await page.locator('#timeline rect.hold.open').count()).toBe(1);
    }
    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({
      path: new URL(`page-activity${onZooKeeper ? '-zookeeper' : ''}.png`, SCREENSHOTS).pathname,
      fullPage: true,
    });

    // The grant to the waiter shows without a reload, with how long it waited.
    await second.release();
    const last = await third;
    if (!onZooKeeper) {
      await expect
        .poll(() => activity.first().textContent())
        .toMatch(/granted after [\d.]+ m?s waitingdeployer-3/);
      expect(await waits.textContent()).toMatch(/over 3 grants$/);
    }
    await expect.poll(() => holder.textContent()).toContain('deployer-3');
    await last.release();
    await page.close();
  });

  it('serves the same as JSON, and refuses a malformed name with 400', async () => {
    const holder = await client.acquire('json/view', { owner: 'scripted', value: 'api-1:443' });
    const base = `http://127.0.0.1:${server.httpPort}`;
    expect(await (await fetch(`${base}/api/locks`)).json()).toEqual({
      locks: [{ name: 'json/view', holders: 1, waiters: 0, heldMode: 'mutex', limit: 0, usedWeight: 0 }],
      sessions: {
        detached: expect.any(Number),
        resumed: expect.any(Number),
        expired: expect.any(Number),
        'taken-over': expect.any(Number),
      },
    });
    const described = (await (
      await fetch(`${base}/api/locks/${encodeURIComponent('json/view')}`)
    ).json()) as {
      holders: Array<{ owner: string; token: string; grantedAt?: string }>;
    };
    expect(described.holders).toMatchObject([
      {
        owner: 'scripted',
        token: holder.token.toString(),
        value: Buffer.from('api-1:443').toString('base64'),
        valueText: 'api-1:443',
      },
    ]);
    const timestamp = expect.stringMatching(/^\d{4}-\d\d-\d\dT/);
    // When it was granted, and the activity, come from the instance that granted it.
    expect(described).toEqual(
      expect.objectContaining(
        onZooKeeper
          ? { now: timestamp, activity: { events: [] } }
          : {
              now: timestamp,
              activity: {
                events: [
                  {
                    at: timestamp,
                    kind: 'granted',
                    owner: 'scripted',
                    token: holder.token.toString(),
                    waitedMs: expect.any(Number),
                  },
                ],
                waits: { count: 1, p50Ms: expect.any(Number), p99Ms: expect.any(Number) },
              },
            },
      ),
    );
    expect(described.holders[0]?.grantedAt).toEqual(onZooKeeper ? undefined : timestamp);
    const bad = await fetch(`${base}/api/locks/%00`);
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: expect.stringMatching(/control character/) });
    await holder.release();
  });
});
