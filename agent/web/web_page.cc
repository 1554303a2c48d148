#include "agent/web/web_page.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "base/json_writer.h"

namespace kvwatch::agent {
namespace {

// The page. Placeholders @@NAME@@ are filled by RenderIndexPage in one pass (a
// value is never scanned again): TITLE and REPLICA HTML-escaped, CONFIG as JSON
// that cannot close the <script> element it sits in, PANELS the history and group
// panels' code (web_page_panels.cc).
constexpr std::string_view kPageTemplate = R"kvwatch_page(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>@@TITLE@@</title>
<style>
:root {
  --ink: #1d2733; --muted: #5b6673; --line: #d9dee4; --panel: #ffffff;
  --page-hit: #1f77b4; --coverage: #ff7f0e; --knee: #d62728; --target: #2ca02c; --configured: #7b3fbf;
}
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: var(--ink); background: #f4f6f8; }
header { padding: 12px 20px; background: var(--panel); border-bottom: 1px solid var(--line); }
h1 { font-size: 20px; margin: 0 0 2px; }
h2 { font-size: 16px; margin: 18px 0 6px; }
.meta { color: var(--muted); }
#replica-field:not([hidden]) + span::before { content: "\00b7  "; }
#status { display: inline-block; margin-top: 6px; padding: 3px 9px; border-radius: 4px; }
#status[data-state="loading"] { background: #eef2f6; color: var(--muted); }
#status[data-state="ok"] { background: #e7f4e8; color: #1b5e20; }
#status[data-state="error"] { background: #fdecea; color: #b71c1c; font-weight: 600; }
nav#windows { display: flex; flex-wrap: wrap; gap: 6px; padding: 12px 20px 0; }
button.window { font: inherit; padding: 3px 14px; border: 1px solid var(--line); border-radius: 4px;
                background: var(--panel); color: var(--ink); cursor: pointer; }
button.window[aria-pressed="true"] { background: var(--ink); border-color: var(--ink); color: #fff; }
main { max-width: 1020px; padding: 8px 20px 24px; }
#summary { margin: 6px 0 8px; }
#empty { padding: 8px 12px; background: #fff8e1; border: 1px solid #ffe082; border-radius: 4px; }
svg#curve { display: block; width: 100%; height: auto; background: var(--panel);
            border: 1px solid var(--line); border-radius: 4px; }
svg#curve.stale { opacity: 0.45; }
svg#curve text { font-size: 12px; fill: var(--ink); }
svg#curve .grid { stroke: #e9edf1; }
svg#curve .minor-tick { stroke: #9aa4ae; }
svg#curve .frame { fill: none; stroke: #39424c; }
svg#curve .tick-label, svg#curve .axis-title { fill: var(--muted); }
svg#curve .empty-note { font-size: 16px; fill: var(--muted); }
path.page-hit-ratio { fill: none; stroke: var(--page-hit); stroke-width: 2; }
path.request-coverage { fill: none; stroke: var(--coverage); stroke-width: 2; }
line.unlimited { stroke: var(--page-hit); stroke-dasharray: 6 4; }
svg#curve .unlimited-label { fill: var(--page-hit); }
line.knee { stroke: var(--knee); stroke-width: 1.5; stroke-dasharray: 8 3; }
svg#curve .knee-label, svg#curve .knee-missing { fill: var(--knee); }
circle.target { fill: var(--target); stroke: #fff; stroke-width: 1.5; }
svg#curve .target-label, svg#curve .target-missing { fill: var(--target); }
line.configured { stroke: var(--configured); stroke-width: 1.5; stroke-dasharray: 2 3; }
svg#curve .configured-label { fill: var(--configured); }
ul#legend, ul#history-legend { display: flex; flex-wrap: wrap; gap: 4px 18px; margin: 8px 0 0; padding: 0;
            list-style: none; color: var(--muted); }
.swatch { display: inline-block; width: 22px; margin-right: 6px; vertical-align: middle; border-top: 2px solid; }
.swatch.dot { width: 9px; height: 9px; border: 0; border-radius: 50%; background: var(--target); }
table#working-set { border-collapse: collapse; background: var(--panel); }
table#working-set th, table#working-set td { padding: 4px 12px; border: 1px solid var(--line); text-align: right; }
table#working-set thead th { text-align: center; background: #eef2f6; }
table#working-set td.not-converged { color: #b71c1c; font-style: italic; }
table#working-set td.message { text-align: left; color: var(--muted); }
table#policy-table { border-collapse: collapse; background: var(--panel); }
table#policy-table th, table#policy-table td { padding: 4px 12px; border: 1px solid var(--line); text-align: right; }
table#policy-table thead th { text-align: center; background: #eef2f6; }
table#policy-table tr.engine td { font-weight: bold; }
table#policy-table td.better { color: #1b5e20; }
table#policy-table td.worse { color: #b71c1c; }
.note { color: var(--muted); max-width: 760px; }
p.answers { margin: 0 0 6px; font-style: italic; }
svg#history { display: block; width: 100%; height: auto; background: var(--panel);
              border: 1px solid var(--line); border-radius: 4px; }
svg#history text { font-size: 12px; fill: var(--ink); }
svg#history .grid { stroke: #e9edf1; }
svg#history .frame { fill: none; stroke: #39424c; }
svg#history .tick-label, svg#history .axis-title { fill: var(--muted); }
svg#history .empty-note { font-size: 16px; fill: var(--muted); }
path.history-working-set { fill: none; stroke: var(--target); stroke-width: 2; }
path.history-working-set[data-fraction="0.95"] { stroke-dasharray: 7 3; }
path.history-knee { fill: none; stroke: var(--knee); stroke-width: 2; stroke-dasharray: 2 3; }
line.history-capacity { stroke: var(--configured); stroke-width: 1.5; stroke-dasharray: 2 3; }
svg#history .history-capacity-label { fill: var(--configured); }
table#group-table { border-collapse: collapse; background: var(--panel); }
table#group-table th, table#group-table td { padding: 4px 12px; border: 1px solid var(--line); text-align: right; }
table#group-table thead th { text-align: center; background: #eef2f6; }
table#group-table td.group, table#group-table td.evictor, table#group-table tbody th { text-align: left;
  white-space: nowrap; }
