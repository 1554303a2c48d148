// The page's history panel and tenant and class table (web_page.h): the part of
// the page's script that reads GET /api/v1/history and GET /api/v1/groups. It
// runs inside the page's script (web_page_script.cc; RenderIndexPage puts it at
// that script's @@PANELS@@), so it uses that script's helpers: fetchJson,
// svgElement, addTooltip, appendCell, formatCount, formatBytes, formatRatio,
// formatFraction, state.
#include "agent/web/web_page.h"

namespace kvwatch::agent {

std::string_view IndexPagePanelsScript() {
  return R"panels_script(
  // ------------------------------------------------------------ history panel

  const HISTORY_FRACTIONS = [0.9, 0.95];
  const HISTORY_CHART = {width: 960, height: 300, left: 72, right: 96, top: 20, bottom: 44};

  // The window's knee and working sets over time; hidden when the agent has no history.
  async function loadHistory(name) {
    const section = document.getElementById('history-panel');
    let data;
    try {
      data = await fetchJson('api/v1/history?window=' + encodeURIComponent(name));
    } catch (err) {
      section.hidden = true;
      return;
    }
    if (name !== state.selected) return;
    section.hidden = false;
    renderHistory(data || {});
  }

  function renderHistory(data) {
    const svg = document.getElementById('history');
    svg.replaceChildren();
    const points = (Array.isArray(data.points) ? data.points : []).filter((p) => Number.isFinite(p.time));
    const targets = Array.isArray(data.targets) ? data.targets : [];
    const perPage = Number(data.bytes_per_page) > 0 ? Number(data.bytes_per_page) : 0;
    const every = Number(data.interval_seconds) || 0;
    const series = HISTORY_FRACTIONS.map((f) => ({
      fraction: f,
      column: targets.findIndex((t) => t.target === 'page_hit' && Math.abs(t.fraction - f) < 1e-9),
    })).filter((s) => s.column >= 0);
    const note = document.getElementById('history-note');
    if (points.length < 2) {
      const text = 'collecting: ' + points.length + ' sample' + (points.length === 1 ? '' : 's') +
                   ' so far, one every ' + every + ' s';
      note.textContent = text;
      drawHistoryEmpty(svg, text);
      return;
    }
    const capacities = (data.capacity_pages_configured || []).filter((c) => Number.isFinite(c) && c > 0);
    const s = historyScale(points, series, capacities);
    drawHistoryAxes(svg, s, perPage);
    capacities.forEach((c) => {
      const y = s.y(c);
      const line = svgElement(svg, 'line', {class: 'history-capacity', x1: s.left, x2: s.right, y1: y, y2: y,
                                            'data-capacity-pages': c});
      addTooltip(line, 'configured cache: ' + formatCount(c) + ' pages');
      svgElement(svg, 'text', {class: 'history-capacity-label', x: s.left + 6, y: y - 5},
                 'cache ' + formatCount(c) + ' pages');
    });
    series.forEach((w) => {
      const path = historyPath(svg, s, points, (p) => (p.working_set_pages || [])[w.column],
                               'history-working-set');
      path.setAttribute('data-fraction', String(w.fraction));
      addTooltip(path, 'page-hit working set ' + formatFraction(w.fraction));
    });
    addTooltip(historyPath(svg, s, points, (p) => p.knee_pages, 'history-knee'), 'knee');
    note.textContent = historyNote(points, series, perPage, every);
  }

  function drawHistoryEmpty(svg, message) {
    const c = HISTORY_CHART;
    svgElement(svg, 'rect', {class: 'frame', x: c.left, y: c.top, width: c.width - c.left - c.right,
                             height: c.height - c.top - c.bottom});
    svgElement(svg, 'text', {class: 'empty-note', x: (c.left + c.width - c.right) / 2,
                             y: (c.top + c.height - c.bottom) / 2, 'text-anchor': 'middle'}, message);
  }

  // Linear time across; linear pages up, from 0 to a bit above everything drawn.
  function historyScale(points, series, capacities) {
    let most = 10;
    const widen = (v) => { if (Number.isFinite(v) && v > most) most = v; };
    points.forEach((p) => {
      widen(p.knee_pages);
      series.forEach((w) => widen((p.working_set_pages || [])[w.column]));
    });
    capacities.forEach(widen);
    const c = HISTORY_CHART;
    const t0 = points[0].time, t1 = points[points.length - 1].time;
    const yMax = niceCeiling(most * 1.1);
    const width = c.width - c.left - c.right, height = c.height - c.top - c.bottom;
    return {
      t0: t0, t1: t1, yMax: yMax,
      left: c.left, right: c.left + width, top: c.top, bottom: c.top + height,
      x: (t) => c.left + width * (t - t0) / Math.max(1e-9, t1 - t0),
      y: (v) => c.top + height * (1 - Math.min(1, Math.max(0, v / yMax))),
    };
  }

  // 1, 2 or 5 times a power of ten, at least v.
  function niceCeiling(v) {
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) {
      if (m * p >= v) return m * p;
    }
    return 10 * p;
  }

