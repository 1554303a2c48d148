// The live agent's web page: one self-contained HTML document (inline CSS and
// JavaScript, no external resources) that the agent serves at `/`. In the browser
// it fetches `{api}/api/v1/windows` and `{api}/api/v1/curve?window=NAME` (the JSON
// of docs/semantics.md section 7 plus `window`, `plot` and
// `capacity_pages_configured`), draws the capacity-to-hit-rate curves as an SVG
// (log capacity axis in pages, bytes on a second axis when known; page hit ratio
// and request coverage as step lines; the unlimited ratio dashed; the knee, the
// page-hit working sets at 0.9/0.95/0.99 and the configured cache sizes marked) and
// a table of the working sets, and redraws them in place every refresh interval.
// A target or knee that is null is "not converged" and said in words. When the API
// cannot be reached or answers with an error, the status line says so and the last
// good curve stays, dimmed.
//
// After each curve it also fetches `{api}/api/v1/history?window=NAME` (the page-hit
// working sets 0.9 and 0.95 and the knee over time, against the configured sizes)
// and `{api}/api/v1/groups?window=NAME` (a row per tenant and request class: its
// requests, page hit ratio unlimited and at the largest configured size, capacity
// misses there and who evicted them); each panel is hidden while its path does not
// answer (an agent without tenants, an older agent). The live canaries' table comes
// with the curve. Each panel says in one line (p.answers) what question it answers.
//
// Stable hooks for tests and scripts: svg#curve, path.page-hit-ratio,
// path.request-coverage, line.unlimited, line.knee (data-capacity-pages),
// circle.target (data-fraction, data-capacity-pages), line.configured,
// table#working-set, #status (data-state = loading | ok | error), #updated,
// #empty, nav#windows button.window (data-window, aria-pressed);
// p.answers (data-panel = curve | working-set | history | groups | policies | hybrid);
// section#history-panel, svg#history, path.history-working-set (data-fraction),
// path.history-knee, line.history-capacity (data-capacity-pages), #history-note;
// section#groups, table#group-table tr (data-dimension, data-group) with cells
// td.group, .requests, .unlimited, .hit-at, .misses-at, .evictor;
// section#policies, table#policy-table tr (data-policy, data-capacity);
// section#hybrid (a hybrid model's curve, the "hybrid" object of the curve's
// answer; hidden without it), table#hybrid-working-set tr (data-target,
// data-fraction) with td.hybrid, td.full, td.ratio; #hybrid-knee;
// table#hybrid-groups tr (data-group, data-kind) with td.layers, .window,
// .page-bytes, .held (one per page-hit working set).
//
// Thread safety: RenderIndexPage is a pure function of its argument.
#ifndef KVWATCH_AGENT_WEB_PAGE_H_
#define KVWATCH_AGENT_WEB_PAGE_H_

#include <string>
#include <string_view>
#include <vector>

namespace kvwatch::agent {

struct PageOptions {
  // Page title and heading. Default: "kvwatch".
  std::string title = "kvwatch";
  // The replica this agent watches, shown in the header; empty shows nothing.
  std::string replica;
  // Seconds between refreshes; values below 1 are treated as 1. Default: 10.
  int refresh_seconds = 10;
  // Window names to offer before /api/v1/windows answers (that answer replaces
  // them). The first is selected unless the URL fragment says `#window=NAME`.
  std::vector<std::string> windows;
  // Prefix of the API paths. Empty (the default): relative to the page's URL, so
  // the page works behind a reverse proxy's path prefix when served at a path
  // ending in "/". "/" or "/prefix": absolute paths; a full origin also works.
  std::string api_base;
};

// The HTML document. Title, replica and window names are escaped (HTML in the
// markup; JSON with <, > and & as \u escapes in the embedded configuration).
std::string RenderIndexPage(const PageOptions& options);

// The parts RenderIndexPage assembles the page from (web_page.cc keeps the
// markup): the stylesheet (web_page_style.cc); the script (web_page_script.cc),
// with a @@PANELS@@ placeholder; and the history and group panels' part of the
// script (web_page_panels.cc), which RenderIndexPage puts at that placeholder.
std::string_view IndexPageStyle();
std::string_view IndexPageScript();
std::string_view IndexPagePanelsScript();

// Content-Type to serve the page with.
inline constexpr char kIndexPageContentType[] = "text/html; charset=utf-8";

// A Content-Security-Policy header the page works under: inline script and style
// only, fetches to the page's own origin only, nothing else loaded.
inline constexpr char kIndexPageContentSecurityPolicy[] =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "connect-src 'self'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_WEB_PAGE_H_
