#include "agent/runtime/snapshot.h"

#include <cmath>

#include "agent/runtime/agent.h"
#include "agent/runtime/alert_runner.h"
#include "agent/runtime/group_metrics.h"
#include "agent/runtime/load_metrics.h"

namespace kvwatch::agent {

CollectorCopy CollectorCopy::Of(const collectors::Collector& c) {
  CollectorCopy copy{c.name(), c.stats(), c.engine_signals(), {}};
  c.AppendSamples(&copy.samples);
  return copy;
}

std::optional<std::size_t> WindowIndex(const AgentOptions& options, const std::string& name) {
  return options.curve.windows.Find(name);
}

curve::CurveReport WindowReport(const AgentOptions& options, const curve::BucketedCurve& window, bool sampled) {
  curve::ReportOptions ro;
  ro.capacities = options.curve.capacities;
  ro.page_hit_targets = options.curve.page_hit_targets;
  ro.coverage_targets = options.curve.coverage_targets;
  ro.page_tokens = options.page_tokens;
  ro.bytes_per_token = options.bytes_per_token;
  ro.knee_sensitivity = options.curve.knee_sensitivity;
  if (!sampled) return curve::BuildBucketedReport(window, ro, options.curve.knee_window_min_requests);
  // Sampled: counts are weighted; divide them back to full-stream estimates.
  const std::uint64_t unit = curve::SampledEngine::kWeightUnit;
  curve::CurveReport r = curve::BuildBucketedReport(window, ro, options.curve.knee_window_min_requests * unit);
  const double inv = 1.0 / static_cast<double>(unit);
  r.requests = static_cast<std::uint64_t>(std::llround(static_cast<double>(r.requests) * inv));
  r.page_refs *= inv;
  r.unlimited_page_hits *= inv;
  r.cold_misses *= inv;
  r.beyond_tracked *= inv;
  for (auto* points : {&r.points, &r.plot}) {
    for (curve::CurvePoint& p : *points) {
      p.page_hits *= inv;
      p.reused_tokens *= inv;
    }
  }
  return r;
}

std::optional<double> BytesPerPage(const AgentOptions& options) {
  if (!options.bytes_per_token) return std::nullopt;
  return *options.bytes_per_token * static_cast<double>(options.page_tokens);
}

alerts::AlertInputs AlertInputsOf(const AgentOptions& options, const AgentSnapshot& snapshot, alerts::TimePoint time) {
  const AlertInputSpec& spec = options.alerts->inputs;
  const AnalysisSnapshot& s = snapshot.analysis;
  AgentObservation o;
  auto observe = [&](std::optional<std::size_t> i) -> std::optional<WindowObservation> {
    if (!i || *i >= s.windows.size()) return std::nullopt;
    return ObserveWindow(s.windows[*i], WindowReport(options, s.windows[*i], s.sampled), spec);
  };
  o.short_window = observe(spec.short_window);
  o.baseline_window = observe(spec.baseline_window);
  for (const CollectorCopy& c : snapshot.collectors) o.engine.push_back(c.signals);
  o.tracked_pages_limit = static_cast<double>(options.engine.max_pages);
  o.bytes_per_page = BytesPerPage(options);
  o.capacity_misses = CapacityMissInputsOf(s.Count(s.lifetime.page_refs()),
                                           CapacityMissesOf(s.lifetime, options.curve.capacities, s.Count(1)),
                                           s.groups ? &*s.groups : nullptr);
  alerts::AlertInputs in = MakeAlertInputs(spec, o, time);
  in.kv_load = KvLoadSampleOf(options, snapshot, spec.kv_load_window);
  return in;
}

}  // namespace kvwatch::agent
