// What the agent's readers see: /metrics (exposition.h), the JSON API
// (api_routes.h) and the alert evaluation read an AgentSnapshot, copied under the
// agent's mutex (Agent::TakeSnapshot: cheap, bucket arrays, totals and counters),
// and build the reports, knees and text outside it. Also what every reader derives
// from a snapshot in the same way: a window's curve report, the bytes of a page,
// the alert detectors' inputs.
//
// Thread safety: plain values; the functions are stateless.
#ifndef KVWATCH_AGENT_RUNTIME_SNAPSHOT_H_
#define KVWATCH_AGENT_RUNTIME_SNAPSHOT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/runtime/hybrid_analysis.h"
#include "alerts/inputs.h"
#include "collectors/collector.h"
#include "curve/bucketed_curve.h"
#include "curve/group_accounting.h"
#include "curve/kv_load.h"
#include "curve/policy.h"
#include "curve/report.h"
#include "curve/sampled_engine.h"

namespace kvwatch::agent {

struct AgentOptions;  // agent.h

// A collector's stats, engine signals and samples, copied on the loop thread
// after a poll and published for the scrapes and the alerter.
struct CollectorCopy {
  std::string name;
  collectors::CollectorStats stats;
  collectors::EngineSignals signals;
  std::vector<collectors::MetricSample> samples;

  static CollectorCopy Of(const collectors::Collector& collector);
};

// The state file's counters (Agent::SaveState, Agent::LoadState).
struct StateCounters {
  std::uint64_t saves = 0;
  std::uint64_t errors = 0;
  double last_save_seconds = 0;         // duration of the last save
  std::string restore_result = "none";  // what start-up found: none, restored, rejected
  // False when start-up could not set a rejected state file aside: the agent then
  // runs without saving (it cannot replace the file), kvwatch_state_saving 0.
  bool saving = true;
  // False after a SIGHUP whose web config could not be applied (the previous one
  // stays); kvwatch_web_config_last_reload_successful.
  bool web_reload_ok = true;
};

// What a policy canary is for. The agent runs curve.engine_policy as the first of
// the canaries' policies (BuildAgentOptions, agent_command.cc, puts it first and
// leaves it out of the rest): its canaries are the engine's own policy, the
// baseline every other policy's gain is measured against at the same capacity.
enum class CanaryRole {
  kEnginePolicy,  // curve.engine_policy at one of curve.capacities
  kAlternative,   // another of curve.policies, compared with the engine policy's canary
};

// The analysis's part (Analysis::TakeSnapshot).
struct AnalysisSnapshot {
  bool sampled = false;
  curve::BucketedCurve lifetime;  // SHARDS-adj corrected when sampled; its bounds() are the analysis's
  std::uint64_t hit_capacity_sum = 0;
  std::uint64_t required_capacity_sum = 0;
  std::size_t tracked_pages = 0;
  double sample_rate = 1.0;
  std::size_t engine_memory_bytes = 0;
  std::uint64_t late_requests = 0;
  std::vector<curve::BucketedCurve> windows;  // when asked for: one summed curve per curve window
  struct Canary {
    curve::PolicyKind kind;
    std::uint64_t capacity = 0;
    CanaryRole role = CanaryRole::kAlternative;
    // Index in `canaries` of the engine policy's canary at this capacity (itself
    // for an engine-policy canary).
    std::size_t baseline = 0;
    curve::PolicyTotals lifetime;
    std::vector<curve::PolicyTotals> windows;  // per curve window
  };
  bool has_canaries = false;  // asked for and configured
  std::vector<Canary> canaries;
  std::size_t canary_memory_bytes = 0;
  // Tenants and classes (their windows when windows were asked for); nullopt without.
  std::optional<curve::GroupAccounting::View> groups;
  std::uint64_t clock_repairs = 0;  // restored clocks beyond curve.max_clock_skew
  // The KV load windows (curve/kv_load.h), per curve window, when windows were asked for.
  struct LoadWindow {
    curve::KvLoadSlice slice;
    double span_s = 0;  // the seconds its arrivals are spread over
  };
  std::vector<LoadWindow> load;
  // A hybrid model's curve (hybrid_analysis.h); nullopt for a dense model.
  std::optional<HybridSnapshot> hybrid;

  // Exported counts: weighted counts over the weight unit when sampled.
  double Count(std::uint64_t weighted) const {
    return sampled ? static_cast<double>(weighted) / static_cast<double>(curve::SampledEngine::kWeightUnit)
                   : static_cast<double>(weighted);
  }
};

// Everything a reader reads, as of one instant.
struct AgentSnapshot {
  AnalysisSnapshot analysis;
  std::vector<CollectorCopy> collectors;  // per collector, as of its last poll
  StateCounters state;
};

// The index of the curve window named `name` ("5m"), or nullopt.
std::optional<std::size_t> WindowIndex(const AgentOptions& options, const std::string& name);

// The report of a window curve (from a snapshot) with the configured capacities,
// targets, model and knee settings; `sampled`: counts are weighted, and are
// divided back to full-stream estimates.
curve::CurveReport WindowReport(const AgentOptions& options, const curve::BucketedCurve& window, bool sampled);

// page_tokens x bytes_per_token; nullopt without a model.
std::optional<double> BytesPerPage(const AgentOptions& options);

// What the alert detectors see at `time`: requests, knee and working set of the
// alert windows, the collectors' engine signals, the capacity misses.
// REQUIRES: options.alerts set; `s` has its windows.
alerts::AlertInputs AlertInputsOf(const AgentOptions& options, const AgentSnapshot& s, alerts::TimePoint time);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RUNTIME_SNAPSHOT_H_
