// The metric catalog: every family kvwatch can export on /metrics, gathered from
// the components' own tables (base::MetricDef), and the metrics reference
// rendered from them. docs/metrics.md holds MetricsReferenceMarkdown() between
// its marker lines; `kvwatch metrics-reference` prints it, and
// tests/agent/runtime/metrics_reference_test.cc keeps the copy equal to it and checks
// that a real agent exports no family the catalog lacks.
//
// The catalog reads the tables; it declares nothing. A new family goes in its
// component's table (see docs/architecture.md, "Adding things"), and a new
// table gets a row in MetricTables().
//
// Thread safety: pure functions of constant data.
#ifndef KVWATCH_AGENT_METRIC_CATALOG_H_
#define KVWATCH_AGENT_METRIC_CATALOG_H_

#include <string>
#include <string_view>
#include <vector>

#include "base/metric_def.h"

namespace kvwatch::agent {

// One component's table.
struct MetricTable {
  std::string_view title;   // a heading: what the families are about
  std::string_view source;  // the file that declares the table
  base::MetricDefs defs;    // in the component's exposition order
};

// Every table, in the order /metrics exports them.
std::vector<MetricTable> MetricTables();

// The reference: per table a heading and a markdown table (metric, type,
// labels, meaning from the help text); ends with a newline.
std::string MetricsReferenceMarkdown();

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_METRIC_CATALOG_H_
