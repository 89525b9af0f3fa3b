// hpcq dashboard: the runs list, a run's tree by stage with its node panel
// and charts, live through server-sent events. Every text reaches the page
// through textContent or an attribute: nothing is parsed as HTML.
'use strict';

const STATUS_COLORS = {
  ok: '#1f9d55', failed: '#d64545', running: '#2f6fde', queued: '#7c8aa5', declined: '#d9822b', preparing: '#a0a8b8',
  canceled: '#d9822b', cached: '#1a9aa0', dead_lettered: '#8e44ad', not_run: '#a0a8b8', no_answer: '#a0a8b8',
};
const SERIES = ['#2f6fde', '#d64545', '#1f9d55', '#d9822b', '#8e44ad', '#1a9aa0', '#e0a800', '#5f6b7a'];
// stageName is how the run's stage s is called: the names come with the
// run (the API's stages, as run.yaml writes them); 0 is hand-written tasks.
function stageName(s) {
  if (!s) return 'tasks';
  return ((view.run && view.run.stages) || [])[s - 1]?.replaceAll('_', ' ') || '';
}
const SVGNS = 'http://www.w3.org/2000/svg';

// el builds an element: attributes (on* are listeners), then children
// (strings become text nodes).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  append(e, children);
  return e;
}
function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) e.setAttribute(k, String(v));
  append(e, children);
  return e;
}
function append(e, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

async function api(path) {
  const r = await fetch(path, { headers: { Accept: 'application/json' }, credentials: 'same-origin' });
  const body = await r.json().catch(() => ({ error: r.status + ' ' + r.statusText }));
  if (!r.ok) throw new Error(body.error || (r.status + ' ' + r.statusText));
  return body;
}

function fmtNum(v) {
  if (v === undefined || v === null || v === '') return '–';
  const n = Number(v);
  if (!isFinite(n)) return String(v);
  if (n !== 0 && (Math.abs(n) >= 1e6 || Math.abs(n) < 1e-3)) return n.toExponential(3);
  return String(Math.round(n * 10000) / 10000);
}
// cmpID orders node ids as the server lists them (search.CompareIDs):
// n9999 before n10000, those before any other ids.
function cmpID(a, b) {
  const str = (x, y) => (x < y ? -1 : x > y ? 1 : 0);
  const da = /^n[0-9]+$/.test(a), db = /^n[0-9]+$/.test(b);
  if (da && db) {
    const x = a.slice(1).replace(/^0+/, ''), y = b.slice(1).replace(/^0+/, '');
    return x.length - y.length || str(x, y) || str(a, b);
  }
  if (da !== db) return da ? -1 : 1;
  return str(a, b);
}
function fmtCost(v) { return '$' + (Number(v) || 0).toFixed(4); }
function fmtTime(t) { return t ? new Date(t).toLocaleString() : '–'; }
// fmtClock is the time of day of a stored timestamp, as stored (the day is in its title).
function fmtClock(t) { const s = String(t || ''); const m = s.match(/\d\d:\d\d:\d\d/); return m ? m[0] : s; }
function fmtDur(ms) {
  if (ms === undefined || ms === null) return '–';
  if (ms < 1000) return ms + ' ms';
  const s = ms / 1000;
  if (s < 120) return s.toFixed(1) + ' s';
  return Math.floor(s / 60) + ' min ' + Math.round(s % 60) + ' s';
}
function fmtBytes(b) {
  if (b < 1024) return b + ' B';
  if (b < 1 << 20) return (b / 1024).toFixed(1) + ' KiB';
  return (b / (1 << 20)).toFixed(1) + ' MiB';
}
function badge(status) { return el('span', { class: 'badge st-' + status }, status.replace('_', ' ')); }
function fileURL(run, path) {
  return '/api/runs/' + encodeURIComponent(run) + '/files/' + path.split('/').map(encodeURIComponent).join('/');
}

// ---- charts: plain SVG ----

// niceTicks are about n ticks from lo to hi; one value (lo = hi) gets an
// axis of span around it (default: its own magnitude; a time: a minute).
function niceTicks(lo, hi, n, span) {
  if (!(hi > lo)) { const d = span || Math.abs(lo) || 1; lo = lo >= 0 && !span ? Math.max(0, lo - d / 2) : lo - d / 2; hi += d / 2; }
  const raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map(m => m * mag).find(s => s >= raw);
  // The axis runs from a tick to a tick, so that its ends are labelled.
  const out = [];
  for (let v = Math.floor(lo / step) * step; v < hi + step * (1 - 1e-9); v += step) out.push(Math.round(v / step) * step);
  return { lo: out[0], hi: out[out.length - 1], ticks: out };
}

// A chart draws at most CHART_POINTS points a series (SVG of 10,000 nodes'
// points took a third of a second to build, at every redraw of a live
// run): past that, each run of points in x order keeps its lowest and its
// highest, so that no peak or trough is lost.
const CHART_POINTS = 1000;
function thin(points) {
  if (points.length <= CHART_POINTS) return points;
  const size = Math.ceil(points.length / (CHART_POINTS / 2)), out = [];
  for (let i = 0; i < points.length; i += size) {
    let lo = points[i], hi = points[i];
    for (const p of points.slice(i, i + size)) {
      if (p[1] < lo[1]) lo = p;
      if (p[1] > hi[1]) hi = p;
    }
    if (lo === hi) out.push(lo);
    else if (lo[0] <= hi[0]) out.push(lo, hi);
    else out.push(hi, lo);
  }
  return out;
}

// chart draws series of [x, y, label, colour, [low, high]] points (an
// interval, when given, is drawn as an error bar: a node's 95% interval
// from repeated measurements). opts: title, x ('time'|'index'), xLabel,
// yLabel, points (markers only), step (a staircase).
function chart(opts, series) {
  const W = 460, H = 240, L = 52, R = 28, T = 12, B = 34;
  const box = el('div', { class: 'card chart' }, el('h2', {}, opts.title));
  const all = series.reduce((n, s) => n + s.points.length, 0);
  series = series.map(s => ({ ...s, points: thin(s.points) }));
  const pts = series.flatMap(s => s.points);
  if (pts.length === 0) {
    box.append(el('p', { class: 'muted' }, opts.empty || 'No data yet.'));
    return box;
  }
  const xs = niceTicks(Math.min(...pts.map(p => p[0])), Math.max(...pts.map(p => p[0])), 5, opts.x === 'time' ? 60000 : 0);
  const ys = niceTicks(Math.min(...pts.map(p => p[4] ? Math.min(p[1], p[4][0]) : p[1])), Math.max(...pts.map(p => p[4] ? Math.max(p[1], p[4][1]) : p[1])), 4);
  const sx = x => L + (x - xs.lo) / (xs.hi - xs.lo) * (W - L - R);
  const sy = y => H - B - (y - ys.lo) / (ys.hi - ys.lo) * (H - T - B);
  const g = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': opts.title });
  for (const y of ys.ticks) {
    g.append(svg('line', { class: 'grid', x1: L, x2: W - R, y1: sy(y), y2: sy(y) }));
    g.append(svg('text', { x: L - 6, y: sy(y) + 3, 'text-anchor': 'end' }, fmtNum(y)));
  }
  xs.ticks.forEach((x, i) => {
    const label = opts.x === 'time' ? new Date(x).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false }) : fmtNum(x);
    // The last label ends at the axis' end, within the drawing.
    g.append(svg('text', { x: sx(x), y: H - B + 14, 'text-anchor': i === xs.ticks.length - 1 ? 'end' : 'middle' }, label));
  });
  g.append(svg('line', { class: 'axis', x1: L, x2: W - R, y1: H - B, y2: H - B }));
  g.append(svg('line', { class: 'axis', x1: L, x2: L, y1: T, y2: H - B }));
  if (opts.xLabel) g.append(svg('text', { x: (L + W - R) / 2, y: H - 4, 'text-anchor': 'middle' }, opts.xLabel));
  if (opts.yLabel) g.append(svg('text', { x: 12, y: (T + H - B) / 2, transform: `rotate(-90 12 ${(T + H - B) / 2})`, 'text-anchor': 'middle' }, opts.yLabel));
  series.forEach((s, i) => {
    const color = s.color || SERIES[i % SERIES.length];
    if (!opts.points && s.points.length > 0) {
      let d = '';
      s.points.forEach((p, j) => {
        if (j === 0) d += `M${sx(p[0])},${sy(p[1])}`;
        else if (opts.step) d += `H${sx(p[0])}V${sy(p[1])}`;
        else d += `L${sx(p[0])},${sy(p[1])}`;
      });
      g.append(svg('path', { class: 'series', d, stroke: color, 'data-series': s.name }));
    }
    for (const p of s.points) {
      const iv = p[4];
      if (iv) {
        const x = sx(p[0]), lo = sy(iv[0]), hi = sy(iv[1]);
        g.append(svg('path', { class: 'errbar', d: `M${x},${lo}V${hi}M${x - 3},${lo}H${x + 3}M${x - 3},${hi}H${x + 3}`, stroke: p[3] || color }));
      }
      const c = svg('circle', { cx: sx(p[0]), cy: sy(p[1]), r: opts.points ? 4 : 2.5, fill: p[3] || color });
      c.append(svg('title', {}, (p[2] ? p[2] + ': ' : '') + fmtNum(p[1]) + (iv ? ` (95% interval ${fmtNum(iv[0])} to ${fmtNum(iv[1])})` : '')));
      g.append(c);
    }
  });
  box.append(g);
  if (pts.length < all) box.append(el('p', { class: 'hint' }, `${pts.length} of ${all} points drawn: of each run of points, its lowest and highest.`));
  if (series.length > 1 || opts.legend) {
    box.append(el('div', { class: 'legend' }, (opts.legend || series.map((s, i) => [s.name, s.color || SERIES[i % SERIES.length]]))
      .map(([name, color]) => el('span', {}, el('i', { style: null, 'data-color': color }), name))));
    box.querySelectorAll('.legend i').forEach(i => { i.style.background = i.dataset.color; });
  }
  return box;
}