</style>
</head>
<body>
<header>
  <h1 id="title">@@TITLE@@</h1>
  <div class="meta">
    <span id="replica-field">replica <strong id="replica">@@REPLICA@@</strong></span>
    <span>last update <span id="updated">never</span></span>
  </div>
  <div id="status" role="status" aria-live="polite" data-state="loading">connecting to the agent&hellip;</div>
</header>
<nav id="windows" aria-label="time window"></nav>
<main>
  <p id="summary">waiting for the first answer from the agent&hellip;</p>
  <p id="empty" hidden>no requests in this window yet</p>
  <h2>Hit rate against cache size</h2>
  <p class="answers" data-panel="curve">What share of the reusable KV pages would an LRU cache of each size keep,
  and where does more cache stop paying?</p>
  <svg id="curve" viewBox="0 0 960 460" role="img"
       aria-label="cache capacity against page hit ratio and request coverage"></svg>
  <ul id="legend">
    <li><span class="swatch" style="border-color: var(--page-hit)"></span>page hit ratio</li>
    <li><span class="swatch" style="border-color: var(--coverage)"></span>request coverage</li>
    <li><span class="swatch" style="border-top-style: dashed; border-color: var(--page-hit)"></span>unlimited page hit ratio</li>
    <li><span class="swatch" style="border-top-style: dashed; border-color: var(--knee)"></span>knee</li>
    <li><span class="swatch dot"></span>page-hit working set 0.9 / 0.95 / 0.99</li>
    <li><span class="swatch" style="border-top-style: dotted; border-color: var(--configured)"></span>configured cache size</li>
  </ul>
  <h2>Working sets</h2>
  <p class="answers" data-panel="working-set">How big must the cache be to keep 90, 95 or 99% of the hits an
  unlimited cache would get, in pages and in bytes per GPU rank?</p>
  <table id="working-set">
    <thead>
      <tr><th rowspan="2">target</th><th colspan="2">page hit</th><th colspan="2">request coverage</th></tr>
      <tr><th>pages</th><th>bytes</th><th>pages</th><th>bytes</th></tr>
    </thead>
    <tbody><tr><td class="message" colspan="5">waiting for the first answer&hellip;</td></tr></tbody>
  </table>
  <section id="history-panel" hidden>
  <h2>Working set and knee over time</h2>
  <p class="answers" data-panel="history">Is the working set growing or shrinking, has the knee moved, and does
  the configured cache still cover them?</p>
  <svg id="history" viewBox="0 0 960 300" role="img"
       aria-label="the window's page-hit working sets and knee over time, with the configured cache sizes"></svg>
  <ul id="history-legend">
    <li><span class="swatch" style="border-color: var(--target)"></span>page-hit working set 0.9</li>
    <li><span class="swatch" style="border-top-style: dashed; border-color: var(--target)"></span>page-hit working set 0.95</li>
    <li><span class="swatch" style="border-top-style: dotted; border-color: var(--knee)"></span>knee</li>
    <li><span class="swatch" style="border-top-style: dotted; border-color: var(--configured)"></span>configured cache size</li>
  </ul>
  <p class="note" id="history-note"></p>
  </section>
  <section id="groups" hidden>
  <h2>Tenants and request classes in the shared cache</h2>
  <p class="answers" data-panel="groups">Who uses the shared cache, and who loses hits at the configured size, and
  to whom?</p>
  <table id="group-table">
    <thead><tr><th></th><th>group</th><th>requests</th><th>page hit (unlimited)</th><th id="groups-hit-at">page hit</th>
    <th id="groups-misses-at">capacity misses</th><th>evicted most by</th></tr></thead>
    <tbody></tbody>
  </table>
  <p class="note">Each tenant's and request class's page hit ratio in the one LRU cache all share
  (<code>tenants.*</code>); a capacity miss would have hit in an unlimited cache; "evicted most by": the group whose
  references pushed out most of those pages (docs/tenants.md explains the attribution).</p>
  </section>
  <section id="policies" hidden>
  <h2>Eviction policies at the configured sizes</h2>
  <p class="answers" data-panel="policies">Would another eviction policy keep more hits than the engine's at the
  configured cache size?</p>
  <table id="policy-table">
    <thead><tr><th>pages</th><th>policy</th><th>page hit</th><th>request coverage</th><th>vs engine's policy</th></tr></thead>
    <tbody></tbody>
  </table>
  <p class="note">Live canaries (<code>curve.policies</code>): each policy simulated at each configured cache size on
  this replica's requests over the window; the engine's own policy (<code>curve.engine_policy</code>) is marked.</p>
  </section>
  <p class="note">Page hit x: the smallest cache that keeps x of the page hits an unlimited cache would get.
  Request coverage q: the smallest cache at which q of the requests keep all their reusable pages.
  "not converged": the target is not reached within the tracked range.</p>
