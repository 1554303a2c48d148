// The page's stylesheet (web_page.h): the colours, the layout and the look of the
// curve and history charts and of the tables. RenderIndexPage puts it in the
// page's <style> element; it references only the page's own elements.
#include "agent/web/web_page.h"

namespace kvwatch::agent {

std::string_view IndexPageStyle() {
  return R"page_style(
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
table#hybrid-working-set, table#hybrid-groups { border-collapse: collapse; background: var(--panel); margin-bottom: 8px; }
table#hybrid-working-set th, table#hybrid-working-set td, table#hybrid-groups th, table#hybrid-groups td {
  padding: 4px 12px; border: 1px solid var(--line); text-align: right; }
table#hybrid-working-set thead th, table#hybrid-groups thead th { text-align: center; background: #eef2f6; }
table#hybrid-groups tbody th, table#hybrid-working-set tbody th { text-align: left; }
table#group-table { border-collapse: collapse; background: var(--panel); }
table#group-table th, table#group-table td { padding: 4px 12px; border: 1px solid var(--line); text-align: right; }
table#group-table thead th { text-align: center; background: #eef2f6; }
table#group-table td.group, table#group-table td.evictor, table#group-table tbody th { text-align: left;
  white-space: nowrap; }
)page_style";
}

}  // namespace kvwatch::agent
