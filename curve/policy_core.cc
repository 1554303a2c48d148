// The policy core (curve/policy_core.h): slots, holds and the page map; belady's
// oracle; PolicyCore (the core over the registry's order); the factory, which
// reads the registry (curve/policy.cc).
#include "curve/policy_core.h"

#include <algorithm>
#include <string>
#include <vector>

#include "base/byte_io.h"
#include "curve/policy_core_serialize.h"
#include "curve/policy_internal.h"

namespace kvwatch::curve {

NextUseOracle::NextUseOracle(std::span<const std::span<const PageId>> requests) {
  ends_.reserve(requests.size());
  std::uint64_t n = 0;
  for (std::span<const PageId> pages : requests) {
    n += pages.size();
    ends_.push_back(n);
  }
  std::vector<std::uint32_t> count;
  for (std::span<const PageId> pages : requests) {
    for (PageId p : pages) {
      if (std::uint32_t* slot = slots_.Find(p)) {
        ++count[*slot];
      } else {
        slots_.Insert(p, static_cast<std::uint32_t>(count.size()));
        count.push_back(1);
      }
    }
  }
  start_.assign(count.size() + 1, 0);
  for (std::size_t s = 0; s < count.size(); ++s) start_[s + 1] = start_[s] + count[s];
  uses_.resize(n);
  std::vector<std::uint64_t> fill(start_.begin(), start_.end() - 1);
  std::uint64_t begin = 0;
  for (std::size_t r = 0; r < requests.size(); ++r) {
    const std::span<const PageId> pages = requests[r];
    for (std::size_t k = pages.size(); k-- > 0;) {  // tail first: ascending touch numbers
      const std::uint32_t slot = *slots_.Find(pages[k]);
      uses_[fill[slot]++] = begin + (pages.size() - 1 - k);
    }
    begin = ends_[r];
  }
}

std::uint64_t NextUseOracle::After(PageId page, std::uint32_t r) const {
  const std::uint32_t* slot = slots_.Find(page);
  if (slot == nullptr || r >= ends_.size()) return kNeverUsed;
  const auto first = uses_.begin() + static_cast<std::ptrdiff_t>(start_[*slot]);
  const auto last = uses_.begin() + static_cast<std::ptrdiff_t>(start_[*slot + 1]);
  const auto it = std::lower_bound(first, last, ends_[r]);
  return it == last ? kNeverUsed : *it;
}

template class BasicPolicyCore<EvictionOrder>;

bool HasCore(PolicyKind kind) { return policy_internal::Registered(kind).order != nullptr; }

bool OrderKeepsGhosts(PolicyKind kind) {
  std::vector<CoreSlot> slots;
  const auto order = policy_internal::MakeEvictionOrder(CoreOptions{kind, 1, nullptr}, &slots);
  return order != nullptr && order->KeepsGhosts();
}

base::Result<std::unique_ptr<PolicyCore>> MakePolicyCore(const CoreOptions& options) {
  using R = base::Result<std::unique_ptr<PolicyCore>>;
  if (options.slots < 1) return R::Error("slots: must be at least 1, got 0");
  if (options.slots >= kNoSlot) return R::Error("slots: must be below 2^32 - 1");
  if (options.slots > kGhostBit && OrderKeepsGhosts(options.kind)) {
    return R::Error("slots: at most 2^31 for " + std::string(PolicyName(options.kind)));
  }
  if (options.kind == PolicyKind::kBelady && options.future == nullptr) {
    return R::Error("belady: needs the input's future (CoreOptions::future)");
  }
  if (!HasCore(options.kind)) {
    return R::Error("policy '" + std::string(PolicyName(options.kind)) + "' has no eviction order in the core");
  }
  return std::make_unique<PolicyCore>(options);
}

}  // namespace kvwatch::curve
