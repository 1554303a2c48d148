// The page's script (web_page.h): reads its configuration from the
// #kvwatch-config element, fetches GET /api/v1/windows and GET /api/v1/curve,
// draws the window buttons, the curve chart, the working-set and canary tables
// and the status line, and refreshes them on a timer. Its helpers (fetchJson,
// svgElement, addTooltip, appendCell, formatCount, formatBytes, formatRatio,
// formatFraction, state) are shared with the history and group panels' code
// (web_page_panels.cc), which RenderIndexPage puts where the script says
// @@PANELS@@.
#include "agent/web/web_page.h"

namespace kvwatch::agent {

std::string_view IndexPageScript() {
  return R"page_script(
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
    renderHybrid(data);
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
           formatRatio(data.unlimited_page_hit_ratio) + '; knee ' + kneeText(data.knee) + loadText(data.kv_load);
  }

  // The KV load factor (arrival rate x mean KV token-seconds / KV capacity), when the window has one.
  function loadText(load) {
    if (!load || load.load_factor == null) return '';
    return '; KV load factor ' + formatRatio(load.load_factor);
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
)page_script";
}

}  // namespace kvwatch::agent