</main>
<script type="application/json" id="kvwatch-config">@@CONFIG@@</script>
<script>
(function () {
  'use strict';

  const SVG_NS = 'http://www.w3.org/2000/svg';
  const TARGET_FRACTIONS = [0.9, 0.95, 0.99];
  const FETCH_TIMEOUT_MS = 10000;
  const CHART = {width: 960, height: 460, left: 64, right: 24, top: 56, bottom: 52};
  const COUNT_FORMAT = new Intl.NumberFormat('en-US', {maximumFractionDigits: 0});
  const ERROR_HEADLINES = {
    'unreachable': 'agent unreachable',
    'unavailable': 'agent unavailable',
    'bad-answer': 'agent sent a bad answer',
  };

  const config = readConfig();
  const state = {
    windows: config.windows.slice(),
    windowsLoaded: false,
    selected: '',
    data: null,        // the last good curve
    updatedAt: null,   // when it arrived
    busy: false,
    again: false,      // refresh once more when the current one ends
  };

  // ------------------------------------------------------------ configuration

  function readConfig() {
    const raw = JSON.parse(document.getElementById('kvwatch-config').textContent);
    return {
      replica: String(raw.replica || ''),
      refreshSeconds: Math.max(1, Number(raw.refresh_seconds) || 10),
      windows: Array.isArray(raw.windows) ? raw.windows.map(String) : [],
      apiBase: String(raw.api_base || ''),
    };
  }

  // "api/v1/curve" relative to the page, or under the configured base.
  function apiUrl(path) {
    const base = config.apiBase;
    if (base === '') return path;
    return base.endsWith('/') ? base + path : base + '/' + path;
  }

  function windowFromFragment() {
    const match = /(?:^#|&)window=([^&]*)/.exec(location.hash);
    return match ? decodeURIComponent(match[1]) : '';
  }

  // ------------------------------------------------------------ fetching

  function agentError(kind, url, reason) {
    const err = new Error(reason);
    err.kind = kind;
    err.url = url;
    return err;
  }

  async function fetchJson(path) {
    const url = apiUrl(path);
    const controller = new AbortController();
    const timeout = setTimeout(() => controller.abort(), FETCH_TIMEOUT_MS);
    try {
      const response = await fetch(url, {
        cache: 'no-store', signal: controller.signal, headers: {'Accept': 'application/json'},
      });
      if (!response.ok) {
        const text = 'HTTP ' + response.status + (response.statusText ? ' ' + response.statusText : '');
        throw agentError('unavailable', url, text + await errorDetail(response));
      }
      return await parseBody(response, url);
    } catch (err) {
      if (err.kind) throw err;
      const reason = err.name === 'AbortError' ? 'no answer within ' + FETCH_TIMEOUT_MS / 1000 + ' s' : err.message;
      throw agentError('unreachable', url, reason);
    } finally {
      clearTimeout(timeout);
    }
  }

  // The agent's errors are JSON {"error": "..."}: ": ..." when the body is one.
  async function errorDetail(response) {
    try {
      const body = await response.json();
      return body && typeof body.error === 'string' ? ': ' + body.error : '';
    } catch (err) {
      return '';
    }
  }

  async function parseBody(response, url) {
    try {
      return await response.json();
    } catch (err) {
      if (err.name === 'AbortError') throw err;
      throw agentError('bad-answer', url, 'the answer is not JSON');
    }
  }

  async function loadWindows() {
    const body = await fetchJson('api/v1/windows');
    if (Array.isArray(body.windows) && body.windows.length > 0) state.windows = body.windows.map(String);
    state.windowsLoaded = true;
    if (!state.windows.includes(state.selected)) state.selected = state.windows[0] || '';
    renderWindowButtons();
  }

  async function loadCurve() {
    const name = state.selected;
    if (name === '') throw agentError('bad-answer', apiUrl('api/v1/windows'), 'the agent lists no windows');
    const url = 'api/v1/curve?window=' + encodeURIComponent(name);
    const data = await fetchJson(url);
    if (!data || typeof data !== 'object' || !Array.isArray(data.points)) {
      throw agentError('bad-answer', apiUrl(url), 'no "points" array in the curve');
    }
    if (name !== state.selected) return;  // switched meanwhile: the next refresh draws it
    state.data = data;
    state.updatedAt = new Date();
    render(data, name);
    setStatus('ok', 'live: window ' + name + ', refreshed every ' + config.refreshSeconds + ' s');
    // The panels of other API paths: each hides itself when its path does not answer.
    await Promise.all([loadHistory(name), loadGroups(name)]);
  }

  async function refresh() {
    if (state.busy) {
      state.again = true;
      return;
    }
    state.busy = true;
    try {
      await loadWindowsIfNeeded();
      await loadCurve();
    } catch (err) {
      showError(err);
    } finally {
      state.busy = false;
    }
    if (state.again) {
      state.again = false;
      await refresh();
    }
  }

  // Without the list, the configured names still let the curve load.
  async function loadWindowsIfNeeded() {
    if (state.windowsLoaded) return;
    try {
      await loadWindows();
    } catch (err) {
      if (state.windows.length === 0) throw err;
    }
  }

  function scheduleRefresh() {
    setTimeout(async () => {
      await refresh();
      scheduleRefresh();
    }, config.refreshSeconds * 1000);
  }

  // ------------------------------------------------------------ header, status, windows

  function setStatus(kind, text) {
    const el = document.getElementById('status');
    el.dataset.state = kind;
    el.textContent = text;
  }

  function showError(err) {
    const headline = ERROR_HEADLINES[err.kind] || 'error';
    const where = err.url ? ' (' + err.url + ')' : '';
    const since = state.updatedAt ? '; showing data from ' + formatTime(state.updatedAt) : '; no data yet';
    setStatus('error', headline + ': ' + err.message + where + since +
              '; retrying every ' + config.refreshSeconds + ' s');
    const svg = document.getElementById('curve');
    if (state.data) {
      svg.classList.add('stale');
    } else {
      document.getElementById('summary').textContent = 'no data yet: ' + headline;
      svg.replaceChildren();
      drawEmpty(svg, 'no data yet: ' + headline);
    }
  }

  function renderWindowButtons() {
    document.getElementById('windows').replaceChildren(...state.windows.map(windowButton));
  }

  function windowButton(name) {
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'window';
    button.dataset.window = name;
    button.textContent = name;
    button.setAttribute('aria-pressed', String(name === state.selected));
    button.addEventListener('click', () => selectWindow(name));
    return button;
  }

  function selectWindow(name) {
    if (name === state.selected) return;
    state.selected = name;
    history.replaceState(null, '', '#window=' + encodeURIComponent(name));
    renderWindowButtons();
    setStatus('loading', 'loading window ' + name + '\u2026');
    refresh();
  }

  // ------------------------------------------------------------ rendering

  function render(data, name) {
    const empty = !(Number(data.requests) > 0);
    document.getElementById('updated').textContent = formatTime(state.updatedAt);
    document.getElementById('summary').textContent = summaryText(data, name, empty);
    document.getElementById('empty').hidden = !empty;
    renderChart(data, empty);
    renderTable(data, empty);
    renderPolicies(data);
  }

  // ------------------------------------------------------------ policy canaries

  function renderPolicies(data) {
    const section = document.getElementById('policies');
    const rows = Array.isArray(data.policies) ? data.policies : [];
    section.hidden = rows.length === 0;
    const sorted = rows.slice().sort((a, b) =>
      a.capacity_pages - b.capacity_pages || b.page_hit_ratio - a.page_hit_ratio);
    document.querySelector('#policy-table tbody').replaceChildren(...sorted.map((p) => {
      const row = document.createElement('tr');
      row.dataset.policy = p.policy;
      row.dataset.capacity = String(p.capacity_pages);
      if (p.engine_policy) row.className = 'engine';
      appendCell(row, 'td', formatCount(p.capacity_pages));
      appendCell(row, 'td', p.policy + (p.engine_policy ? ' (engine)' : ''), 'policy');
      appendCell(row, 'td', Number(p.page_hit_ratio).toFixed(4), 'page-hit');
      appendCell(row, 'td', p.request_coverage == null ? '\u2014' : Number(p.request_coverage).toFixed(4), 'coverage');
      const gain = Number(p.gain);
      appendCell(row, 'td', p.engine_policy ? '\u2014' : (gain >= 0 ? '+' : '') + gain.toFixed(4),
                 'gain' + (gain > 0 ? ' better' : gain < 0 ? ' worse' : ''));
      return row;
    }));
  }

  function summaryText(data, name, empty) {
    if (empty) return 'window ' + name + ': no requests yet';
    return 'window ' + name + ': ' + formatCount(data.requests) + ' requests, ' +
           formatCount(data.page_refs) + ' page references, unlimited page hit ratio ' +
           formatRatio(data.unlimited_page_hit_ratio) + '; knee ' + kneeText(data.knee);
  }

  function kneeText(knee) {
    if (!knee || knee.capacity_pages == null) return 'not converged';
    const bytes = knee.bytes != null ? ' (' + formatBytes(knee.bytes) + ')' : '';
    return formatCount(knee.capacity_pages) + ' pages' + bytes;
  }

  function renderChart(data, empty) {
    const svg = document.getElementById('curve');
    svg.replaceChildren();
    svg.classList.remove('stale');
    const series = plotSeries(data);
    if (empty || series.length === 0) {
      drawEmpty(svg, empty ? 'no requests in this window yet' : 'the answer has no curve points');
      return;
    }
    const scale = makeScale(data, series);
    drawYAxis(svg, scale);
    drawXAxes(svg, scale, bytesPerPage(data));
    drawConfigured(svg, scale, data.capacity_pages_configured);
    drawUnlimited(svg, scale, data.unlimited_page_hit_ratio);
    drawStep(svg, scale, series, 'request_coverage', 'request-coverage', 'request coverage');
    drawStep(svg, scale, series, 'page_hit_ratio', 'page-hit-ratio', 'page hit ratio');
    drawKnee(svg, scale, data.knee);
    drawTargets(svg, scale, data);
  }

  // The dense plot series when the answer has one, else the worksheet points.
  function plotSeries(data) {
    const source = Array.isArray(data.plot) && data.plot.length > 0 ? data.plot : data.points;
    return source.filter((p) => Number.isFinite(p.capacity_pages))
        .sort((a, b) => a.capacity_pages - b.capacity_pages);
  }

  // Bytes per page from any point that has both sizes; 0 when bytes are unknown.
  function bytesPerPage(data) {
    const all = (data.points || []).concat(data.plot || []);
    const p = all.find((q) => Number.isFinite(q.capacity_bytes) && q.capacity_pages > 0);
    return p ? p.capacity_bytes / p.capacity_pages : 0;
  }

  // Log x from 1 page to a bit past everything drawn; linear y over [0, 1].
  function makeScale(data, series) {
    let most = 10;
    const widen = (c) => { if (Number.isFinite(c) && c > most) most = c; };
    series.forEach((p) => widen(p.capacity_pages));
    (data.capacity_pages_configured || []).forEach(widen);
    if (data.knee) widen(data.knee.capacity_pages);
    TARGET_FRACTIONS.forEach((f) => {
      const entry = findTarget(data.working_set, 'page_hit', f);
      if (entry) widen(entry.capacity_pages);
    });
    const xMax = most * 1.25;
    const width = CHART.width - CHART.left - CHART.right;
    const height = CHART.height - CHART.top - CHART.bottom;
    return {
      xMax: xMax,
      left: CHART.left, right: CHART.left + width, top: CHART.top, bottom: CHART.top + height,
      x: (c) => CHART.left + width * Math.log10(Math.max(1, c)) / Math.log10(xMax),
      y: (v) => CHART.top + height * (1 - Math.min(1, Math.max(0, v))),
    };
  }

  function svgElement(parent, tag, attributes, text) {
    const el = document.createElementNS(SVG_NS, tag);
    for (const [key, value] of Object.entries(attributes)) el.setAttribute(key, String(value));
    if (text !== undefined) el.textContent = text;
    parent.appendChild(el);
    return el;
  }

  function addTooltip(el, text) {
    svgElement(el, 'title', {}, text);
  }

  function drawFrame(svg, s) {
    svgElement(svg, 'rect', {class: 'frame', x: s.left, y: s.top, width: s.right - s.left, height: s.bottom - s.top});
  }

  function drawEmpty(svg, message) {
    const s = {left: CHART.left, right: CHART.width - CHART.right, top: CHART.top, bottom: CHART.height - CHART.bottom};
    drawFrame(svg, s);
    svgElement(svg, 'text', {class: 'empty-note', x: (s.left + s.right) / 2, y: (s.top + s.bottom) / 2,
                             'text-anchor': 'middle'}, message);
  }

  function drawYAxis(svg, s) {
    for (let k = 0; k <= 5; k++) {
      const v = k / 5;
      const y = s.y(v);
      svgElement(svg, 'line', {class: 'grid', x1: s.left, x2: s.right, y1: y, y2: y});
      svgElement(svg, 'text', {class: 'tick-label', x: s.left - 8, y: y + 4, 'text-anchor': 'end'}, v.toFixed(1));
    }
    svgElement(svg, 'text', {class: 'axis-title', 'text-anchor': 'middle',
                             transform: 'translate(18 ' + (s.top + s.bottom) / 2 + ') rotate(-90)'}, 'ratio');
    drawFrame(svg, s);
  }

  // Decades in pages below the plot; the same positions in bytes above it.
  function drawXAxes(svg, s, perPage) {
    for (let c = 1; c <= s.xMax; c *= 10) {
      const x = s.x(c);
      svgElement(svg, 'line', {class: 'grid', x1: x, x2: x, y1: s.top, y2: s.bottom});
      svgElement(svg, 'text', {class: 'tick-label', x: x, y: s.bottom + 16, 'text-anchor': 'middle'}, formatDecade(c));
      if (perPage > 0) {
        svgElement(svg, 'text', {class: 'tick-label bytes', x: x, y: s.top - 8, 'text-anchor': 'middle'},
                   formatBytes(c * perPage));
      }
      drawMinorTicks(svg, s, c);
    }
    svgElement(svg, 'text', {class: 'axis-title', x: (s.left + s.right) / 2, y: s.bottom + 38,
                             'text-anchor': 'middle'}, 'capacity (pages, log scale)');
    if (perPage > 0) {
      svgElement(svg, 'text', {class: 'axis-title', x: s.left, y: s.top - 30},
                 'capacity (bytes per GPU rank, ' + formatBytes(perPage) + ' a page)');
    }
  }

  function drawMinorTicks(svg, s, decade) {
    for (let m = 2; m < 10 && decade * m <= s.xMax; m++) {
      const x = s.x(decade * m);
      svgElement(svg, 'line', {class: 'minor-tick', x1: x, x2: x, y1: s.bottom, y2: s.bottom + 4});
    }
  }

  // A step line: each sample's value holds until the next sample, and the last
  // value to the right edge (the curve is flat past its end).
  function drawStep(svg, s, series, field, className, label) {
    const parts = [];
    let lastY = null;
    for (const p of series) {
      const v = p[field];
      if (!Number.isFinite(v)) continue;
      const x = s.x(p.capacity_pages).toFixed(1);
      const y = s.y(v).toFixed(1);
      parts.push(lastY === null ? 'M' + x + ',' + y : 'L' + x + ',' + lastY + ' L' + x + ',' + y);
      lastY = y;
    }
    if (lastY !== null) parts.push('L' + s.right.toFixed(1) + ',' + lastY);
    const path = svgElement(svg, 'path', {class: className, d: parts.join(' ')});
    addTooltip(path, label);
  }

  function drawUnlimited(svg, s, ratio) {
    if (!Number.isFinite(ratio)) return;
    const y = s.y(ratio);
    const line = svgElement(svg, 'line', {class: 'unlimited', x1: s.left, x2: s.right, y1: y, y2: y});
    addTooltip(line, 'unlimited page hit ratio ' + formatRatio(ratio));
    svgElement(svg, 'text', {class: 'unlimited-label', x: s.left + 6, y: y - 6}, 'unlimited ' + formatRatio(ratio));
  }

  function drawKnee(svg, s, knee) {
    if (!knee || knee.capacity_pages == null) {
      svgElement(svg, 'text', {class: 'knee-missing', x: s.left + 8, y: s.top + 16}, 'knee: not converged');
      return;
    }
    const x = s.x(knee.capacity_pages);
    const line = svgElement(svg, 'line', {class: 'knee', x1: x, x2: x, y1: s.top, y2: s.bottom,
                                          'data-capacity-pages': knee.capacity_pages});
    addTooltip(line, 'knee: ' + kneeText(knee));
    const onRight = x > (s.left + s.right) / 2;
    svgElement(svg, 'text', {class: 'knee-label', x: onRight ? x - 6 : x + 6, y: s.top + 16,
                             'text-anchor': onRight ? 'end' : 'start'}, 'knee ' + kneeText(knee));
  }

  // Page-hit working sets: a dot at (capacity, fraction x unlimited ratio) on the
  // page-hit curve, labelled with its fraction above-left and below-right in turn,
  // so that neighbours do not overlap; the capacities are in the dot's tooltip and
  // the table.
  function drawTargets(svg, s, data) {
    const unlimited = Number(data.unlimited_page_hit_ratio) || 0;
    const missing = [];
    let drawn = 0;
    TARGET_FRACTIONS.forEach((f) => {
      const entry = findTarget(data.working_set, 'page_hit', f);
      if (!entry) return;
      if (entry.capacity_pages == null) {
        missing.push(formatFraction(f));
        return;
      }
      const cx = s.x(entry.capacity_pages);
      const cy = s.y(f * unlimited);
      const dot = svgElement(svg, 'circle', {class: 'target', cx: cx, cy: cy, r: 4.5,
                                             'data-fraction': f, 'data-capacity-pages': entry.capacity_pages});
      addTooltip(dot, 'page-hit working set ' + formatFraction(f) + ': ' + workingSetText(entry));
      const aboveLeft = drawn++ % 2 === 0;
      svgElement(svg, 'text', {class: 'target-label', x: aboveLeft ? cx - 5 : cx + 5, y: aboveLeft ? cy - 7 : cy + 15,
                               'text-anchor': aboveLeft ? 'end' : 'start'}, formatFraction(f));
    });
    if (missing.length > 0) {
      svgElement(svg, 'text', {class: 'target-missing', x: s.right - 8, y: s.bottom - 10, 'text-anchor': 'end'},
                 'page-hit working set ' + missing.join(', ') + ': not converged');
    }
  }

  function drawConfigured(svg, s, capacities) {
    (capacities || []).filter((c) => Number.isFinite(c) && c > 0).forEach((c) => {
      const x = s.x(c);
      const line = svgElement(svg, 'line', {class: 'configured', x1: x, x2: x, y1: s.top, y2: s.bottom,
                                            'data-capacity-pages': c});
      addTooltip(line, 'configured cache: ' + formatCount(c) + ' pages');
      svgElement(svg, 'text', {class: 'configured-label', transform: 'translate(' + (x - 4) + ' ' + (s.bottom - 6) +
                               ') rotate(-90)'}, 'cache ' + formatCount(c));
    });
  }

  function findTarget(workingSet, target, fraction) {
    return (workingSet || []).find((e) => e.target === target && Math.abs(e.fraction - fraction) < 1e-9);
  }

  function workingSetText(entry) {
    if (entry.capacity_pages == null) return 'not converged';
    const bytes = entry.bytes != null ? ' (' + formatBytes(entry.bytes) + ')' : '';
    return formatCount(entry.capacity_pages) + ' pages' + bytes;
  }

  // ------------------------------------------------------------ working-set table

  function renderTable(data, empty) {
    const body = document.querySelector('#working-set tbody');
    if (empty) {
      body.replaceChildren(messageRow('no requests in this window yet'));
      return;
    }
    const fractions = [...new Set((data.working_set || []).map((e) => e.fraction))].sort((a, b) => a - b);
    if (fractions.length === 0) {
      body.replaceChildren(messageRow('the answer has no working-set targets'));
      return;
    }
    body.replaceChildren(...fractions.map((f) => workingSetRow(data.working_set, f)));
  }

  function messageRow(text) {
    const row = document.createElement('tr');
    const cell = appendCell(row, 'td', text);
    cell.colSpan = 5;
    cell.className = 'message';
    return row;
  }

  function workingSetRow(workingSet, fraction) {
    const row = document.createElement('tr');
    row.dataset.fraction = String(fraction);
    appendCell(row, 'th', formatFraction(fraction));
    for (const target of ['page_hit', 'request_coverage']) {
      appendWorkingSetCells(row, target, findTarget(workingSet, target, fraction));
    }
    return row;
  }

  function appendWorkingSetCells(row, target, entry) {
    if (!entry) {
      appendCell(row, 'td', '\u2014', target + ' pages');
      appendCell(row, 'td', '\u2014', target + ' bytes');
    } else if (entry.capacity_pages == null) {
      appendCell(row, 'td', 'not converged', target + ' pages not-converged');
      appendCell(row, 'td', 'not converged', target + ' bytes not-converged');
    } else {
      appendCell(row, 'td', formatCount(entry.capacity_pages), target + ' pages');
      const bytes = appendCell(row, 'td', entry.bytes != null ? formatBytes(entry.bytes) : '\u2014', target + ' bytes');
      if (entry.bytes == null) bytes.title = 'bytes per token not known to the agent';
    }
  }

  function appendCell(row, tag, text, className) {
    const cell = document.createElement(tag);
    cell.textContent = text;
    if (className) cell.className = className;
    row.appendChild(cell);
    return cell;
  }

  // ------------------------------------------------------------ formatting

  function formatCount(n) {
    return Number.isFinite(n) ? COUNT_FORMAT.format(n) : '\u2014';
  }

  function formatRatio(v) {
    return Number.isFinite(v) ? v.toFixed(3) : '\u2014';
  }

  function formatFraction(f) {
    return String(f);
  }

  function formatDecade(c) {
    if (c >= 1e9) return c / 1e9 + 'G';
    if (c >= 1e6) return c / 1e6 + 'M';
    if (c >= 1e3) return c / 1e3 + 'k';
    return String(c);
  }

  // Binary units, three significant digits: "512 B", "1.50 GiB".
  function formatBytes(bytes) {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
    let v = Number(bytes);
    if (!Number.isFinite(v)) return '\u2014';
    let u = 0;
    while (Math.abs(v) >= 1024 && u < units.length - 1) {
      v /= 1024;
      u++;
    }
    if (u === 0) return v.toFixed(0) + ' B';
    return v.toFixed(v < 10 ? 2 : (v < 100 ? 1 : 0)) + ' ' + units[u];
  }

  function formatTime(date) {
    const pad = (n) => String(n).padStart(2, '0');
    return date.getFullYear() + '-' + pad(date.getMonth() + 1) + '-' + pad(date.getDate()) + ' ' +
           pad(date.getHours()) + ':' + pad(date.getMinutes()) + ':' + pad(date.getSeconds());
  }

@@PANELS@@
  // ------------------------------------------------------------ start

  function start() {
    state.selected = windowFromFragment() || state.windows[0] || '';
    if (config.replica === '') document.getElementById('replica-field').hidden = true;
    renderWindowButtons();
    drawEmpty(document.getElementById('curve'), 'waiting for the first answer from the agent\u2026');
    refresh().then(scheduleRefresh);
  }

  start();
})();
</script>
</body>
</html>
)kvwatch_page";

