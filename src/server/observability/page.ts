/**
 * The read-only live page served on the HTTP port: every lock with holders or waiters, and a
 * detail view per lock (`#/lock/<name>`), kept current by server-sent events. One file, no build
 * step, no external resources; text goes into the DOM as text, never as HTML.
 */
export const PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>lockstream</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 2rem; color: #1d2733; }
  h1 { font-size: 1.3rem; margin: 0 0 1rem; }
  h2 { font-size: 1.05rem; margin: 1.5rem 0 0.5rem; }
  table { border-collapse: collapse; min-width: 40rem; }
  th, td { text-align: left; padding: 0.3rem 0.8rem; border-bottom: 1px solid #dde3ea; }
  th { font-weight: 600; background: #f3f6f9; }
  td.num { font-variant-numeric: tabular-nums; }
  .muted { color: #6b7785; }
  #status { float: right; font-size: 0.85rem; }
  #status.live::before { content: "\\25CF "; color: #2f9e44; }
  #status.down::before { content: "\\25CF "; color: #e03131; }
  .timeline { width: 100%; max-width: 60rem; height: auto; background: #f8fafc; border: 1px solid #dde3ea; }
  .timeline .hold { fill: #4c6ef5; }
  .timeline .hold.open { fill: #37b24d; }
  .timeline .hold.lost { fill: #e03131; }
  .timeline text { font-size: 10px; fill: #6b7785; }
</style>
</head>
<body>
<span id="status" class="down">connecting</span>
<h1><a href="#/">lockstream</a> <span id="title" class="muted"></span></h1>
<main id="view"></main>
<script>
"use strict";
const view = document.getElementById('view');
const title = document.getElementById('title');
const status = document.getElementById('status');
let source;

function element(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function table(headers, rows, id) {
  const t = element('table');
  if (id) t.id = id;
  const head = t.createTHead().insertRow();
  for (const h of headers) head.appendChild(element('th', h));
  const body = t.createTBody();
  for (const cells of rows) {
    const row = body.insertRow();
    for (const cell of cells) {
      const td = row.insertCell();
      if (cell instanceof Node) td.appendChild(cell);
      else td.textContent = String(cell);
    }
  }
  return t;
}

function follow(url, render) {
  if (source) source.close();
  source = new EventSource(url);
  source.onopen = () => { status.textContent = 'live'; status.className = 'live'; };
  source.onerror = () => { status.textContent = 'reconnecting'; status.className = 'down'; };
  source.onmessage = (event) => render(JSON.parse(event.data));
}

function showLocks() {
  title.textContent = '';
  current = undefined;
  follow('api/events', (page) => {
    view.replaceChildren();
    if (page.error) { view.appendChild(element('p', page.error, 'muted')); return; }
    const s = page.sessions;
    const sessions = element('p', 'Sessions on this instance since it started: ' + s.detached + ' detached, ' + s.resumed + ' resumed, ' + s.expired + ' expired, ' + s['taken-over'] + ' taken over from another instance', 'muted');
    sessions.id = 'sessions';
    view.appendChild(sessions);
    if (page.locks.length === 0) { view.appendChild(element('p', 'No lock is held or waited for.', 'muted')); return; }
    const rows = page.locks.map((lock) => {
      const link = element('a', lock.name);
      link.href = '#/lock/' + encodeURIComponent(lock.name);
      // A semaphore's mode says how much of it is in use; an election's holder is its leader.
      const mode = lock.limit > 0 ? 'semaphore ' + lock.usedWeight + '/' + lock.limit
        : lock.heldMode === 'candidate' ? 'election' : lock.heldMode || '-';
      return [link, lock.holders, lock.waiters, mode];
    });
    view.appendChild(table(['lock', 'holders', 'waiters', 'mode'], rows, 'locks'));
  });
}

// The server's clock minus this browser's, from the last state received: durations are
// counted on the server's clock, as its timestamps were taken on it.
let clockOffset = 0;
const serverNow = () => Date.now() + clockOffset;

// 4s, 3m 05s, 2h 03m: how long, at a glance.
function duration(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  const pad = (n) => String(n).padStart(2, '0');
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm ' + pad(s % 60) + 's';
  return Math.floor(s / 3600) + 'h ' + pad(Math.floor(s / 60) % 60) + 'm';
}

// A wait, to the precision it deserves: 0.4 ms, 12 ms, 1.4 s, 3m 05s.
function shortDuration(ms) {
  if (ms < 10) return ms.toFixed(1) + ' ms';
  if (ms < 1000) return Math.round(ms) + ' ms';
  if (ms < 60000) return (ms / 1000).toFixed(1) + ' s';
  return duration(ms);
}

// A cell whose text counts up from \`since\` (server time) every second; the timestamp on hover.
function ticking(prefix, since, suffix = '') {
  const node = element('span', '', 'ticking');
  node.dataset.prefix = prefix;
  node.dataset.suffix = suffix;
  node.dataset.since = String(Date.parse(since));
  node.title = since;
  return node;
}

function tick() {
  for (const node of document.querySelectorAll('.ticking')) {
    node.textContent = node.dataset.prefix + duration(serverNow() - Number(node.dataset.since)) + node.dataset.suffix;
  }
  if (current) drawTimeline(current);
}
setInterval(tick, 1000);

// How long a request has held or waited: from its grant when this instance granted it, else
// at most since it was queued (another instance's holder, or one granted before a restart).
function heldOrWaited(r, holding) {
  if (!holding) return r.requestedAt ? ticking('waiting ', r.requestedAt) : '-';
  if (r.grantedAt) return ticking('held ', r.grantedAt);
  return r.requestedAt ? ticking('held ≤ ', r.requestedAt) : '-';
}

// Holds seen here in the window, each from its grant to its release or loss (or now, while held).
function holds(state) {
  const open = new Set(state.holders.map((r) => r.token));
  const ends = new Map();
  for (const e of state.activity.events) if (e.kind !== 'granted') ends.set(e.token, e);
  return state.activity.events.filter((e) => e.kind === 'granted').map((e) => {
    const end = ends.get(e.token);
    return {
      owner: e.owner, token: e.token, from: Date.parse(e.at),
      to: end ? Date.parse(end.at) : open.has(e.token) ? undefined : Date.parse(e.at),
      lost: end !== undefined && end.kind === 'lost',
    };
  });
}

const WINDOW_MS = 5 * 60 * 1000;
const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attributes, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

// One bar per hold on the last five minutes, stacked where holds overlap (readers, semaphores).
function drawTimeline(state) {
  const box = document.getElementById('timeline');
  if (!box) return;
  const width = 600, lane = 10, now = serverNow(), start = now - WINDOW_MS;
  const x = (t) => ((Math.max(t, start) - start) / WINDOW_MS) * width;
  const laneEnds = [];
  const bars = holds(state).map((hold) => {
    const to = hold.to === undefined ? now : hold.to;
    let i = laneEnds.findIndex((end) => end <= hold.from);
    if (i < 0) { i = laneEnds.length; laneEnds.push(to); } else laneEnds[i] = to;
    return { hold, to, lane: i };
  });
  const height = Math.max(1, laneEnds.length) * (lane + 2) + 16;
  const chart = svg('svg', { viewBox: '0 0 ' + width + ' ' + height, class: 'timeline', role: 'img' });
  chart.appendChild(svg('title', {}, 'Holds granted by this instance in the last 5 minutes'));
  for (const { hold, to, lane: i } of bars) {
    const left = x(hold.from);
    const rect = svg('rect', {
      x: left, y: 2 + i * (lane + 2), height: lane, width: Math.max(2, x(to) - left),
      class: 'hold' + (hold.to === undefined ? ' open' : '') + (hold.lost ? ' lost' : ''),
    });
    rect.appendChild(svg('title', {}, (hold.owner || 'no owner') + ', token ' + hold.token));
    chart.appendChild(rect);
  }
  chart.appendChild(svg('text', { x: 2, y: height - 3 }, '5 min ago'));
  chart.appendChild(svg('text', { x: width - 2, y: height - 3, 'text-anchor': 'end' }, 'now'));
  box.replaceChildren(chart);
}

function eventText(e) {
  if (e.kind === 'granted') return 'granted after ' + shortDuration(e.waitedMs) + ' waiting';
  return e.kind;
}

// A lock's guarded records, read again every 2 s while they are shown: a holder's write
// changes no queue, so the lock's events do not tell it.
let recordsTimer;
function showRecords(name, box) {
  clearTimeout(recordsTimer);
  fetch('api/locks/' + encodeURIComponent(name) + '/records').then((r) => r.json()).then((body) => {
    if (!box.isConnected) return;
    const rows = (body.records || []).map((r) => [r.key, r.revision, r.bytes + ' B', r.valueText || '-']);
    box.replaceChildren(element('h2', 'Records (' + rows.length + ')'), rows.length > 0
      ? table(['key', 'revision', 'size', 'value'], rows, 'records')
      : element('p', 'No guarded records.', 'muted'));
    recordsTimer = setTimeout(() => showRecords(name, box), 2000);
  }, () => {});
}

let current;
function showLock(name) {
  title.textContent = '/ ' + name;
  follow('api/locks/' + encodeURIComponent(name) + '/events', (state) => {
    view.replaceChildren();
    current = undefined;
    if (state.error) { view.appendChild(element('p', state.error, 'muted')); return; }
    clockOffset = Date.parse(state.now) - Date.now();
    current = state;
    if (state.limit > 0) {
      view.appendChild(element('p', 'Semaphore: ' + state.usedWeight + ' of ' + state.limit + ' in use', 'capacity'));
    }
    // An election: its holder leads, its token is the term, its waiters are the candidates.
    const election = [...state.holders, ...state.waiters].some((r) => r.mode === 'candidate');
    if (election) {
      const leader = state.holders[0];
      view.appendChild(element('p', leader
        ? 'Election: term ' + leader.token + ' led by ' + (leader.owner || 'a candidate without owner') + ', ' + state.waiters.length + ' more candidates'
        : 'Election: nobody leads', 'election'));
    }
    const rows = (requests, label, holding) => requests.map((r, i) => [
      label(i), r.weight > 0 ? r.mode + '×' + r.weight : r.mode, r.owner || '-', r.token, r.valueText || '-',
      heldOrWaited(r, holding), r.instance || '-', r.peer || '-',
    ]);
    const headers = ['', 'mode', 'owner', 'token', 'value', 'for', 'instance', 'peer'];
    view.appendChild(element('h2', (election ? 'Leader (' : 'Holders (') + state.holders.length + ')'));
    view.appendChild(table(headers, rows(state.holders, () => (election ? 'leads' : 'holds'), true), 'holders'));
    view.appendChild(element('h2', (election ? 'Candidates (' : 'Waiting (') + state.waiters.length + ')'));
    view.appendChild(table(headers, rows(state.waiters, (i) => '#' + (i + 1), false), 'waiters'));
    const records = element('div');
    view.appendChild(records);
    showRecords(name, records);

    view.appendChild(element('h2', 'Recent activity on this instance (last 5 minutes)'));
    const waits = state.activity.waits;
    view.appendChild(element('p', waits
      ? 'Waits: p50 ' + shortDuration(waits.p50Ms) + ', p99 ' + shortDuration(waits.p99Ms) +
        ' over ' + waits.count + (waits.count === 1 ? ' grant' : ' grants')
      : 'No grant here in the last 5 minutes.', 'waits'));
    const chart = element('div');
    chart.id = 'timeline';
    view.appendChild(chart);
    const recent = state.activity.events.slice(-10).reverse().map((e) => [
      ticking('', e.at, ' ago'), eventText(e), e.owner || '-', e.token,
    ]);
    if (recent.length > 0) view.appendChild(table(['ago', 'what', 'owner', 'token'], recent, 'activity'));
    tick();
  });
}

function route() {
  const match = /^#\\/lock\\/(.+)$/.exec(location.hash);
  if (match) showLock(decodeURIComponent(match[1]));
  else showLocks();
}
window.addEventListener('hashchange', route);
route();
</script>
</body>
</html>
`;
