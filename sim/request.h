// One request of the simulated serving replica (sim/replica.h): what the replica
// reads of it (the pool's eviction order, curve/policy_core.h, gets its Referrer).
//
// Thread safety: a plain value.
#ifndef KVWATCH_SIM_REQUEST_H_
#define KVWATCH_SIM_REQUEST_H_

#include <cstdint>
#include <vector>

#include "curve/request.h"

namespace kvwatch::sim {

struct ReplicaRequest {
  double arrival_s = 0;              // sorted ascending in the input
  std::vector<curve::PageId> pages;  // prompt pages in prefix order (curve/request.h)
  std::uint32_t prompt_tokens = 0;   // >= 1; pages.size() == ceil(prompt_tokens / block_tokens) normally
  std::uint32_t output_tokens = 1;   // 0: prefill only (sim/replica.h)
  std::uint32_t tier = 0;            // index into ReplicaOptions::tiers (0 when there are none)
  std::uint32_t class_id = 0;        // reserve-quantile learns per class; < 64
  std::int32_t priority = 0;         // higher first with QueueOrder::kPriority
};

inline constexpr std::uint32_t kMaxClasses = 64;

}  // namespace kvwatch::sim

#endif  // KVWATCH_SIM_REQUEST_H_
