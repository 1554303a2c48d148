// What `kvwatch replay --policy` found (the policies' totals at every capacity,
// per tenant and class, and the best online policy per capacity) and its
// renderings, appended to the replay's own: the "policies" object of the JSON,
// the table's policy sections and the CSV's policy rows. agent/cli/replay_policies.h
// runs the simulations.
//
// Thread safety: pure functions over values.
#ifndef KVWATCH_AGENT_RENDER_REPLAY_POLICIES_OUTPUT_H_
#define KVWATCH_AGENT_RENDER_REPLAY_POLICIES_OUTPUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/json_writer.h"
#include "curve/policy_replay.h"

namespace kvwatch::agent {

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

void WritePoliciesJson(base::JsonWriter& w, const PolicyReplayResult& r);
std::string FormatPoliciesTable(const PolicyReplayResult& r);
// CSV rows in the replay CSV's columns plus policy, class and preemptions.
std::string FormatPoliciesCsvRows(const PolicyReplayResult& r);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RENDER_REPLAY_POLICIES_OUTPUT_H_
