// `kvwatch replay --policy`: every listed eviction policy simulated at every
// capacity over the stored trace, on all cores, and compared with the exact LRU
// curve. The simulations are curve/policy_replay.h's; this file adds the threads
// and the comparison (best policy per capacity and its gain over LRU). The result
// and its renderings are agent/render/replay_policies_output.h's.
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

#include "agent/render/replay_policies_output.h"
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

// Runs every (policy, capacity). exact is the trace's LRU stack curve, for the
// gain. progress(references simulated, of total) is called from the calling
// thread about every 200 ms. An error names the option (--priority, --capacities).
base::Result<PolicyReplayResult> RunPolicies(curve::StoredTrace& trace, const PolicyReplayOptions& options,
                                             const curve::CurveAccumulator& exact,
                                             const std::function<void(std::uint64_t, std::uint64_t)>& progress);

// Puts the runs' per-tenant totals under the tenant labels (RunPolicies does).
void RelabelTenants(PolicyReplayResult* result);

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_REPLAY_POLICIES_H_
