// HybridAnalysis: the live agent's curve for a hybrid model (one whose preset or
// config.json has KV cache groups: sliding-window, chunked-local or linear layers
// beside full attention), under the hybrid hit rule of docs/semantics.md
// section 8 (curve/hybrid_engine.h).
//
// The agent runs it beside its dense engine on the same requests (from KV events,
// the full-attention group's requests; from traces, each record): one bounded
// HybridEngine (one continuous cache state), the lifetime curve and the window
// curves over log-spaced capacity buckets in units of unit_bytes (the smallest
// group page), with the configured capacities (curve.capacities, pages of the
// full-attention count) added as the units of the same bytes (rounded down to a
// whole unit), so the hit ratio there is exact. What is exported (kvwatch_hybrid_*, the JSON API's "hybrid"
// object, the page) is in bytes.
//
// The bound: the engine tracks at most max_bytes = engine.max_pages pages of the
// full-attention count (page_tokens x bytes_per_token each; at most 2^32 - 2
// units), the same bytes as the dense curve's range, and remembers
// engine.remembered_evictions x groups evicted items; beyond it, references are
// "beyond tracked" (kvwatch_hybrid_page_beyond_tracked_total), as the dense
// engine's are. A dense model, or a sampled engine (engine.sample_rate < 1 or
// engine.sample_max_pages > 0: the hybrid engine does not sample), never builds
// one: the agent's output is then exactly what it is without hybrid support.
//
// Thread safety: none; the Analysis owns it and the agent serializes every call.
#ifndef KVWATCH_AGENT_RUNTIME_HYBRID_ANALYSIS_H_
#define KVWATCH_AGENT_RUNTIME_HYBRID_ANALYSIS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "collectors/engine_signals.h"
#include "curve/bucketed_curve.h"
#include "curve/hybrid_engine.h"
#include "curve/request.h"
#include "curve/sizing.h"

namespace kvwatch::agent {

// The configured model's groups, resolved at start-up (agent_command.cc).
struct HybridModel {
  curve::HybridEngineOptions engine;  // with max_bytes and remembered_evictions set
  std::vector<curve::KvGroupSizing> groups;
};

// The hybrid model of a resolved spec, or nullopt for a model without groups.
// full_page_bytes: one page of the full-attention count (page_tokens x
// bytes_per_token per rank), which with max_pages gives the bound. Errors name
// the model input.
base::Result<std::optional<HybridModel>> HybridModelFor(const curve::ModelSpec& spec, int tensor_parallel,
                                                        std::uint64_t page_tokens, curve::TouchOrder touch_order,
                                                        std::uint64_t max_pages, std::uint64_t remembered_evictions,
                                                        double full_page_bytes);

// The most items the model's bounded engine tracks and remembers (what bounds
// its part of the state file): max_bytes over the smallest group page, plus the
// remembered evictions.
std::uint64_t HybridStateItems(const HybridModel& model);

// "" when the groups a KV-event stream announces (collectors::EngineSignals::
// kv_groups) agree with the model's, or nothing is announced; else what differs.
// They agree when the kinds announced (ignoring groups not announced yet) are the
// model's kinds, and each announced sliding window is the model's (vLLM splits a
// kind over several groups of equal layers: the count of groups is not compared,
// and it does not publish a chunk size, so an announced chunk of 0 is not one).
// model: nullptr for a dense model (one full-attention group).
std::string HybridGroupMismatch(const HybridModel* model, const std::vector<collectors::EngineKvGroup>& announced);

// What readers see (Analysis::TakeSnapshot).
struct HybridSnapshot {
  const HybridModel* model = nullptr;  // the agent's options'
  std::uint64_t unit_bytes = 0;
  std::uint64_t max_units = 0;
  std::vector<std::uint64_t> capacity_units;  // curve.capacities' bytes in units, in their order
  curve::BucketedCurve lifetime;
  std::vector<curve::BucketedCurve> windows;  // when asked for: one per curve window
  // Per window (when asked for), per working-set target reached: the bytes each
  // group holds in an LRU pool of that size, in the engine's current state.
  struct GroupBytes {
    std::string target;  // "page_hit" or "request_coverage"
    double fraction = 0;
    std::uint64_t capacity_units = 0;
    std::vector<std::uint64_t> bytes;  // per group
  };
  std::vector<std::vector<GroupBytes>> group_bytes;
  std::uint64_t tracked_items = 0;
  std::uint64_t tracked_bytes = 0;
  std::uint64_t evicted_items = 0;
  std::size_t memory_bytes = 0;
};

class HybridAnalysis {
 public:
  // model must outlive the analysis. capacities: curve.capacities (pages of the
  // full-attention count of full_page_bytes each).
  HybridAnalysis(const HybridModel& model, std::vector<double> windows_s, std::uint32_t buckets_per_octave,
                 const std::vector<std::uint64_t>& capacities, double full_page_bytes, double coverage_share);

  // One request at window time t.
  void Ingest(const curve::Request& request, double t);
  void Advance(double t) { windows_->Advance(t); }

  // windows: the window curves and the group bytes at their working sets for
  // these targets (the configured ones).
  HybridSnapshot TakeSnapshot(bool windows, const std::vector<double>& page_hit_targets,
                              const std::vector<double>& coverage_targets) const;

  // The settings' fingerprint (the model's groups and the bound), the engine,
  // the lifetime curve and the windows (with their clock, which moves with the
  // Analysis's window clock): the state file's "hybrid" part.
  void Serialize(std::vector<std::uint8_t>* out) const;
  // Restores what Serialize wrote: "" when restored; else why not (saved with
  // other settings, or malformed), and the caller Resets.
  std::string Restore(std::span<const std::uint8_t> in);
  void Reset();
  void ResetWindows();

 private:
  std::string Fingerprint() const;

  const HybridModel& model_;
  std::vector<double> windows_s_;
  double coverage_share_;
  std::vector<std::uint64_t> bounds_;
  std::vector<std::uint64_t> capacity_units_;
  curve::HybridEngine engine_;
  curve::RequestOutcome outcome_;
  curve::BucketedCurve lifetime_;
  std::unique_ptr<curve::WindowedCurves> windows_;
};

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RUNTIME_HYBRID_ANALYSIS_H_