  function drawHistoryAxes(svg, s, perPage) {
    for (let k = 0; k <= 5; k++) {
      const v = s.yMax * k / 5;
      const y = s.y(v);
      svgElement(svg, 'line', {class: 'grid', x1: s.left, x2: s.right, y1: y, y2: y});
      svgElement(svg, 'text', {class: 'tick-label', x: s.left - 8, y: y + 4, 'text-anchor': 'end'}, formatCount(v));
      if (perPage > 0) {
        svgElement(svg, 'text', {class: 'tick-label bytes', x: s.right + 8, y: y + 4}, formatBytes(v * perPage));
      }
    }
    for (let k = 0; k <= 4; k++) {
      const t = s.t0 + (s.t1 - s.t0) * k / 4;
      const x = s.x(t);
      svgElement(svg, 'line', {class: 'grid', x1: x, x2: x, y1: s.top, y2: s.bottom});
      svgElement(svg, 'text', {class: 'tick-label', x: x, y: s.bottom + 16, 'text-anchor': 'middle'},
                 clockTime(new Date(t * 1000)));
    }
    svgElement(svg, 'rect', {class: 'frame', x: s.left, y: s.top, width: s.right - s.left, height: s.bottom - s.top});
    svgElement(svg, 'text', {class: 'axis-title', x: (s.left + s.right) / 2, y: s.bottom + 36,
                             'text-anchor': 'middle'}, 'time (when the agent sampled the window)');
    svgElement(svg, 'text', {class: 'axis-title', 'text-anchor': 'middle',
                             transform: 'translate(16 ' + (s.top + s.bottom) / 2 + ') rotate(-90)'}, 'pages');
    if (perPage > 0) {
      svgElement(svg, 'text', {class: 'axis-title', 'text-anchor': 'middle',
                               transform: 'translate(' + (s.right + 88) + ' ' + (s.top + s.bottom) / 2 +
                                          ') rotate(-90)'}, 'bytes per GPU rank');
    }
  }

  // A line through the points that have a value; a point without one (or of an
  // empty window, whose working sets are 0 only for want of requests) breaks it.
  function historyPath(svg, s, points, value, className) {
    const parts = [];
    let open = false;
    for (const p of points) {
      const v = Number(p.requests) > 0 ? value(p) : NaN;
      if (!Number.isFinite(v)) {
        open = false;
        continue;
      }
      parts.push((open ? 'L' : 'M') + s.x(p.time).toFixed(1) + ',' + s.y(v).toFixed(1));
      open = true;
    }
    return svgElement(svg, 'path', {class: className, d: parts.join(' ')});
  }

  function historyNote(points, series, perPage, every) {
    const last = points[points.length - 1];
    const size = (pages) => {
      if (!Number.isFinite(pages)) return 'not converged';
      return formatCount(pages) + ' pages' + (perPage > 0 ? ' (' + formatBytes(pages * perPage) + ')' : '');
    };
    const parts = series.map((w) => 'working set ' + formatFraction(w.fraction) + ' ' +
                                    size((last.working_set_pages || [])[w.column]));
    parts.push('knee ' + (Number.isFinite(last.knee_pages) ? size(last.knee_pages) : 'none yet'));
    return points.length + ' samples since ' + clockTime(new Date(points[0].time * 1000)) + ', one every ' + every +
           ' s; now: ' + parts.join(', ');
  }

  function clockTime(date) {
    const pad = (n) => String(n).padStart(2, '0');
    return pad(date.getHours()) + ':' + pad(date.getMinutes()) + ':' + pad(date.getSeconds());
  }

  // ------------------------------------------------------------ tenants and classes

  // Each tenant and class group in the one shared cache; hidden when the agent
  // keeps none (tenants off, a sampled engine) or the window has no requests.
  async function loadGroups(name) {
    const section = document.getElementById('groups');
    let data;
    try {
      data = await fetchJson('api/v1/groups?window=' + encodeURIComponent(name));
    } catch (err) {
      section.hidden = true;
      return;
    }
    if (name !== state.selected) return;
    renderGroups(data || {});
  }

  function renderGroups(data) {
    const section = document.getElementById('groups');
    const dimensions = data.dimensions || {};
    const capacities = Array.isArray(data.capacities) ? data.capacities : [];
    const capacity = capacities.length > 0 ? capacities[capacities.length - 1] : null;
    const at = capacity == null ? 'at the configured size (none)' : 'at ' + formatCount(capacity) + ' pages';
    document.getElementById('groups-hit-at').textContent = 'page hit ' + at;
    document.getElementById('groups-misses-at').textContent = 'capacity misses ' + at;
    const rows = [];
    for (const dimension of ['tenant', 'class']) {
      const groups = Array.isArray(dimensions[dimension]) ? dimensions[dimension] : [];
      groups.slice().sort((a, b) => b.requests - a.requests || String(a.group).localeCompare(String(b.group)))
          .forEach((g) => rows.push(groupRow(dimension, g, capacity)));
    }
    section.hidden = rows.length === 0;
    document.querySelector('#group-table tbody').replaceChildren(...rows);
  }