// ---- routing ----

let stream = null; // the EventSource of the run shown
let clusterTimer = null;

function route() {
  if (stream) { stream.close(); stream = null; }
  if (clusterTimer) { clearInterval(clusterTimer); clusterTimer = null; }
  document.getElementById('live').hidden = true;
  const m = location.hash.match(/^#\/run\/([^/]+)(?:\/node\/([^/]+))?$/);
  if (m) showRun(decodeURIComponent(m[1]), m[2] && decodeURIComponent(m[2]));
  else showRuns();
}
window.addEventListener('hashchange', () => {
  const m = location.hash.match(/^#\/run\/([^/]+)(?:\/node\/([^/]+))?$/);
  if (m && view.run && view.run.id === decodeURIComponent(m[1])) { selectNode(m[2] && decodeURIComponent(m[2])); return; }
  route();
});
document.addEventListener('DOMContentLoaded', route);

function setMain(...children) {
  const main = document.getElementById('main');
  main.replaceChildren(...children);
}
function crumbs(...parts) { document.getElementById('crumbs').replaceChildren(...parts.flatMap((p, i) => i ? [' / ', p] : [p])); }
function failure(err) { return el('div', { class: 'card error' }, String(err.message || err)); }

// ---- runs list ----

async function showRuns() {
  crumbs(el('a', { href: '#/' }, 'runs'));
  let runs, archiveError;
  try { ({ runs, archive_error: archiveError } = await api('/api/runs')); } catch (err) { setMain(failure(err)); return; }
  const compare = el('div', { id: 'compare' });
  const chosen = new Set(runs.slice(0, Math.min(2, runs.length)).filter(r => r.nodes > 0).map(r => r.id));
  const rows = runs.map(r => el('tr', { 'data-run': r.id },
    el('td', { class: 'sel' }, el('input', { type: 'checkbox', 'aria-label': 'compare ' + r.id, checked: chosen.has(r.id), onchange: e => {
      if (e.target.checked) chosen.add(r.id); else chosen.delete(r.id);
      drawCompare(runs, chosen, compare);
    } })),
    el('td', {}, el('a', { href: '#/run/' + encodeURIComponent(r.id) }, r.id), el('div', { class: 'muted' }, r.title || '')),
    el('td', {}, badge(r.status), r.error ? el('div', { class: 'error' }, r.error) : null),
    el('td', {}, r.mode, ' ', r.command, r.source === 'clickhouse' ? el('div', { class: 'muted', title: 'known from ClickHouse only: no run directory here' }, 'ClickHouse') : null),
    el('td', { class: 'num' }, `${r.done}/${r.nodes}`, r.buggy ? el('div', { class: 'muted' }, r.buggy + ' buggy') : null),
    el('td', { class: 'num' }, r.best_value !== undefined ? `${fmtNum(r.best_value)} ${r.unit || ''}` : '–', r.best ? el('div', { class: 'muted' }, r.best) : null),
    el('td', { class: 'num' }, fmtCost(r.cost_usd), el('div', { class: 'muted' }, r.llm_calls + ' calls')),
    el('td', {}, fmtTime(r.started))));
  setMain(
    el('div', { class: 'card' }, el('h1', {}, 'Runs'),
      runs.length === 0 ? el('p', { class: 'muted' }, 'No run directory here yet.') :
        el('table', { class: 'runs' },
          el('thead', {}, el('tr', {}, el('th', {}, ''), el('th', {}, 'run'), el('th', {}, 'status'), el('th', {}, 'mode'),
            el('th', { class: 'num' }, 'nodes'), el('th', { class: 'num' }, 'best'), el('th', { class: 'num' }, 'cost'), el('th', {}, 'started'))),
          el('tbody', {}, rows)),
      el('p', { class: 'hint' }, 'Tick runs to compare their metric over their nodes.'),
      archiveError ? el('p', { class: 'error' }, 'Runs in ClickHouse could not be listed: ' + archiveError) : null),
    compare);
  drawCompare(runs, chosen, compare);
}

async function drawCompare(runs, chosen, box) {
  const ids = runs.filter(r => chosen.has(r.id)).map(r => r.id);
  if (ids.length === 0) { box.replaceChildren(); return; }
  try {
    const lists = await Promise.all(ids.map(id => api('/api/runs/' + encodeURIComponent(id) + '/nodes')));
    const metric = [...new Set(runs.filter(r => chosen.has(r.id)).map(r => r.metric).filter(Boolean))].join(', ') || 'metric';
    const series = ids.map((id, i) => ({
      name: id,
      points: lists[i].nodes.filter(n => n.value !== undefined)
        .sort((a, b) => (a.finished || '').localeCompare(b.finished || '') || cmpID(a.node, b.node))
        .map((n, j) => [j + 1, n.value, n.node, undefined, interval(n)]),
    }));
    box.replaceChildren(chart({ title: 'Compare: ' + metric + ' per node, in the order they finished', x: 'index', xLabel: 'node (finish order)', yLabel: metric, legend: series.map((s, i) => [s.name, SERIES[i % SERIES.length]]) }, series));
  } catch (err) { box.replaceChildren(failure(err)); }
}

// ---- a run ----

const view = { run: null, nodes: new Map(), selected: null, detail: null, tab: 'overview', redraw: 0, drawMs: 0, best: '', open: new Set() };

async function showRun(id, node) {
  Object.assign(view, { run: null, nodes: new Map(), selected: null, detail: null, best: '', open: new Set() });
  crumbs(el('a', { href: '#/' }, 'runs'), el('a', { href: '#/run/' + encodeURIComponent(id) }, id));
  let run, nodes;
  try {
    [run, nodes] = await Promise.all([api('/api/runs/' + encodeURIComponent(id)), api('/api/runs/' + encodeURIComponent(id) + '/nodes')]);
  } catch (err) { setMain(failure(err)); return; }
  view.run = run;
  for (const n of nodes.nodes) view.nodes.set(n.node, n);
  setMain(
    el('div', { id: 'summary' }),
    el('div', { class: 'layout' },
      el('div', {}, el('div', { class: 'card' }, el('h2', {}, 'Tree by stage'), el('div', { id: 'tree', class: 'stages' }), legend()),
        el('div', { id: 'charts', class: 'charts' }), el('div', { id: 'cluster' })),
      el('div', { id: 'panel', class: 'card panel' }, el('p', { class: 'muted' }, 'Click a node to see its plan, code, logs, metrics, plots, memory and LLM calls.'))));
  drawSummary(); drawTree(); drawCharts();
  if (node) selectNode(node);
  watch(id);
  loadCluster(id);
  clusterTimer = setInterval(() => { if (view.run && view.run.status === 'running') loadCluster(id); }, 5000);
}

function legend() {
  return el('div', { class: 'legend' }, Object.entries(STATUS_COLORS).filter(([k]) => !['no_answer'].includes(k))
    .map(([k, c]) => { const i = el('i'); i.style.background = c; return el('span', {}, i, k.replace('_', ' ')); }),
  el('span', {}, el('span', { class: 'star' }, '★'), ' best; gold outline: its path'));
}

function drawSummary() {
  const r = view.run;
  const stats = [
    ['status', badge(r.status)],
    ['nodes', `${r.done}/${r.nodes}`],
    ['buggy', r.buggy],
    ['best', r.best_value !== undefined ? `${fmtNum(r.best_value)} ${r.unit || ''}` : '–'],
    ['best node', r.best || '–'],
    ['LLM', `${r.llm_calls} calls · ${fmtCost(r.cost_usd)}` + (r.tokens_reasoning ? ` · ${r.tokens_reasoning} reasoning tokens` : '')],
    ['mode', `${r.mode} ${r.command}`],
    ['started', fmtTime(r.started) + (r.resumes ? ` (${r.resumes} resumes)` : '')],
  ];
  document.getElementById('summary').replaceChildren(el('div', { class: 'card' },
    el('h1', {}, r.title || r.id), el('div', { class: 'muted' }, r.id + (r.metric ? ` · ${r.direction || 'maximize'} ${r.metric}` : '')),
    el('div', { class: 'stats' }, stats.map(([k, v]) => el('div', {}, el('b', {}, v), el('span', {}, k)))),
    r.llm_caveats ? el('p', { class: 'muted' }, 'LLM calls: ' + r.llm_caveats + '.') : null,
    r.stopped_by ? el('p', {}, 'Stopped early: ' + r.stopped_by) : null,
    r.canceled ? el('p', {}, 'Canceled: ' + r.canceled) : null,
    r.error ? el('p', { class: 'error' }, r.error) : null), ...[paperCard(r)].filter(Boolean));
}

// paperCard is the run's paper: the PDF, its claims checked against the
// results, its rendered pages.
function paperCard(r) {
  const p = r.paper;
  if (!p) return null;
  const link = (path, text) => el('a', { href: fileURL(r.id, path), target: '_blank', rel: 'noopener' }, text);
  const facts = `${p.numbers} numbers written out, ${p.verified} verified, ${(p.unverified || []).length} unverified; ` +
    `${p.facts_stated} facts stated by id; ${p.citations} citations` + ((p.citations_removed || []).length ? `, ${p.citations_removed.length} removed (${p.citations_removed.join(', ')})` : '') +
    `; ${p.rounds} rounds`;
  return el('div', { class: 'card paper' }, el('h2', {}, 'Paper'),
    el('p', {}, p.pdf ? link(p.pdf, 'paper.pdf') : el('span', { class: 'muted' }, 'not compiled'), ' · ', link(p.tex, 'paper.tex'), ' · ', link(p.claims, 'claims.json'), ' · ', facts),
    (p.unverified || []).length ? el('div', { class: 'error' }, el('b', {}, 'Numbers no result states: '),
      el('ul', {}, p.unverified.map(c => el('li', {}, el('code', {}, c.text), ' in “', c.context, '”')))) : null,
    p.stopped ? el('p', { class: 'muted' }, 'The rounds stopped early: ' + p.stopped) : null,
    (p.pages || []).length ? el('div', { class: 'pages' }, p.pages.map((pg, i) => link(pg, el('img', { src: fileURL(r.id, pg), alt: `page ${i + 1}`, loading: 'lazy' })))) : null);
}

// pathTo is the set of id and its ancestors.
function pathTo(id) {
  const path = new Set();
  for (let guard = 0; id && guard <= view.nodes.size; guard++) {
    path.add(id);
    const n = view.nodes.get(id);
    id = n && n.parent;
  }
  return path;
}
function bestPath() { return pathTo(view.run.best); }

// A big tree is drawn in part, so that a page of 10,000 nodes stays quick:
// a list of more than LIST_SHOWN siblings shows those on the best path or
// the selected node's, those not finished and the best by the metric, then
// a button for the others; a node off those paths with more than
// SUBTREE_CLOSED nodes below it shows a button for them. What the user
// opens stays open (view.open) as the run goes.
const LIST_SHOWN = 24, SUBTREE_CLOSED = 50;
const ACTIVE = ['preparing', 'queued', 'declined', 'running'];

function drawTree() {
  const tree = document.getElementById('tree');
  if (!tree) return;
  const path = bestPath(), sel = pathTo(view.selected);
  const keep = id => path.has(id) || sel.has(id);
  const sign = (view.run.direction || 'maximize') === 'minimize' ? -1 : 1;
  const byStage = new Map();
  for (const n of view.nodes.values()) {
    const s = n.stage || 0;
    if (!byStage.has(s)) byStage.set(s, []);
    byStage.get(s).push(n);
  }
  const columns = [...byStage.keys()].sort((a, b) => a - b).map(stage => {
    const nodes = byStage.get(stage);
    const inStage = new Set(nodes.map(n => n.node));
    const children = new Map();
    for (const n of nodes) {
      const p = inStage.has(n.parent) ? n.parent : '';
      if (!children.has(p)) children.set(p, []);
      children.get(p).push(n);
    }
    // The nodes below each node in this stage, without recursion (a chain
    // of debug and improve nodes may be thousands long).
    const order = [];
    for (let q = [''], i = 0; i < q.length; i++) for (const c of children.get(q[i]) || []) { order.push(c); q.push(c.node); }
    const sizes = new Map();
    for (let i = order.length - 1; i >= 0; i--) {
      const n = order[i], p = inStage.has(n.parent) ? n.parent : '';
      sizes.set(p, (sizes.get(p) || 0) + 1 + (sizes.get(n.node) || 0));
    }
    const below = id => sizes.get(id) || 0;
    const descendants = id => {
      const out = [];
      for (const stack = [id]; stack.length;) for (const c of children.get(stack.pop()) || []) { out.push(c); stack.push(c.node); }
      return out;
    };
    // The stage's base: the node most of its roots grew from.
    const outside = new Map();
    for (const n of nodes) if (n.parent && !inStage.has(n.parent)) outside.set(n.parent, (outside.get(n.parent) || 0) + 1);
    const base = [...outside.entries()].sort((a, b) => b[1] - a[1])[0];
    const item = n => el('li', {}, nodeButton(n, path, !inStage.has(n.parent) && n.parent !== (base && base[0]) && n.parent), sub(n));
    const sub = n => {
      if (!children.has(n.node)) return null;
      const size = below(n.node), key = 'sub:' + n.node;
      if (size <= SUBTREE_CLOSED || keep(n.node) || view.open.has(key)) return list(n.node);
      return moreButton(key, `▸ ${size} nodes below` + bestOf(descendants(n.node)));
    };
    const list = parent => {
      const kids = children.get(parent) || [], key = 'list:' + stage + ':' + parent;
      if (kids.length <= LIST_SHOWN || view.open.has(key)) return el('ul', {}, kids.map(item));
      const shown = new Set(kids.filter(n => keep(n.node) || ACTIVE.includes(n.status)).map(n => n.node));
      const ranked = kids.filter(n => n.value !== undefined && !shown.has(n.node)).sort((a, b) => sign * (b.value - a.value));
      for (const n of ranked.slice(0, Math.max(0, LIST_SHOWN - shown.size))) shown.add(n.node);
      const hidden = kids.filter(n => !shown.has(n.node));
      return el('ul', {}, kids.filter(n => shown.has(n.node)).map(item),
        hidden.length ? el('li', {}, moreButton(key, `+ ${hidden.length} more` + bestOf(hidden))) : null);
    };
    const done = nodes.filter(n => !ACTIVE.includes(n.status)).length;
    return el('section', { class: 'stage', 'data-stage': stage }, el('h2', {}, `${stage ? 'Stage ' + stage : 'Tasks'} `,
      el('small', {}, `${stageName(stage)} · ${done}/${nodes.length}` + (base ? ` · from ${base[0]}` : ''))), list(''));
  });
  tree.replaceChildren(...(columns.length ? columns : [el('p', { class: 'muted' }, 'No node yet.')]));

  function bestOf(ns) {
    let best;
    for (const n of ns) if (n.value !== undefined && (best === undefined || sign * (n.value - best.value) > 0)) best = n;
    const active = ns.filter(n => ACTIVE.includes(n.status)).length;
    return (best ? ` · best ${best.node} = ${fmtNum(best.value)}` : '') + (active ? ` · ${active} not finished` : '');
  }
}

// moreButton opens what key names and draws the tree again.
function moreButton(key, label) {
  return el('button', { class: 'more', 'data-open': key, onclick: () => { view.open.add(key); drawTree(); } }, label);
}

function nodeButton(n, path, from) {
  const cls = ['node', 'st-' + n.status];
  if (path.has(n.node)) cls.push('best-path');
  if (view.selected === n.node) cls.push('sel');
  const gate = n.held_out ? n.held_out.split(/[ :]/)[0] : '';
  return el('button', { class: cls.join(' '), 'data-node': n.node, 'data-status': n.status,
    title: `${n.node} ${n.kind || ''}: ${n.status}${n.reason ? ' — ' + n.reason : ''}${n.held_out ? ' — held-out: ' + n.held_out : ''}`,
    onclick: () => { location.hash = '#/run/' + encodeURIComponent(view.run.id) + '/node/' + encodeURIComponent(n.node); } },
  view.run.best === n.node ? el('span', { class: 'star', 'aria-label': 'best' }, '★') : null,
  el('span', { class: 'id' }, n.node), el('span', { class: 'kind' }, n.kind || ''),
  from ? el('span', { class: 'from' }, '↳ ' + from) : null,
  el('span', { class: 'metric' }, n.value !== undefined ? fmtNum(n.value) : (n.metric || n.status.replace('_', ' '))),
  gate ? el('span', { class: 'gate ' + gate, 'data-gate': gate, title: 'held-out gate: ' + n.held_out }, gate === 'held' ? 'held' : gate) : null);
}

// interval is a node's 95% interval from repeated measurements, or
// undefined when it was measured once.
function interval(n) {
  return n.low !== undefined && n.high !== undefined ? [n.low, n.high] : undefined;
}

function drawCharts() {
  const box = document.getElementById('charts');
  if (!box) return;
  const r = view.run, metric = r.metric || 'metric';
  const maximize = (r.direction || 'maximize') !== 'minimize';
  const done = [...view.nodes.values()].filter(n => n.value !== undefined && n.finished).sort((a, b) => a.finished.localeCompare(b.finished));
  const best = [];
  let cur;
  for (const n of done) {
    if (cur === undefined || (maximize ? n.value > cur : n.value < cur)) { cur = n.value; best.push([Date.parse(n.finished), cur, n.node]); }
  }
  if (best.length && done.length) best.push([Date.parse(done[done.length - 1].finished), cur, 'now']);
  const stageColors = ['#5f6b7a', '#2f6fde', '#1f9d55', '#d9822b', '#8e44ad'];
  // The x axis is the node's number (n0007 is 7) where every id is one,
  // else the node's place in id order, and says which.
  const valued = [...view.nodes.values()].filter(n => n.value !== undefined).sort((a, b) => cmpID(a.node, b.node));
  const numbered = valued.every(n => /^n\d+$/.test(n.node));
  const perNode = valued.map((n, i) => [numbered ? parseInt(n.node.slice(1), 10) : i + 1, n.value,
    `${n.node} (stage ${n.stage || 0}, ${n.kind || ''})`, stageColors[n.stage || 0], interval(n)]);
  const cost = (r.cost || []).map(p => [Date.parse(p.ts), p.cost_usd, p.calls + ' calls']);
  box.replaceChildren(
    chart({ title: `Best ${metric} over time`, x: 'time', yLabel: metric, step: true, empty: 'No node has produced ' + metric + ' yet.' }, [{ name: 'best', points: best }]),
    chart({ title: `${metric} per node, coloured by stage`, x: 'index', xLabel: numbered ? 'node number (n0007 is 7)' : 'node, in id order', yLabel: metric, points: true,
      legend: [1, 2, 3, 4].map(s => ['stage ' + s, stageColors[s]]) }, [{ name: metric, points: perNode }]),
    chart({ title: 'LLM cost over time (cumulative)', x: 'time', yLabel: 'USD', step: true, empty: r.cost_error || 'No LLM call recorded.' }, [{ name: 'cost', points: cost }]));
}

// scheduleRedraw batches the redraws live events ask for, at most one per
// four times what the last took, so that a big run's page keeps answering.
function scheduleRedraw() {
  if (view.redraw) return;
  view.redraw = setTimeout(() => {
    const t0 = performance.now();
    view.redraw = 0; drawTree(); drawSummary(); drawCharts();
    view.drawMs = performance.now() - t0;
  }, Math.max(250, 4 * view.drawMs));
}

function watch(id) {
  const live = document.getElementById('live');
  stream = new EventSource('/api/runs/' + encodeURIComponent(id) + '/events');
  stream.addEventListener('open', () => { live.hidden = view.run.status !== 'running'; live.className = 'live'; live.textContent = 'live'; });
  stream.addEventListener('error', () => { live.className = 'live off'; live.textContent = 'reconnecting'; });
  stream.addEventListener('node', e => {
    const n = JSON.parse(e.data);
    const old = view.nodes.get(n.node);
    view.nodes.set(n.node, n);
    if (view.selected === n.node && old && old.status !== n.status) loadNode(n.node);
    scheduleRedraw();
  });
  stream.addEventListener('run', e => {
    const s = JSON.parse(e.data);
    const costChanged = s.cost_usd !== view.run.cost_usd || s.llm_calls !== view.run.llm_calls;
    Object.assign(view.run, s);
    live.hidden = s.status !== 'running' && live.textContent === 'live';
    if (costChanged) api('/api/runs/' + encodeURIComponent(id)).then(r => { if (view.run && view.run.id === id) { view.run.cost = r.cost; scheduleRedraw(); } }).catch(() => {});
    scheduleRedraw();
  });
}

async function loadCluster(id) {
  const box = document.getElementById('cluster');
  if (!box) return;
  let c;
  try { c = await api('/api/runs/' + encodeURIComponent(id) + '/cluster'); } catch (err) { box.replaceChildren(failure(err)); return; }
  if (!view.run || view.run.id !== id) return;
  const card = el('div', { class: 'card' }, el('h2', {}, 'Cluster'));
  if (c.error) card.append(el('p', { class: 'muted' }, c.error));
  if (c.pools && c.pools.length) {
    card.append(el('h3', {}, 'Pools'), el('table', {}, el('tr', {}, ['pool', 'pending', 'in flight', 'dead letters', 'workers', 'lost'].map(h => el('th', {}, h))),
      c.pools.map(p => el('tr', {}, el('td', {}, p.pool), el('td', { class: 'num' }, p.pending), el('td', { class: 'num' }, p.in_flight),
        el('td', { class: 'num' }, p.dead_lettered), el('td', { class: 'num' }, p.workers), el('td', { class: 'num' }, p.lost_workers)))));
  }
  if (c.workers && c.workers.length) {
    card.append(el('h3', {}, 'Workers'), el('table', {}, el('tr', {}, ['worker', 'host', 'pools', 'busy', 'GPUs in use', 'Slurm job', 'state'].map(h => el('th', {}, h))),
      c.workers.map(w => el('tr', {}, el('td', {}, w.id), el('td', {}, w.host), el('td', {}, (w.pools || []).join(', ')),
        el('td', { class: 'num' }, `${w.running}/${w.slots}`), el('td', { class: 'num' }, w.gpus ? `${+(w.gpus_in_use || 0).toFixed(4)}/${w.gpus}` : '–'),
        el('td', {}, w.slurm_job_id || '–'),
        el('td', {}, w.lost ? badge('failed') : w.draining ? 'draining' : 'live')))));
    const gpus = c.workers.flatMap(w => (w.gpu_devices || []).map(g => ({ w, g })));
    if (gpus.length) {
      card.append(el('h3', {}, 'GPUs'), el('table', {}, el('tr', {}, ['worker', 'GPU', 'model', 'memory', 'MIG', 'driver', 'CUDA', 'compute mode'].map(h => el('th', {}, h))),
        gpus.map(({ w, g }) => el('tr', {}, el('td', {}, w.id), el('td', { title: g.uuid || '' }, g.index),
          el('td', {}, [g.name, g.architecture, g.compute_capability ? 'sm ' + g.compute_capability : ''].filter(Boolean).join(' · ')),
          el('td', { class: 'num' }, g.memory_mb ? `${(g.memory_mb / 1024).toFixed(0)} GiB` : '–'),
          el('td', {}, (g.mig || []).length ? g.mig.map(m => m.profile).join(', ') : g.mig_enabled ? 'enabled, no instance' : '–'),
          el('td', {}, g.driver || '–'), el('td', {}, g.cuda || '–'), el('td', {}, g.compute_mode || '–')))));
    }
  }
  if (c.bridges && c.bridges.length) {
    card.append(el('h3', {}, 'slurm-bridge'), el('table', {}, el('tr', {}, ['bridge', 'pool', 'backlog', 'jobs pending', 'jobs running', 'submitted', 'state'].map(h => el('th', {}, h))),
      c.bridges.map(b => el('tr', {}, el('td', {}, b.bridge), el('td', {}, b.pool), el('td', { class: 'num' }, b.backlog), el('td', { class: 'num' }, b.jobs_pending),
        el('td', { class: 'num' }, b.jobs_running), el('td', { class: 'num' }, b.submitted),
        el('td', {}, b.paused ? 'paused: ' + (b.paused_reason || '') : (b.last_error ? 'error: ' + b.last_error : 'ok'))))));
  }
  if (!c.error && !(c.pools || []).length && !(c.workers || []).length) card.append(el('p', { class: 'muted' }, 'No pool or worker on the queue now.'));
  box.replaceChildren(card);
}

// ---- the node panel ----

function selectNode(id) {
  view.selected = id || null;
  document.querySelectorAll('.node.sel').forEach(b => b.classList.remove('sel'));
  if (!id) return;
  const b = document.querySelector(`.node[data-node="${CSS.escape(id)}"]`);
  if (b) b.classList.add('sel');
  else drawTree(); // in a part of the tree not drawn: drawn now, with the way to it
  loadNode(id);
}

async function loadNode(id) {
  const panel = document.getElementById('panel');
  const run = view.run.id;
  let d;
  try { d = await api('/api/runs/' + encodeURIComponent(run) + '/nodes/' + encodeURIComponent(id)); } catch (err) { panel.replaceChildren(failure(err)); return; }
  if (view.selected !== id || !view.run || view.run.id !== run) return;
  view.detail = d;
  drawPanel();
}

const TABS = [['overview', 'Overview'], ['code', 'Code'], ['logs', 'Logs'], ['plots', 'Plots'], ['memory', 'Memory'], ['llm', 'LLM calls']];

function drawPanel() {
  const d = view.detail, panel = document.getElementById('panel');
  const link = id => el('a', { href: '#/run/' + encodeURIComponent(view.run.id) + '/node/' + encodeURIComponent(id) }, id);
  const head = el('div', {},
    el('h1', {}, d.node, ' ', badge(d.status)),
    el('dl', { class: 'kv' },
      el('dt', {}, 'kind'), el('dd', {}, `${d.kind || '–'} · stage ${d.stage || 0}`),
      el('dt', {}, 'metric'), el('dd', {}, d.value !== undefined ? fmtNum(d.value) : (d.metric || '–')),
      d.parent ? [el('dt', {}, 'parent'), el('dd', {}, link(d.parent))] : null,
      d.children && d.children.length ? [el('dt', {}, 'children'), el('dd', {}, d.children.flatMap((c, i) => i ? [', ', link(c)] : [link(c)]))] : null,
      el('dt', {}, 'worker'), el('dd', {}, [d.worker, d.host, d.slurm_job_id ? 'Slurm job ' + d.slurm_job_id : ''].filter(Boolean).join(' · ') || '–'),
      el('dt', {}, 'duration'), el('dd', {}, fmtDur(d.duration_ms), d.started ? ' from ' + fmtTime(d.started) : ''),
      d.reason ? [el('dt', {}, 'reason'), el('dd', { class: 'error' }, d.reason)] : null));
  const tabs = el('div', { class: 'tabs', role: 'tablist' }, TABS.map(([k, label]) => el('button', { class: view.tab === k ? 'on' : '', role: 'tab', 'data-tab': k,
    onclick: () => { view.tab = k; drawPanel(); } }, label)));
  panel.replaceChildren(head, tabs, el('div', { id: 'tab', 'data-tab': view.tab }, TAB_VIEWS[view.tab](d)));
}

function kv(obj) {
  return el('dl', { class: 'kv' }, Object.entries(obj).map(([k, v]) => [el('dt', {}, k),
    el('dd', {}, Array.isArray(v) ? v.map(x => typeof x === 'object' ? JSON.stringify(x) : String(x)).join('; ') : (v && typeof v === 'object' ? JSON.stringify(v) : String(v)))]));
}

// archived: the run is known from the results store only (source
// clickhouse): what only its directory keeps cannot be shown.
function archived(d) {
  return view.run.source === 'clickhouse' ? el('p', { class: 'muted' }, d.artifacts_note || 'This run\'s directory is not on this server.') : null;
}

const TAB_VIEWS = {
  overview(d) {
    const out = [];
    if (d.summary) out.push(el('h3', {}, 'Summary'), el('p', {}, d.summary));
    if (d.review) out.push(el('h3', {}, 'Execution review'), el('p', { class: d.review.is_bug ? 'error' : '' }, (d.review.is_bug ? 'bug: ' : 'no bug: ') + d.review.summary));
    if (d.metric_from) out.push(el('p', { class: 'hint' }, 'The metric was read from the output by the model (' + d.metric_from + ').'));
    if (d.plan) out.push(el('h3', {}, 'Plan'), kv(d.plan));
    if (d.error) out.push(el('h3', {}, 'Error'), el('p', { class: 'error' }, `${d.error.phase}: ${d.error.kind}: ${d.error.message}`));
    if (d.phases && d.phases.length) {
      out.push(el('h3', {}, 'Phases'), el('table', {}, el('tr', {}, el('th', {}, 'phase'), el('th', {}, 'result'), el('th', { class: 'num' }, 'exit'), el('th', { class: 'num' }, 'time')),
        d.phases.map(p => el('tr', {}, el('td', {}, p.name), el('td', {}, badge(p.ok ? 'ok' : 'failed')), el('td', { class: 'num' }, p.exit_code), el('td', { class: 'num' }, fmtDur(p.duration_ms))))));
    }
    if (d.metrics) {
      out.push(el('h3', {}, 'Metrics'), el('table', {}, Object.keys(d.metrics).sort().map(k => el('tr', {}, el('td', {}, k),
        el('td', { class: 'num' }, fmtNum(d.metrics[k])), el('td', {}, (d.metric_units || {})[k] || '')))));
    }
    if (d.diagnostics && d.diagnostics.length) {
      out.push(el('h3', {}, 'Diagnostics'), el('table', {}, d.diagnostics.map(g => el('tr', {}, el('td', {}, `${g.file}:${g.line}${g.column ? ':' + g.column : ''}`),
        el('td', {}, badge(g.severity === 'error' ? 'failed' : 'queued')), el('td', {}, g.message)))));
    }
    if (d.limits) out.push(el('h3', {}, 'Limits'), kv(d.limits));
    if (d.container) out.push(el('h3', {}, 'Container'), kv(d.container));
    if (d.toolchain) out.push(el('h3', {}, 'Toolchain'), kv(d.toolchain));
    if (d.artifacts_note) out.push(el('p', { class: 'muted' }, d.artifacts_note));
    if (d.artifacts_error) out.push(el('p', { class: 'error' }, d.artifacts_error));
    return out.length ? out : el('p', { class: 'muted' }, 'Nothing yet: the node has not run.');
  },
  code(d) {
    if (archived(d)) return archived(d);
    const out = [];
    for (const f of d.files || []) {
      const pre = el('pre', { class: 'code' });
      const lines = f.content.split('\n');
      if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
      for (const line of lines) pre.append(el('span', { class: 'ln' }, line + '\n'));
      out.push(el('h3', {}, f.path + (f.mode ? ' (' + f.mode + ')' : '')), pre);
    }
    for (const [phase, cmds] of Object.entries(d.commands || {})) out.push(el('h3', {}, phase + ' commands'), el('pre', { class: 'wrap' }, cmds.join('\n')));
    if (d.env) out.push(el('h3', {}, 'Environment'), kv(d.env));
    return out.length ? out : el('p', { class: 'muted' }, 'No code yet: the model is writing it.');
  },
  logs(d) {
    if (archived(d)) return archived(d);
    if (!d.logs || !d.logs.length) return el('p', { class: 'muted' }, 'No log has come home yet.');
    return d.logs.map(l => [el('h3', {}, l.name, ' ', el('a', { href: fileURL(view.run.id, l.path), target: '_blank', rel: 'noopener' }, `whole log (${fmtBytes(l.bytes)})`)),
      l.truncated ? el('p', { class: 'hint' }, 'The end of the log:') : null, el('pre', { class: 'wrap log', 'data-log': l.name }, l.tail || '(empty)')]);
  },
  plots(d) {
    if (archived(d)) return archived(d);
    const out = [];
    for (const p of d.plots || []) out.push(el('figure', {}, el('img', { src: fileURL(view.run.id, p.path), alt: p.name, loading: 'lazy' }), el('figcaption', {}, p.name)));
    if (d.plot_analysis) out.push(el('h3', {}, 'What the vision model saw'), el('p', { class: 'analysis' }, d.plot_analysis));
    if (d.outputs && d.outputs.length) out.push(el('h3', {}, 'Outputs'), el('ul', {}, d.outputs.map(o => el('li', {}, el('a', { href: fileURL(view.run.id, o.path), target: '_blank', rel: 'noopener' }, o.name), ' ', el('span', { class: 'muted' }, fmtBytes(o.bytes))))));
    return out.length ? el('div', { class: 'plots' }, out) : el('p', { class: 'muted' }, 'The node wrote no plot or output that came home.');
  },
  memory(d) {
    if (archived(d)) return archived(d);
    const m = d.memory;
    if (!m) return el('p', { class: 'muted' }, 'The run keeps no memory, or the node has no branch yet.');
    const out = [el('p', { class: 'hint' }, 'As branch ' + m.branch + ' sees it: its own writes and its ancestors\' before it forked.')];
    if (m.error) out.push(el('p', { class: 'error' }, m.error));
    out.push(el('h3', {}, 'Core'), m.core.length ? el('table', {}, el('tr', {}, el('th', {}, 'key'), el('th', {}, 'value'), el('th', { class: 'num' }, 'imp.'), el('th', {}, 'from')),
      m.core.map(c => el('tr', {}, el('td', {}, c.key), el('td', {}, el('pre', { class: 'wrap' }, c.value)), el('td', { class: 'num' }, c.importance), el('td', {}, c.branch)))) : el('p', { class: 'muted' }, 'empty'));
    out.push(el('h3', {}, `Recall (last ${m.recall.length} of ${m.recall_total})`));
    if (m.recall_summary) out.push(el('pre', { class: 'wrap' }, m.recall_summary));
    out.push(m.recall.length ? el('table', {}, m.recall.map(e => el('tr', {}, el('td', {}, new Date(e.ts).toLocaleTimeString()), el('td', {}, e.kind + (e.phase ? ' · ' + e.phase : '')),
      el('td', {}, e.node || ''), el('td', {}, el('pre', { class: 'wrap' }, e.payload))))) : el('p', { class: 'muted' }, 'no event'));
    out.push(el('h3', {}, 'Archival'), el('p', { class: 'hint' }, 'Found for: ' + (m.archival_query || '')));
    out.push(m.archival.length ? el('ul', {}, m.archival.map(a => el('li', {}, el('pre', { class: 'wrap' }, a.text), el('span', { class: 'muted' }, `${(a.tags || []).join(', ')} · seen ${a.count}×`)))) : el('p', { class: 'muted' }, 'no hit'));
    return out;
  },
  llm(d) {
    const finishText = { refusal: 'the model refused', content_filter: 'content filter', length: 'cut at its limit', tool_calls: 'tool calls (none offered)' };
    const tokens = (c, n) => (Number(c.tokens_estimated) ? '~' : '') + n;
    const out = [];
    if (d.llm_calls_error) out.push(el('p', { class: 'error' }, d.llm_calls_error));
    out.push(el('p', {}, `${d.llm_calls.length} calls · ${fmtCost(d.cost_usd)}`));
    if (d.llm_calls.length) {
      // A cache hit or an error is said under the purpose: the panel is narrow.
      out.push(el('table', {}, el('tr', {}, ['time', 'purpose', 'model', 'in', 'out', 'latency', 'cost'].map(h => el('th', {}, h))),
        d.llm_calls.map(c => el('tr', {}, el('td', { title: String(c.ts) }, fmtClock(c.ts)),
          el('td', {}, c.purpose, Number(c.cache_hit) ? el('div', { class: 'muted' }, 'cache hit') : null, c.error ? el('div', { class: 'error' }, c.error) : null,
            // How a reply ended, when not as an answer: refusal, content_filter, length, tool_calls.
            c.finish_reason && c.finish_reason !== 'stop' ? el('div', { class: 'error' }, finishText[c.finish_reason] || c.finish_reason) : null),
          el('td', {}, c.model),
          // Cached prompt tokens and reasoning tokens are said under the
          // counts they are part of; "~" marks counts estimated by hpcq.
          el('td', { class: 'num' }, tokens(c, c.tokens_in), Number(c.cached_tokens) ? el('div', { class: 'muted' }, `${c.cached_tokens} cached`) : null),
          el('td', { class: 'num' }, tokens(c, c.tokens_out), Number(c.reasoning_tokens) ? el('div', { class: 'muted' }, `${c.reasoning_tokens} reasoning`) : null), el('td', { class: 'num' }, fmtDur(Math.round(Number(c.latency_ms) || 0))), el('td', { class: 'num' }, Number(c.unpriced) ? el('span', { class: 'muted', title: 'no price in llm.prices for this model: its cost is not known' }, 'unpriced') : fmtCost(c.cost_usd))))));
    }
    if (d.prompts && d.prompts.length) {
      out.push(el('h3', {}, 'Prompts'), el('ul', {}, d.prompts.map(p => el('li', {}, el('a', { href: fileURL(view.run.id, p.path), target: '_blank', rel: 'noopener' }, p.name), ' ', el('span', { class: 'muted' }, fmtBytes(p.bytes))))));
    }
    return out;
  },
};
