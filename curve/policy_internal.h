// Helpers shared by the policy implementations (curve/policy*.cc). Not a public API.
#ifndef KVWATCH_CURVE_POLICY_INTERNAL_H_
#define KVWATCH_CURVE_POLICY_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

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

// Hints the CPU to fetch the map entry of the page kPrefetchAhead references after
// position i in the touch order, so that its lookup does not wait on memory.
inline constexpr std::size_t kPrefetchAhead = 8;
template <typename Map>
void PrefetchAhead(const Map& map, std::span<const PageId> pages, std::size_t i, TouchOrder order) {
  if (order == TouchOrder::kTailFirst) {
    if (i >= kPrefetchAhead) map.Prefetch(pages[i - kPrefetchAhead]);
  } else if (i + kPrefetchAhead < pages.size()) {
    map.Prefetch(pages[i + kPrefetchAhead]);
  }
}

// A pool of slots of T reused after Release (indices stay small and stable).
template <typename T>
class SlotPool {
 public:
  // A slot: a released one when there is one, else a new default one.
  std::uint32_t Allocate() {
    if (free_.empty()) {
      items_.emplace_back();
      return static_cast<std::uint32_t>(items_.size() - 1);
    }
    const std::uint32_t index = free_.back();
    free_.pop_back();
    return index;
  }
  void Release(std::uint32_t index) { free_.push_back(index); }
  T& operator[](std::uint32_t index) { return items_[index]; }
  const T& operator[](std::uint32_t index) const { return items_[index]; }
  std::uint32_t size() const { return static_cast<std::uint32_t>(items_.size()); }
  std::size_t MemoryBytes() const { return items_.capacity() * sizeof(T) + free_.capacity() * sizeof(std::uint32_t); }

 private:
  std::vector<T> items_;
  std::vector<std::uint32_t> free_;
};

// The factories MakePolicyCache dispatches to, one per file (options checked).
std::unique_ptr<PolicyCache> MakeKeyedCache(const PolicyOptions& options);  // lru, fifo, lfu, priority, belady
std::unique_ptr<PolicyCache> MakeWorkloadAwareCache(const PolicyOptions& options);
std::unique_ptr<PolicyCache> MakeS3FifoCache(const PolicyOptions& options);
std::unique_ptr<PolicyCache> MakeArcCache(const PolicyOptions& options);
std::unique_ptr<PolicyCache> MakeSglangCache(const PolicyOptions& options);
std::unique_ptr<PolicyCache> MakeVllmCache(const PolicyOptions& options);

}  // namespace kvwatch::curve::policy_internal

#endif  // KVWATCH_CURVE_POLICY_INTERNAL_H_
