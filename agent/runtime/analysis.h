// Analysis: the state of the live analysis, everything the agent counts about the
// requests it is handed. One curve engine (the exact StackDistanceEngine, or a
// SampledEngine when engine.sample_rate < 1 or engine.sample_max_pages > 0: one
// continuous cache state), the lifetime curve (exported as cumulative histograms)
// with its histograms' sums, the windowed curves and their clock, the tenant and
// class accounting (tenants.enabled, exact engine only) and the policy canaries
// (curve.policies), the KV load windows (curve/kv_load.h), and for a hybrid model
// its curve under the hybrid rule (hybrid_analysis.h). It ingests requests,
// gives a snapshot of itself to the readers (snapshot.h), and writes itself into,
// and restores itself from, the state file's parts (state_file.h). What the numbers mean (sampling's weights, the
// clock) is described in agent.h.
//
// Thread safety: none but the canaries'. The agent owns one and serializes every
// call under its mutex (Agent::mu_ guards what the pointer points to); the
// canaries (CanaryStage, below) have locks of their own, so that the agent can
// settle them and readers can read them without that mutex.
#ifndef KVWATCH_AGENT_RUNTIME_ANALYSIS_H_
#define KVWATCH_AGENT_RUNTIME_ANALYSIS_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "agent/runtime/hybrid_analysis.h"
#include "agent/runtime/snapshot.h"
#include "agent/runtime/state_file.h"
#include "base/mutex.h"
#include "base/status.h"
#include "base/thread_annotations.h"
#include "curve/bucketed_curve.h"
#include "curve/group_accounting.h"
#include "curve/kv_load.h"
#include "curve/policy_canaries.h"
#include "curve/request.h"
#include "curve/sampled_engine.h"
#include "curve/stack_distance.h"

namespace kvwatch::agent {

struct AgentOptions;  // agent.h

// The engine samples (engine.sample_rate < 1 or engine.sample_max_pages > 0).
bool Sampled(const AgentOptions& options);
// Tenants and classes are counted: tenants.enabled and an exact engine.
bool TenantsOn(const AgentOptions& options);

// The policy canaries as the agent runs them. Analysis::Ingest, under the agent's
// mutex, queues each request (Add: the request's facts and, for the lru canaries
// read from the engine, their hits); the agent then simulates the queue after it
// has released that mutex (Settle, on the ingesting thread), under the canaries'
// own lock, and publishes what readers read: each canary's lifetime and window
// totals and the memory count, a small copy swapped in under a short lock of its
// own (view()). So a reader never waits for the canaries' simulations: it sees
// them as of the last settled batch (exact once the agent's Ingest has returned;
// a reader concurrent with ingestion may see them up to one batch behind the
// curves). What must see the canaries at the same request as the engine (a
// checkpoint, the window clock, a restore, a reset) runs under the agent's mutex
// and drains the queue first. Locks, in the order taken: the agent's mutex, mu_,
// view_mu_.
//
// Thread safety: every method takes the locks it needs.
class CanaryStage {
 public:
  // How often the canaries' memory (kvwatch_policy_canary_memory_bytes) is
  // recounted: counting walks every cached page of every canary (about 6 ms for
  // eight canaries of up to 100,000 pages), so readers read the last count.
  static constexpr double kMemoryEvery_s = 10;

  // What readers read: as AnalysisSnapshot holds it.
  struct View {
    std::vector<AnalysisSnapshot::Canary> canaries;
    // As of the last RecountMemory; nullopt until the agent's loop has counted it
    // (tests that ingest without the loop): a reader then counts (MemoryBytes).
    std::optional<std::size_t> memory_bytes;
  };

  // `settling`: a test hook (AgentOptions::canaries_settling), or empty.
  static base::Result<std::unique_ptr<CanaryStage>> Create(const curve::CanaryOptions& options,
                                                           std::function<void()> settling);

  const curve::CanaryOptions& options() const { return options_; }
  // Queues one request (PolicyCanaries::Add). Under the agent's mutex.
  void Add(const curve::Request& request, std::uint32_t unlimited_hits, double t,
           const curve::RequestOutcome* exact = nullptr) EXCLUDES(mu_, view_mu_);
  // Whether the queue is full: Settle before adding more (else Add settles it,
  // under the agent's mutex).
  bool Due() const EXCLUDES(mu_);
  // Simulates what is queued and publishes it. Without the agent's mutex.
  void Settle() EXCLUDES(mu_, view_mu_);
  // Drains the queue and moves the windows' clock. Under the agent's mutex.
  void Advance(double t) EXCLUDES(mu_, view_mu_);
  // Recounts the memory when the last count is kMemoryEvery_s old at wall time
  // `wall_now_s` (the agent's loop, every tick, without the agent's mutex).
  void RecountMemory(double wall_now_s) EXCLUDES(mu_, view_mu_);
  // The memory counted now (View::memory_bytes).
  std::size_t MemoryBytes() const EXCLUDES(mu_);
  std::shared_ptr<const View> view() const EXCLUDES(view_mu_);

  // PolicyCanaries' checkpoint, the queue drained first. Under the agent's mutex.
  void Serialize(std::vector<std::uint8_t>* out) EXCLUDES(mu_, view_mu_);
  // False: the canaries are unchanged (PolicyCanaries::Deserialize).
  bool Deserialize(std::span<const std::uint8_t>* in) EXCLUDES(mu_, view_mu_);
  // Starts the canaries afresh (empty, the memory to be recounted).
  void Reset() EXCLUDES(mu_, view_mu_);

