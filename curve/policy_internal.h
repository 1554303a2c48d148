// Helpers shared by the policy implementations (curve/policy*.cc). Not a public API.
#ifndef KVWATCH_CURVE_POLICY_INTERNAL_H_
#define KVWATCH_CURVE_POLICY_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "curve/policy.h"

namespace kvwatch::curve::policy_internal {

// The prefix rule: how many leading pages are resident (stops at the first miss).
template <typename IsResident>
std::uint32_t LeadingResident(std::span<const PageId> pages, IsResident&& is_resident) {
  std::uint32_t hits = 0;
  for (PageId p : pages) {
    if (!is_resident(p)) break;
    ++hits;
  }
  return hits;
}

// Calls fn(i) for every page position in the touch order.
template <typename Fn>
void ForEachInTouchOrder(std::size_t n, TouchOrder order, Fn&& fn) {
  if (order == TouchOrder::kTailFirst) {
    for (std::size_t i = n; i-- > 0;) fn(i);
  } else {
    for (std::size_t i = 0; i < n; ++i) fn(i);
  }
}

std::unique_ptr<PolicyCache> MakeSglangCache(const PolicyOptions& options);
std::unique_ptr<PolicyCache> MakeVllmCache(const PolicyOptions& options);

}  // namespace kvwatch::curve::policy_internal

#endif  // KVWATCH_CURVE_POLICY_INTERNAL_H_
