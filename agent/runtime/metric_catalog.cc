#include "agent/runtime/metric_catalog.h"

#include "agent/runtime/alert_runner.h"
#include "agent/runtime/exposition.h"
#include "agent/runtime/group_metrics.h"
#include "agent/runtime/hybrid_metrics.h"
#include "agent/runtime/load_metrics.h"
#include "agent/runtime/metrics.h"
#include "collectors/engine_log_collector.h"
#include "collectors/engine_metrics_collector.h"
#include "collectors/engine_signals.h"
#include "collectors/kv_events_collector.h"

namespace kvwatch::agent {
namespace {

template <std::size_t N>
base::MetricDefs Pointers(const base::MetricDef (&table)[N]) {
  base::MetricDefs defs;
  for (const base::MetricDef& def : table) defs.push_back(&def);
  return defs;
}

// A markdown table cell: '|' would end the cell, a newline the row.
std::string Cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

std::string LabelNames(const base::MetricDef& def) {
  if (def.labels.empty()) return "";
  if (def.labels == "*") {
    return "the alert's: `alertname`, `window`, `severity`, `replica`, `model`, configured extra labels";
  }
  std::string out;
  std::string_view rest = def.labels;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    out += (out.empty() ? "`" : ", `") + std::string(rest.substr(0, comma)) + "`";
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return out;
}

}  // namespace

std::vector<MetricTable> MetricTables() {
  return {
      {"The agent: curves, windows, engine, collectors, state", "agent/runtime/exposition.cc", AgentMetricDefs()},
      {"Tenants, classes, capacity misses and admission signals", "agent/runtime/group_metrics.cc",
       Pointers(kGroupMetrics)},
      {"KV load factor and output lengths per class", "agent/runtime/load_metrics.cc", Pointers(kLoadMetrics)},
      {"Hybrid models (`model` or `model_config` with KV cache groups)", "agent/runtime/hybrid_metrics.cc",
       HybridMetricDefs()},
      {"Eviction-policy canaries (`curve.policies`)", "agent/runtime/exposition.cc", CanaryMetricDefs()},
      {"Engine signals (every engine collector: KV events, engine logs, engine /metrics)",
       "collectors/engine_signals.cc", Pointers(collectors::kEngineSignalMetrics)},
      {"KV-events collector (`collectors.kv_events`)", "collectors/kv_events_collector.cc",
       collectors::KvEventsMetricDefs()},
      {"Engine-log collector (`collectors.engine_log`)", "collectors/engine_log_collector.cc",
       collectors::EngineLogMetricDefs()},
      {"Engine-metrics scraper (`collectors.engine_metrics`)", "collectors/engine_metrics_collector.cc",
       collectors::EngineMetricsScrapeMetricDefs()},
      {"Alerts and notifiers", "agent/runtime/alert_runner.cc", AlertRunnerMetricDefs()},
      {"The process", "agent/runtime/metrics.cc", ProcessMetricDefs()},
  };
}

std::string MetricsReferenceMarkdown() {
  std::string out;
  for (const MetricTable& table : MetricTables()) {
    if (!out.empty()) out += "\n";
    out += "### " + std::string(table.title) + "\n\nDeclared in `" + std::string(table.source) + "`.\n\n";
    out += "| metric | type | labels | meaning |\n|---|---|---|---|\n";
    for (const base::MetricDef* def : table.defs) {
      out += "| `" + std::string(def->name) + "` | " + std::string(base::MetricTypeName(def->type)) + " | " +
             LabelNames(*def) + " | " + Cell(def->help) + " |\n";
    }
  }
  return out;
}

}  // namespace kvwatch::agent
