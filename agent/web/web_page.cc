#include "agent/web/web_page.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "agent/render/text_format.h"
#include "base/json_writer.h"

namespace kvwatch::agent {
namespace {

// The page's markup. Placeholders @@NAME@@ are filled by RenderIndexPage in one
// pass (a value is never scanned again): TITLE and REPLICA HTML-escaped, CONFIG as
// JSON that cannot close the <script> element it sits in, STYLE the stylesheet
// (web_page_style.cc), SCRIPT the script (web_page_script.cc) with its own
// @@PANELS@@ already filled with the history and group panels' code
// (web_page_panels.cc).
constexpr std::string_view kPageTemplate = R"kvwatch_page(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>@@TITLE@@</title>
<style>@@STYLE@@</style>
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
  <section id="hybrid" hidden>
  <h2>Hybrid model: each layer group's own rule</h2>
  <p class="answers" data-panel="hybrid">How much memory does this hybrid model's cache need when each group keeps
  only what its layers attend to, and which layers hold it?</p>
  <table id="hybrid-working-set">
    <thead><tr><th>target</th><th>hybrid rule</th><th>all full attention</th><th>ratio</th></tr></thead>
    <tbody></tbody>
  </table>
  <p class="note" id="hybrid-knee"></p>
  <table id="hybrid-groups">
    <thead><tr><th>group</th><th>layers</th><th>window</th><th>bytes a page</th></tr></thead>
    <tbody></tbody>
  </table>
  <p class="note">The model's KV cache groups (full attention, sliding window, chunked local, linear) share one LRU
  cache of bytes; a prefix hits when every group holds what its layers need (docs/semantics.md section 8). The last
  columns: the bytes each group holds in a cache of the page-hit working set's size.</p>
  </section>
  <p class="note">Page hit x: the smallest cache that keeps x of the page hits an unlimited cache would get.
  Request coverage q: the smallest cache at which q of the requests keep all their reusable pages.
  "not converged": the target is not reached within the tracked range.</p>
</main>
<script type="application/json" id="kvwatch-config">@@CONFIG@@</script>
<script>@@SCRIPT@@</script>
</body>
</html>
)kvwatch_page";

// JSON for a <script type="application/json"> element: <, > and & appear only
// inside strings, where \u escapes mean the same, so "</script>" cannot occur.
std::string ScriptSafe(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  for (char c : json) {
    switch (c) {
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      default:
        out += c;
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
  // The script is filled first and then inserted as a value, so neither it nor the
  // panels' code is scanned for the page's placeholders.
  std::string script = Fill(IndexPageScript(), {{"PANELS", std::string(IndexPagePanelsScript())}});
  return Fill(kPageTemplate, {{"TITLE", EscapeMarkup(options.title)},
                              {"REPLICA", EscapeMarkup(options.replica)},
                              {"CONFIG", ConfigJson(options)},
                              {"STYLE", std::string(IndexPageStyle())},
                              {"SCRIPT", std::move(script)}});
}

}  // namespace kvwatch::agent