  function groupRow(dimension, g, capacity) {
    const row = document.createElement('tr');
    row.dataset.dimension = dimension;
    row.dataset.group = String(g.group);
    appendCell(row, 'th', dimension);
    appendCell(row, 'td', String(g.group), 'group');
    appendCell(row, 'td', formatCount(g.requests), 'requests');
    appendCell(row, 'td', formatRatio(g.unlimited_page_hit_ratio), 'unlimited');
    const cell = (g.at_capacities || []).find((c) => c.capacity_pages === capacity);
    const refs = Number(g.page_refs);
    appendCell(row, 'td', cell && refs > 0 ? formatRatio(cell.page_hits / refs) : '\u2014', 'hit-at');
    appendCell(row, 'td', cell ? formatCount(cell.capacity_misses) : '\u2014', 'misses-at');
    appendCell(row, 'td', cell ? topEvictor(cell.evicted_by) : '\u2014', 'evictor');
    return row;
  }

  // "tenant-1 (62%)": the group whose references pushed out most of this group's
  // attributed misses, and its share of them.
  function topEvictor(evictedBy) {
    const entries = Object.entries(evictedBy || {}).filter(([, v]) => Number(v) > 0);
    if (entries.length === 0) return '\u2014';
    const total = entries.reduce((sum, [, v]) => sum + Number(v), 0);
    const [name, pages] = entries.reduce((a, b) => (Number(b[1]) > Number(a[1]) ? b : a));
    return name + ' (' + Math.round(100 * Number(pages) / total) + '%)';
  }

  // ------------------------------------------------------------ hybrid model

  // The curve's "hybrid" object: working sets under the hybrid rule beside the
  // full-attention count, the knee, and per group its size and the bytes it holds
  // at each page-hit working set; hidden for a dense model.
  function renderHybrid(data) {
    const section = document.getElementById('hybrid');
    const h = data.hybrid;
    if (!h || typeof h !== 'object') {
      section.hidden = true;
      return;
    }
    section.hidden = false;
    const rows = [];
    (Array.isArray(h.working_set) ? h.working_set : []).forEach((e) => {
      const full = findTarget(data.working_set, e.target, e.fraction);
      const row = document.createElement('tr');
      row.dataset.target = e.target;
      row.dataset.fraction = String(e.fraction);
      appendCell(row, 'th', (e.target === 'page_hit' ? 'page hit ' : 'coverage ') + formatFraction(e.fraction));
      const hybrid = e.bytes != null ? formatBytes(e.bytes) : (e.capacity_pages == null ? 'not converged' : '\u2014');
      appendCell(row, 'td', hybrid, 'hybrid');
      const fullBytes = full && full.bytes != null ? Number(full.bytes) : null;
      appendCell(row, 'td', fullBytes != null ? formatBytes(fullBytes) : 'not converged', 'full');
      appendCell(row, 'td', e.bytes != null && fullBytes > 0 ? (Number(e.bytes) / fullBytes).toFixed(3) : '\u2014',
                 'ratio');
      rows.push(row);
    });
    document.querySelector('#hybrid-working-set tbody').replaceChildren(...rows);
    const knee = h.knee && h.knee.bytes != null ? h.knee : null;
    document.getElementById('hybrid-knee').textContent =
        knee ? 'hybrid knee: ' + formatBytes(knee.bytes) + ', page hit ratio ' + formatRatio(knee.page_hit_ratio)
             : 'hybrid knee: not converged';
    const held = (Array.isArray(h.group_bytes) ? h.group_bytes : []).filter((g) => g.target === 'page_hit');
    const head = document.querySelector('#hybrid-groups thead tr');
    head.replaceChildren();
    ['group', 'layers', 'window', 'bytes a page'].forEach((t) => appendCell(head, 'th', t));
    held.forEach((g) => appendCell(head, 'th', 'held at page hit ' + formatFraction(g.fraction) + ' (' +
                                                   formatBytes(g.capacity_bytes) + ')'));
    const groups = (Array.isArray(h.groups) ? h.groups : []).map((g, i) => {
      const row = document.createElement('tr');
      row.dataset.group = String(i);
      row.dataset.kind = String(g.kind);
      appendCell(row, 'th', String(g.kind), 'kind');
      appendCell(row, 'td', formatCount(g.layers), 'layers');
      appendCell(row, 'td', g.window_tokens != null ? formatCount(g.window_tokens) + ' tokens' : '\u2014', 'window');
      appendCell(row, 'td', formatBytes(g.page_bytes), 'page-bytes');
      held.forEach((r) => appendCell(row, 'td', formatBytes((r.bytes || [])[i]), 'held'));
      return row;
    });
    document.querySelector('#hybrid-groups tbody').replaceChildren(...groups);
  }
)panels_script";
}

}  // namespace kvwatch::agent
