// Policy names, parsing, the registry and the factory (curve/policy.h). Each
// policy's eviction order lives in the core (curve/policy_core.h), one file per
// family: curve/policy_core_lists.cc (lru, vllm, fifo, sglang),
// policy_core_keyed.cc (lfu, priority, belady, workload-aware),
// policy_core_arc.cc, policy_core_s3fifo.cc, policy_core_sieve.cc. Replay and the
// canaries drive that same order, made in the order's file: CoreCache
// (curve/policy_core_cache.h) for every policy but sglang and vllm, and for those
// two their lifetime model (curve/policy_lifetime.h), whose running requests hold
// their slots in the core. No policy has a replay simulation of its own.
#include "curve/policy.h"

#include <algorithm>
#include <string>

#include "curve/policy_core.h"
#include "curve/policy_internal.h"

namespace kvwatch::curve {

namespace policy_internal {

namespace {

// The registry: adding a policy is its file and one row here (and its value in
// PolicyKind and kAllPolicies, curve/policy.h). Indexed by PolicyKind's value.
constexpr PolicyEntry kPolicyTable[] = {
    {PolicyKind::kLru, "lru", MakeListCache, MakeListOrder},
    {PolicyKind::kFifo, "fifo", MakeListCache, MakeListOrder},
    {PolicyKind::kLfu, "lfu", MakeKeyedCache, MakeKeyedOrder},
    {PolicyKind::kS3Fifo, "s3fifo", MakeS3FifoCache, MakeS3FifoOrder},
    {PolicyKind::kSglang, "sglang", MakeSglangCache, MakeListOrder},
    {PolicyKind::kVllm, "vllm", MakeVllmCache, MakeListOrder},
    {PolicyKind::kPriority, "priority", MakePriorityCache, MakePriorityOrder},
    {PolicyKind::kWorkloadAware, "workload-aware", MakeWorkloadAwareCache, MakeWorkloadAwareOrder},
    {PolicyKind::kBelady, "belady", MakeKeyedCache, MakeKeyedOrder},
    {PolicyKind::kArc, "arc", MakeArcCache, MakeArcOrder},
    {PolicyKind::kSieve, "sieve", MakeSieveCache, MakeSieveOrder},
};
static_assert(std::size(kPolicyTable) == std::size(kAllPolicies), "every policy has one row");

constexpr bool TableIsIndexedByKind() {
  for (std::size_t i = 0; i < std::size(kPolicyTable); ++i) {
    if (static_cast<std::size_t>(kPolicyTable[i].kind) != i) return false;
  }
  return true;
}
static_assert(TableIsIndexedByKind(), "kPolicyTable rows in PolicyKind order");

}  // namespace

const PolicyEntry& Registered(PolicyKind kind) { return kPolicyTable[static_cast<int>(kind)]; }

std::unique_ptr<EvictionOrder> MakeEvictionOrder(const CoreOptions& options, std::vector<CoreSlot>* slots) {
  return Registered(options.kind).order(options, slots);
}

}  // namespace policy_internal

std::string_view PolicyName(PolicyKind kind) { return policy_internal::Registered(kind).name; }

base::Result<PolicyKind> ParsePolicyName(std::string_view name) {
  for (PolicyKind kind : kAllPolicies) {
    if (PolicyName(kind) == name) return kind;
  }
  std::string known;
  for (PolicyKind kind : kAllPolicies) {
    if (!known.empty()) known += ", ";
    known += PolicyName(kind);
  }
  return base::Result<PolicyKind>::Error("unknown policy '" + std::string(name) + "' (known: " + known + ")");
}

base::Result<std::vector<PolicyKind>> ParsePolicyList(std::string_view list) {
  std::vector<PolicyKind> out;
  if (list == "all") return std::vector<PolicyKind>(std::begin(kAllPolicies), std::end(kAllPolicies));
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = list.find(',', start);
    if (end == std::string_view::npos) end = list.size();
    std::string_view name = list.substr(start, end - start);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (name.empty())
      return base::Result<std::vector<PolicyKind>>::Error("empty policy name in '" + std::string(list) + "'");
    auto kind = ParsePolicyName(name);
    if (!kind.ok()) return base::Result<std::vector<PolicyKind>>::Error(kind.error());
    if (std::find(out.begin(), out.end(), kind.value()) == out.end()) out.push_back(kind.value());
    start = end + 1;
  }
  return out;
}

base::Status CheckPolicyOptions(const PolicyOptions& options) {
  using S = base::Status;
  if (options.capacity < 1) return S::Error("capacity: must be at least 1 page, got 0");
  if (options.capacity >= kBeyondTracked) return S::Error("capacity: too large");
  if (options.capacity > kGhostBit && OrderKeepsGhosts(options.kind)) {
    return S::Error("capacity: at most 2^31 pages for " + std::string(PolicyName(options.kind)));
  }
  if (!(options.s3fifo_small_fraction > 0 && options.s3fifo_small_fraction < 1)) {
    return S::Error("s3fifo small fraction: must be in (0, 1)");
  }
  if (options.s3fifo_promotion_hits < 1 || options.s3fifo_promotion_hits > kMaxS3FifoPromotionHits) {
    return S::Error("s3fifo promotion hits: must be in 1.." + std::to_string(kMaxS3FifoPromotionHits) + ", got " +
                    std::to_string(options.s3fifo_promotion_hits));
  }
  return S::Ok();
}

base::Result<std::unique_ptr<PolicyCache>> MakePolicyCache(const PolicyOptions& options) {
  using R = base::Result<std::unique_ptr<PolicyCache>>;
  if (base::Status s = CheckPolicyOptions(options); !s.ok()) return R::Error(s.error());
  return policy_internal::Registered(options.kind).cache(options);
}

}  // namespace kvwatch::curve
