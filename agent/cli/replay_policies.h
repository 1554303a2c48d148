// `kvwatch replay --policy`: every listed eviction policy simulated at every
// capacity over the stored trace, on all cores, and compared with the exact LRU
// curve. The simulations are curve/policy_replay.h's; this file adds the threads,
// the comparison (best policy per capacity and its gain over LRU) and renderings.
//
// Thread safety: RunPolicies runs its jobs on worker threads of its own and
// returns when all are done; the results are plain values.
#ifndef KVWATCH_AGENT_REPLAY_POLICIES_H_
#define KVWATCH_AGENT_REPLAY_POLICIES_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/json_writer.h"
#include "base/status.h"
#include "curve/curve_accumulator.h"
#include "curve/policy.h"
#include "curve/policy_replay.h"

namespace kvwatch::agent {

struct PolicyReplayOptions {
  std::vector<curve::PolicyKind> policies;
  std::vector<std::uint64_t> capacities;  // ascending, each >= 1
  curve::TouchOrder touch_order = curve::TouchOrder::kTailFirst;
  double coverage_share = 1.0;
  curve::LifetimeOptions lifetime;
  std::string priorities;                   // as given to --priority
  unsigned threads = 0;                     // 0: the hardware's
  std::uint32_t s3fifo_promotion_hits = 1;  // --s3fifo-promotion-hits
};

// The best online policy at one capacity (belady, which needs the future, is a
// reference line and never "best"), and what it is worth against the exact LRU
// curve: the LRU capacity that gives the same page hits, and the pages saved.
struct BestPolicy {
  std::uint64_t capacity_pages = 0;
  std::string policy;
  double page_hit_ratio = 0;
  double lru_page_hit_ratio = 0;
  std::optional<std::uint64_t> lru_capacity_for_same_hits;  // nullopt: LRU never gets there
  std::optional<std::int64_t> capacity_saved_pages;
};

struct PolicyReplayResult {
  std::vector<std::string> policies;
  std::vector<std::uint64_t> capacities;
  double decode_tokens_per_s = 0;
  std::uint64_t page_tokens = 16;
  std::string priorities;
  std::uint32_t s3fifo_promotion_hits = 1;
  // Policy-major: runs[p * capacities.size() + c].
  std::vector<curve::PolicyRunResult> runs;
  // Tenant labels (curve::SanitizeLabel, "none" for requests without a tenant;
  // names sharing a label merged), sorted, indexing each run's by_tenant; empty
  // when no request has a tenant.
  std::vector<std::string> tenant_names;
  std::vector<std::string> class_names;
  std::vector<BestPolicy> best;
  double seconds = 0;  // wall time of the simulations
  unsigned threads = 1;
};

// Runs every (policy, capacity). exact is the trace's LRU stack curve, for the
// gain. progress(references simulated, of total) is called from the calling
// thread about every 200 ms. An error names the option (--priority, --capacities).
base::Result<PolicyReplayResult> RunPolicies(curve::StoredTrace& trace, const PolicyReplayOptions& options,
                                             const curve::CurveAccumulator& exact,
                                             const std::function<void(std::uint64_t, std::uint64_t)>& progress);

// Puts the runs' per-tenant totals under the tenant labels (RunPolicies does).
void RelabelTenants(PolicyReplayResult* result);

// Renderings, appended to the replay's own.
void WritePoliciesJson(base::JsonWriter& w, const PolicyReplayResult& r);
std::string FormatPoliciesTable(const PolicyReplayResult& r);
// CSV rows in the replay CSV's columns plus policy, class and preemptions.
std::string FormatPoliciesCsvRows(const PolicyReplayResult& r);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_REPLAY_POLICIES_H_
