#include "agent/runtime/hybrid_metrics.h"

#include <string>

#include "agent/render/text_format.h"
#include "agent/runtime/agent.h"

namespace kvwatch::agent {

namespace {

// Named kHybrid*: this file shares a unity batch with the dense curve's metrics.
using base::MetricType;

constexpr base::MetricDef kHybridGroupPageBytes{
    "kvwatch_hybrid_group_page_bytes", MetricType::kGauge,
    "A hybrid model's KV cache group (from model or model_config): bytes of one page of the group per GPU rank "
    "(a linear group: one recurrent state); window_tokens is the sliding window or chunk (0: none).",
    "group,kind,window_tokens"};
constexpr base::MetricDef kHybridWorkingSetBytes{
    "kvwatch_hybrid_working_set_bytes", MetricType::kGauge,
    "Working set in bytes per GPU rank under the hybrid hit rule (every group's retention rule, one LRU pool of "
    "bytes): the smallest bucket capacity reaching the target, as kvwatch_working_set_bytes. Absent when not "
    "converged within the tracked range.",
    "window,target,fraction"};
constexpr base::MetricDef kHybridKneeBytes{
    "kvwatch_hybrid_knee_bytes", MetricType::kGauge,
    "Knee (Kneedle) of the window's hybrid page hit ratio against capacity, in bytes "
    "per GPU rank.",
    "window"};
constexpr base::MetricDef kHybridPageHitRatio{
    "kvwatch_hybrid_page_hit_ratio", MetricType::kGauge,
    "Page hit ratio under the hybrid rule of a cache of the bytes of capacity_pages pages of the full-attention "
    "count (capacity_pages x kvwatch_bytes_per_page), over the window.",
    "window,capacity_pages"};
constexpr base::MetricDef kHybridCoverageRatio{
    "kvwatch_hybrid_request_coverage_ratio", MetricType::kGauge,
    "Fraction of the window's requests covered under the hybrid rule by a cache of the bytes of capacity_pages "
    "pages of the full-attention count.",
    "window,capacity_pages"};
constexpr base::MetricDef kHybridGroupBytes{
    "kvwatch_hybrid_group_bytes", MetricType::kGauge,
    "Bytes each KV cache group holds in an LRU pool of the working set's size (kvwatch_hybrid_working_set_bytes of "
    "the same window, target and fraction), in the engine's current state: which layers the memory goes to.",
    "window,target,fraction,group,kind"};
constexpr base::MetricDef kHybridBeyondTracked{
    "kvwatch_hybrid_page_beyond_tracked_total", MetricType::kCounter,
    "Page references with a group's item evicted from the hybrid engine's tracking (beyond "
    "kvwatch_hybrid_tracked_bytes_limit): a miss at every tracked capacity."};
constexpr base::MetricDef kHybridTrackedBytes{"kvwatch_hybrid_tracked_bytes", MetricType::kGauge,
                                              "Bytes of the items (group, page) the hybrid engine tracks now."};
constexpr base::MetricDef kHybridTrackedBytesLimit{
    "kvwatch_hybrid_tracked_bytes_limit", MetricType::kGauge,
    "The most bytes the hybrid engine tracks: engine.max_pages pages of the full-attention count; every hybrid "
    "number is exact up to it."};
constexpr base::MetricDef kHybridEvictions{"kvwatch_hybrid_tracking_evictions_total", MetricType::kCounter,
                                           "Items the hybrid engine evicted from tracking (least recent first) to stay "
                                           "within kvwatch_hybrid_tracked_bytes_limit."};
constexpr base::MetricDef kHybridEngineMemory{"kvwatch_hybrid_engine_memory_bytes", MetricType::kGauge,
                                              "Bytes held by the hybrid engine's data structures."};
constexpr base::MetricDef kHybridMismatch{
    "kvwatch_hybrid_model_mismatch", MetricType::kGauge,
    "1 when the KV cache groups the collector's engine announces (kind, sliding window) do not match the "
    "configured model's (the log says how, once), 0 when they match. Present for a hybrid model's KV-event "
    "collectors once their engine announces groups, and for any model when it announces a kind other than full "
    "attention.",
    "collector"};

}  // namespace

base::MetricDefs HybridMetricDefs() {
  return {&kHybridGroupPageBytes,    &kHybridWorkingSetBytes, &kHybridKneeBytes,     &kHybridPageHitRatio,
          &kHybridCoverageRatio,     &kHybridGroupBytes,      &kHybridBeyondTracked, &kHybridTrackedBytes,
          &kHybridTrackedBytesLimit, &kHybridEvictions,       &kHybridEngineMemory,  &kHybridMismatch};
}

curve::CurveReport HybridWindowReport(const AgentOptions& options, const HybridSnapshot& h,
                                      const curve::BucketedCurve& window) {
  curve::ReportOptions ro;
  ro.capacities = h.capacity_units;
  ro.page_hit_targets = options.curve.page_hit_targets;
  ro.coverage_targets = options.curve.coverage_targets;
  ro.page_tokens = options.page_tokens;
  ro.bytes_per_token = static_cast<double>(h.unit_bytes) / static_cast<double>(options.page_tokens);
  ro.knee_sensitivity = options.curve.knee_sensitivity;
  return curve::BuildBucketedReport(window, ro, options.curve.knee_window_min_requests);
}

void AppendHybridMetrics(MetricsBuilder& m, const AgentOptions& options, const AgentSnapshot& snapshot) {
  const HybridModel* model = options.hybrid ? &*options.hybrid : nullptr;
  for (const CollectorCopy& c : snapshot.collectors) {
    const std::string why = HybridGroupMismatch(model, c.signals.kv_groups);
    bool announced = false;
    for (const collectors::EngineKvGroup& g : c.signals.kv_groups) announced |= g.kind != "unannounced";
    if ((model != nullptr && announced) || !why.empty())
      m.Add(kHybridMismatch, why.empty() ? 0 : 1, {{"collector", c.name}});
  }
  if (!snapshot.analysis.hybrid) return;
  const HybridSnapshot& h = *snapshot.analysis.hybrid;
  const std::vector<curve::KvGroupSizing>& groups = h.model->groups;
  auto group_labels = [&](std::size_t g) -> Labels {
    return {{"group", std::to_string(g)}, {"kind", curve::KvGroupKindName(groups[g].spec.kind)}};
  };
  for (std::size_t g = 0; g < groups.size(); ++g) {
    Labels labels = group_labels(g);
    labels.emplace_back("window_tokens", std::to_string(groups[g].spec.window_tokens));
    m.Add(kHybridGroupPageBytes, static_cast<double>(groups[g].page_bytes), labels);
  }
  for (std::size_t i = 0; i < options.curve.windows.size() && i < h.windows.size(); ++i) {
    const std::string& w = options.curve.windows[i].name;
    const curve::CurveReport r = HybridWindowReport(options, h, h.windows[i]);
    for (const curve::WorkingSetEntry& e : r.working_set) {
      if (!e.capacity_pages || !e.bytes) continue;
      m.Add(kHybridWorkingSetBytes, *e.bytes,
            {{"window", w}, {"target", e.target}, {"fraction", FractionLabel(e.fraction)}});
    }
    if (r.knee_bytes) m.Add(kHybridKneeBytes, *r.knee_bytes, {{"window", w}});
    for (std::size_t k = 0; k < options.curve.capacities.size(); ++k) {
      const Labels labels = {{"window", w}, {"capacity_pages", std::to_string(options.curve.capacities[k])}};
      m.Add(kHybridPageHitRatio, h.windows[i].PageHitRatio(h.capacity_units[k]), labels);
      m.Add(kHybridCoverageRatio, h.windows[i].RequestCoverage(h.capacity_units[k]), labels);
    }
    for (const HybridSnapshot::GroupBytes& row : h.group_bytes[i]) {
      for (std::size_t g = 0; g < row.bytes.size(); ++g) {
        Labels labels = {{"window", w}, {"target", row.target}, {"fraction", FractionLabel(row.fraction)}};
        for (auto& l : group_labels(g)) labels.push_back(std::move(l));
        m.Add(kHybridGroupBytes, static_cast<double>(row.bytes[g]), labels);
      }
    }
  }
  m.Add(kHybridBeyondTracked, static_cast<double>(h.lifetime.beyond_tracked()));
  m.Add(kHybridTrackedBytes, static_cast<double>(h.tracked_bytes));
  m.Add(kHybridTrackedBytesLimit, static_cast<double>(h.model->engine.max_bytes));
  m.Add(kHybridEvictions, static_cast<double>(h.evicted_items));
  m.Add(kHybridEngineMemory, static_cast<double>(h.memory_bytes));
}

}  // namespace kvwatch::agent