std::string EscapeHtml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// JSON for a <script type="application/json"> element: <, > and & appear only
// inside strings, where \u escapes mean the same, so "</script>" cannot occur.
std::string ScriptSafe(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  for (char c : json) {
    switch (c) {
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default: out += c;
    }
  }
  return out;
}

std::string ConfigJson(const PageOptions& options) {
  base::JsonWriter w;
  w.BeginObject();
  w.Key("title");
  w.String(options.title);
  w.Key("replica");
  w.String(options.replica);
  w.Key("refresh_seconds");
  w.Uint(static_cast<std::uint64_t>(std::max(1, options.refresh_seconds)));
  w.Key("windows");
  w.BeginArray();
  for (const std::string& name : options.windows) w.String(name);
  w.EndArray();
  w.Key("api_base");
  w.String(options.api_base);
  w.EndObject();
  return ScriptSafe(w.Take());
}

// Replaces each @@NAME@@ of `page` by its value, scanning left to right once.
std::string Fill(std::string_view page, const std::vector<std::pair<std::string_view, std::string>>& values) {
  constexpr std::string_view kMark = "@@";
  std::string out;
  out.reserve(page.size() + 1024);
  std::size_t pos = 0;
  while (true) {
    const std::size_t open = page.find(kMark, pos);
    const std::size_t close = open == std::string_view::npos ? open : page.find(kMark, open + kMark.size());
    if (close == std::string_view::npos) break;
    const std::string_view name = page.substr(open + kMark.size(), close - open - kMark.size());
    const auto it = std::find_if(values.begin(), values.end(), [&](const auto& v) { return v.first == name; });
    if (it == values.end()) {
      out.append(page.substr(pos, open + kMark.size() - pos));  // not a placeholder: keep as is
      pos = open + kMark.size();
      continue;
    }
    out.append(page.substr(pos, open - pos));
    out += it->second;
    pos = close + kMark.size();
  }
  out.append(page.substr(pos));
  return out;
}

}  // namespace

std::string RenderIndexPage(const PageOptions& options) {
  return Fill(kPageTemplate, {{"TITLE", EscapeHtml(options.title)},
                              {"REPLICA", EscapeHtml(options.replica)},
                              {"CONFIG", ConfigJson(options)},
                              {"PANELS", std::string(IndexPagePanelsScript())}});
}

}  // namespace kvwatch::agent