 private:
  CanaryStage(const curve::CanaryOptions& options, std::function<void()> settling,
              std::unique_ptr<curve::PolicyCanaries> canaries);
  // Settles the queue when it holds requests, and then publishes.
  void SettleLocked() REQUIRES(mu_) EXCLUDES(view_mu_);
  // Swaps in a new view of the canaries as they are now.
  void Publish() REQUIRES(mu_) EXCLUDES(view_mu_);

  const curve::CanaryOptions options_;
  const std::function<void()> settling_;
  mutable base::Mutex mu_;
  std::unique_ptr<curve::PolicyCanaries> canaries_ GUARDED_BY(mu_);
  std::size_t queued_ GUARDED_BY(mu_) = 0;  // requests added since the last settle
  // canaries_->MemoryBytes() as of memory_wall_ (wall seconds; -inf: not counted).
  std::size_t memory_bytes_ GUARDED_BY(mu_) = 0;
  double memory_wall_ GUARDED_BY(mu_) = -std::numeric_limits<double>::infinity();
  mutable base::Mutex view_mu_;
  std::shared_ptr<const View> view_ GUARDED_BY(view_mu_);
};

class Analysis {
 public:
  // `options` must outlive the analysis (the agent's own). An error names the
  // setting (tenants.*, curve.policies).
  static base::Result<std::unique_ptr<Analysis>> Create(const AgentOptions& options);

  Analysis(const Analysis&) = delete;
  Analysis& operator=(const Analysis&) = delete;

  // One request, handed over at wall time `wall_now_s`: through the engine, into
  // the lifetime curve, every window, the groups and the canaries.
  void Ingest(const curve::Request& request, double wall_now_s);
  // Moves the windows' clock (curves, canaries, groups) to ClockNow, once the
  // first record has started it: records may carry their own time base, which the
  // wall clock must not overtake before any arrives.
  void Advance(double wall_now_s);
  // The windows' clock: record time when records carry it, advanced at wall speed
  // since the last record.
  double ClockNow(double wall_now_s) const;

  // A copy for the readers: the window curves when `windows`, the canaries'
  // totals when `canaries`.
  AnalysisSnapshot TakeSnapshot(bool windows, bool canaries) const;

  // Writes the configuration fingerprint, the engine, the curves (with their
  // clock), the groups and the canaries into `parts`.
  void Serialize(StateParts* parts) const;
  // Restores what Serialize wrote. Empty when restored; else why not (the
  // settings' fingerprint, the engine, the curves, the groups): the analysis is
  // then partly overwritten and must be Reset. Canaries that do not fit the
  // configured ones start cold (logged), the rest restored.
  std::string Restore(const StateParts& parts);
  // Forgets everything counted (a rejected state file).
  void Reset();
  // After a restore: restarts the windows (and the canaries) when their clock is
  // beyond curve.max_clock_skew ahead of `wall_now_s`; the lifetime counters stay.
  void RepairClock(double wall_now_s);

  // The canaries (curve.policies), or null: created with the analysis, never
  // replaced, and safe to use without the agent's mutex (CanaryStage).
  CanaryStage* canaries() const { return canaries_.get(); }

  // Requests counted since start (every request, sampled or not).
  std::uint64_t requests() const { return sampled_ ? all_requests_ : lifetime_.requests(); }
  std::size_t tracked_pages() const { return engine().tracked_pages(); }

 private:
  explicit Analysis(const AgentOptions& options);
  base::Status Init();
  // What must match for a saved state to mean the same thing.
  std::string ConfigFingerprint() const;
  // Empties the windows (curves and groups) and restarts their clock.
  void ResetWindows();
  // The lifetime curve, SHARDS-adj corrected when sampled.
  curve::BucketedCurve LifetimeCurve() const;
  const curve::StackDistanceEngine& engine() const { return sampled_ ? sampled_->engine() : engine_; }

  const AgentOptions& options_;
  // Log-spaced to engine.max_pages, plus curve.capacities; shared by every curve.
  std::vector<std::uint64_t> bounds_;
  curve::StackDistanceEngine engine_;              // exact mode (unused when sampled)
  std::unique_ptr<curve::SampledEngine> sampled_;  // sampled mode, else null
  std::uint64_t all_page_refs_ = 0;                // sampled mode: every page reference, sampled or not
  std::uint64_t all_requests_ = 0;                 // sampled mode: every request
  curve::RequestOutcome outcome_;
  curve::BucketedCurve lifetime_;
  std::unique_ptr<curve::WindowedCurves> windows_;
  std::unique_ptr<CanaryStage> canaries_;  // null without curve.policies
  // Tenants and classes (TenantsOn), else null; the engine then decomposes
  // distances by group.
  std::unique_ptr<curve::GroupAccounting> groups_;
  // The KV load factor's windows (every request, sampled or not). A state file
  // without them (an older build's) restores them empty.
  std::unique_ptr<curve::KvLoadWindows> load_;
  // A hybrid model's curve (options.hybrid, exact engine only), else null. A state
  // file without its part (an older build's, or a dense model's) or whose part
  // does not fit starts it empty.
  std::unique_ptr<HybridAnalysis> hybrid_;
  std::uint64_t hit_capacity_sum_ = 0;  // for the histograms' _sum
  std::uint64_t required_capacity_sum_ = 0;
  double last_record_time_ = -1;     // window clock at the last request
  double last_record_wall_ = 0;      // wall time of the last request
  std::uint64_t clock_repairs_ = 0;  // restored clocks beyond the skew
};

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RUNTIME_ANALYSIS_H_
