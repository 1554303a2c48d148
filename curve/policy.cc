// Policy names, parsing and the factory (curve/policy.h). Each policy lives in
// its own file: curve/policy_keyed.cc (lru, fifo, lfu, priority, belady),
// policy_workload_aware.cc, policy_s3fifo.cc, policy_arc.cc, and
// policy_lifetime.cc (sglang and vllm, which model running requests).
#include "curve/policy.h"

#include <algorithm>
#include <string>

#include "curve/policy_internal.h"

namespace kvwatch::curve {

namespace {

// Indexed by PolicyKind's value.
constexpr std::string_view kNames[] = {"lru",      "fifo",           "lfu",    "s3fifo", "sglang", "vllm",
                                       "priority", "workload-aware", "belady", "arc"};

}  // namespace

std::string_view PolicyName(PolicyKind kind) { return kNames[static_cast<int>(kind)]; }

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
    if (name.empty()) return base::Result<std::vector<PolicyKind>>::Error("empty policy name in '" + std::string(list) + "'");
    auto kind = ParsePolicyName(name);
    if (!kind.ok()) return base::Result<std::vector<PolicyKind>>::Error(kind.error());
    if (std::find(out.begin(), out.end(), kind.value()) == out.end()) out.push_back(kind.value());
    start = end + 1;
  }
  return out;
}

base::Result<std::unique_ptr<PolicyCache>> MakePolicyCache(const PolicyOptions& options) {
  using R = base::Result<std::unique_ptr<PolicyCache>>;
  if (options.capacity < 1) return R::Error("capacity: must be at least 1 page, got 0");
  if (options.capacity >= kBeyondTracked) return R::Error("capacity: too large");
  if (!(options.s3fifo_small_fraction > 0 && options.s3fifo_small_fraction < 1)) {
    return R::Error("s3fifo small fraction: must be in (0, 1)");
  }
  if (options.s3fifo_promotion_hits < 1 || options.s3fifo_promotion_hits > kMaxS3FifoPromotionHits) {
    return R::Error("s3fifo promotion hits: must be in 1.." + std::to_string(kMaxS3FifoPromotionHits) + ", got " +
                    std::to_string(options.s3fifo_promotion_hits));
  }
  std::unique_ptr<PolicyCache> cache;
  switch (options.kind) {
    case PolicyKind::kLru:
    case PolicyKind::kFifo:
    case PolicyKind::kLfu:
    case PolicyKind::kPriority:
    case PolicyKind::kBelady:
      cache = policy_internal::MakeKeyedCache(options);
      break;
    case PolicyKind::kWorkloadAware:
      cache = policy_internal::MakeWorkloadAwareCache(options);
      break;
    case PolicyKind::kS3Fifo:
      cache = policy_internal::MakeS3FifoCache(options);
      break;
    case PolicyKind::kArc:
      cache = policy_internal::MakeArcCache(options);
      break;
    case PolicyKind::kSglang:
      cache = policy_internal::MakeSglangCache(options);
      break;
    case PolicyKind::kVllm:
      cache = policy_internal::MakeVllmCache(options);
      break;
  }
  return cache;
}

}  // namespace kvwatch::curve
