// MetricDef: one metric family as a component declares it (name, type, help,
// label names), so each component lists its /metrics families in one table and
// the exposition is driven from those tables: agent/runtime/metrics.h renders
// them, collectors (collectors/engine_signals.h, the collectors' own tables)
// and the alert runner declare theirs with it.
//
// Thread safety: constant data.
#ifndef KVWATCH_BASE_METRIC_DEF_H_
#define KVWATCH_BASE_METRIC_DEF_H_

#include <string_view>
#include <vector>

namespace kvwatch::base {

enum class MetricType { kCounter, kGauge, kHistogram };

// The type's name in the text format's # TYPE line: "counter", "gauge", "histogram".
constexpr std::string_view MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kHistogram:
      return "histogram";
    case MetricType::kGauge:
      break;
  }
  return "gauge";
}

struct MetricDef {
  std::string_view name;
  MetricType type;
  std::string_view help;
  // The label names, in order, comma-separated ("collector,medium"); empty: none;
  // "*": each sample's own (an alert's labels).
  std::string_view labels = {};
};

// A component's table as a list, in the order the component exports it: what
// agent/runtime/metric_catalog.h gathers into the metrics reference.
using MetricDefs = std::vector<const MetricDef*>;

}  // namespace kvwatch::base

#endif  // KVWATCH_BASE_METRIC_DEF_H_
