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
  follow('api/events', (page) => {
    view.replaceChildren();
    if (page.error) { view.appendChild(element('p', page.error, 'muted')); return; }
    if (page.locks.length === 0) { view.appendChild(element('p', 'No lock is held or waited for.', 'muted')); return; }
    const rows = page.locks.map((lock) => {
      const link = element('a', lock.name);
      link.href = '#/lock/' + encodeURIComponent(lock.name);
      // A semaphore's mode says how much of it is in use.
      return [link, lock.holders, lock.waiters, lock.limit > 0 ? 'semaphore ' + lock.usedWeight + '/' + lock.limit : lock.heldMode || '-'];
    });
    view.appendChild(table(['lock', 'holders', 'waiters', 'mode'], rows, 'locks'));
  });
}

function showLock(name) {
  title.textContent = '/ ' + name;
  follow('api/locks/' + encodeURIComponent(name) + '/events', (state) => {
    view.replaceChildren();
    if (state.error) { view.appendChild(element('p', state.error, 'muted')); return; }
    if (state.limit > 0) {
      view.appendChild(element('p', 'Semaphore: ' + state.usedWeight + ' of ' + state.limit + ' in use', 'capacity'));
    }
    const rows = (requests, label) => requests.map((r, i) => [
      label(i), r.weight > 0 ? r.mode + '×' + r.weight : r.mode, r.owner || '-', r.token, r.valueText || '-', r.requestedAt || '-', r.instance || '-',
      r.peer || '-',
    ]);
    const headers = ['', 'mode', 'owner', 'token', 'value', 'requested', 'instance', 'peer'];
    view.appendChild(element('h2', 'Holders (' + state.holders.length + ')'));
    view.appendChild(table(headers, rows(state.holders, () => 'holds'), 'holders'));
    view.appendChild(element('h2', 'Waiting (' + state.waiters.length + ')'));
    view.appendChild(table(headers, rows(state.waiters, (i) => '#' + (i + 1)), 'waiters'));
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
