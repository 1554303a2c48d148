// The tenants' and classes' metric families (issue 11): the one table of their
// names, help texts and labels, and the functions that render a snapshot of the
// agent's GroupAccounting (curve/group_accounting.h) into them, plus the
// capacity-miss counter of the whole stream and the running-KV gauge.
//
// Labels: dimension is "tenant" or "class"; group (victim, evictor) is the
// folder's label of a group (the top K names, sanitized, and "other"; requests
// without a tenant are "none"); capacity_pages is each configured capacity;
// window a curve window's name. Groups that never had a label are not exported,
// nor evictor cells that are zero. Series count with the defaults (K = 8 tenants
// and 8 classes, so at most 9 + 9 groups), C configured capacities and W windows:
//   requests, page references:                2 x 18
//   page hits, capacity misses, unattributed: 3 x 18 x C
//   evicted_by (non-zero cells only):         at most 2 x 81 x C
//   window requests / hit ratio / coverage:   18 x W + 2 x 18 x C x W
//   isolated (tenants.isolated):              9 x C + 9 x C x W
//   footprint histogram (with a model):       9 x 24 (21 bounds, +Inf, _sum, _count)
// e.g. 2 capacities and 3 windows: at most 36 + 216 + 324 + 270 + 216 = 1062
// (typically far fewer evictor cells).
//
// Thread safety: stateless functions over const data.
#ifndef KVWATCH_AGENT_RUNTIME_GROUP_METRICS_H_
#define KVWATCH_AGENT_RUNTIME_GROUP_METRICS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/runtime/metrics.h"
#include "alerts/inputs.h"
#include "base/metric_def.h"
#include "collectors/engine_signals.h"
#include "curve/bucketed_curve.h"
#include "curve/group_accounting.h"

namespace kvwatch::agent {

// Every family of this file, in exposition order.
extern const base::MetricDef kGroupMetrics[15];

// Footprint histogram bounds: 2^20 .. 2^40 bytes (1 MiB .. 1 TiB).
inline constexpr std::uint32_t kFootprintLowBucket = 20;
inline constexpr std::uint32_t kFootprintHighBucket = 40;

// kvwatch_capacity_misses_total{capacity_pages} of the whole stream: page
// references that would hit in an unlimited cache but miss in an LRU cache of C
// pages, read off a lifetime curve whose bounds include every C. `scale` turns
// weighted counts into exported ones (1 when exact).
struct CapacityMisses {
  std::uint64_t capacity_pages = 0;
  double misses = 0;
};
std::vector<CapacityMisses> CapacityMissesOf(const curve::BucketedCurve& lifetime,
                                             const std::vector<std::uint64_t>& capacities, double scale);
void AppendCapacityMisses(MetricsBuilder& m, const std::vector<CapacityMisses>& misses);

// The per-group families. window_names: the curve windows, in the view's order.
void AppendGroupMetrics(MetricsBuilder& m, const curve::GroupAccounting::View& view,
                        const std::vector<std::string>& window_names);

// kvwatch_running_kv_bytes{collector}: an engine's KV-cache usage x its capacity
// in pages x bytes per page; nothing when one of them is unknown.
void AppendRunningKv(MetricsBuilder& m, const std::string& collector, const collectors::EngineSignals& signals,
                     std::optional<double> bytes_per_page);

// The capacity-miss alert's inputs: the whole stream's references and misses, and
// the evictor matrix of the view's lifetime counters (nullptr: no groups).
alerts::CapacityMissInputs CapacityMissInputsOf(double page_references, const std::vector<CapacityMisses>& misses,
                                                const curve::GroupAccounting::View* view);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RUNTIME_GROUP_METRICS_H_
