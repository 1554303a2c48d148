// Helpers shared by the policy implementations (curve/policy*.cc). Not a public API.
#ifndef KVWATCH_CURVE_POLICY_INTERNAL_H_
#define KVWATCH_CURVE_POLICY_INTERNAL_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "curve/index_list.h"
#include "curve/policy.h"
#include "curve/policy_core.h"

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

// Prefetches the map entries of a request's first kPrefetchAhead pages, for a pass
// in prefix order that then calls PrefetchAhead(..., TouchOrder::kHeadFirst).
template <typename Map>
void PrefetchHead(const Map& map, std::span<const PageId> pages) {
  for (std::size_t i = 0; i < std::min(pages.size(), kPrefetchAhead); ++i) map.Prefetch(pages[i]);
}

// Whether a Find answered: PageMap's pointer, or the core's slot.
inline bool Found(const std::uint32_t* value) { return value != nullptr; }
inline bool Found(Slot slot) { return slot != kNoSlot; }

// LeadingResident over a map with Find and Prefetch (PageMap, a PolicyCore), the
// lookups prefetched ahead so that their cache misses overlap.
template <typename Map>
std::uint32_t LeadingResidentIn(const Map& map, std::span<const PageId> pages) {
  PrefetchHead(map, pages);
  std::uint32_t hits = 0;
  for (std::size_t i = 0; i < pages.size(); ++i) {
    PrefetchAhead(map, pages, i, TouchOrder::kHeadFirst);
    if (!Found(map.Find(pages[i]))) break;
    ++hits;
  }
  return hits;
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
// The policies whose replay cache drives the core make it in their order's file:
// CoreCache (curve/policy_core_cache.h) in MakeListCache (lru, fifo),
// MakeKeyedCache (lfu, belady), MakePriorityCache, MakeWorkloadAwareCache,
// MakeSieveCache, MakeArcCache, MakeS3FifoCache; the lifetime model
// (curve/policy_lifetime.h) in MakeSglangCache and MakeVllmCache
// (curve/policy_core_lists.cc).
std::unique_ptr<PolicyCache> MakeListCache(const PolicyOptions& options);
std::unique_ptr<PolicyCache> MakeSieveCache(const PolicyOptions& options);
std::unique_ptr<PolicyCache> MakeKeyedCache(const PolicyOptions& options);
std::unique_ptr<PolicyCache> MakePriorityCache(const PolicyOptions& options);
std::unique_ptr<PolicyCache> MakeWorkloadAwareCache(const PolicyOptions& options);
std::unique_ptr<PolicyCache> MakeS3FifoCache(const PolicyOptions& options);
std::unique_ptr<PolicyCache> MakeArcCache(const PolicyOptions& options);
std::unique_ptr<PolicyCache> MakeSglangCache(const PolicyOptions& options);
std::unique_ptr<PolicyCache> MakeVllmCache(const PolicyOptions& options);

// The eviction orders of the core (curve/policy_core.h), one factory per file,
// over the core's slot table. curve/policy_core_lists.cc: lru, vllm, fifo, sglang;
// policy_core_arc.cc; policy_core_s3fifo.cc; policy_core_keyed.cc: lfu, priority,
// belady and workload-aware; policy_core_sieve.cc.
using OrderFactory = std::unique_ptr<EvictionOrder> (*)(const CoreOptions& options, std::vector<CoreSlot>* slots);
std::unique_ptr<EvictionOrder> MakeListOrder(const CoreOptions& options, std::vector<CoreSlot>* slots);
std::unique_ptr<EvictionOrder> MakeArcOrder(const CoreOptions& options, std::vector<CoreSlot>* slots);
std::unique_ptr<EvictionOrder> MakeS3FifoOrder(const CoreOptions& options, std::vector<CoreSlot>* slots);
std::unique_ptr<EvictionOrder> MakeKeyedOrder(const CoreOptions& options, std::vector<CoreSlot>* slots);
std::unique_ptr<EvictionOrder> MakePriorityOrder(const CoreOptions& options, std::vector<CoreSlot>* slots);
std::unique_ptr<EvictionOrder> MakeWorkloadAwareOrder(const CoreOptions& options, std::vector<CoreSlot>* slots);
std::unique_ptr<EvictionOrder> MakeSieveOrder(const CoreOptions& options, std::vector<CoreSlot>* slots);

// The registry (curve/policy.cc, kPolicyTable): one row per policy. `cache` makes
// its replay/canary simulation (for a policy that lives in the core alone:
// NewCoreCache<its order>, curve/policy_core_cache.h); `order` makes its eviction
// order for the replica's core (NewOrder<its order>).
using CacheFactory = std::unique_ptr<PolicyCache> (*)(const PolicyOptions& options);
struct PolicyEntry {
  PolicyKind kind;
  std::string_view name;
  CacheFactory cache;
  OrderFactory order;
};
const PolicyEntry& Registered(PolicyKind kind);

// An order's ghosts (arc's B1 and B2, s3fifo's ghost FIFO), each in one of
// `lists` lists, oldest first; a ghost's number (its index here) is what the core's
// page map keeps for its page (EvictionOrder::Evicted). A number taken out of its
// list (Unlink) stays taken until Free, so that it is not given to another page
// while the map may still name it.
template <std::uint32_t kLists>
class GhostTable {
 public:
  static constexpr std::uint32_t kNone = kLists;  // the list of an unlinked ghost
  struct Ghost {
    PageId page = 0;
    std::uint32_t prev = kIndexNil;  // towards the oldest
    std::uint32_t next = kIndexNil;
    std::uint32_t list = kNone;
  };
  // A ghost for `page` at the back of `list`; its number.
  std::uint32_t Add(PageId page, std::uint32_t list) {
    std::uint32_t g;
    if (spare_.empty()) {
      g = static_cast<std::uint32_t>(ghosts_.size());
      ghosts_.emplace_back();
    } else {
      g = spare_.back();
      spare_.pop_back();
    }
    ghosts_[g] = Ghost{page, kIndexNil, kIndexNil, list};
    lists_[list].PushBack(ghosts_, g);
    return g;
  }
  void Unlink(std::uint32_t g) {
    lists_[ghosts_[g].list].Erase(ghosts_, g);
    ghosts_[g].list = kNone;
  }
  void Free(std::uint32_t g) { spare_.push_back(g); }
  // Whether g is in a list and names `page`.
  bool Holds(std::uint32_t g, PageId page) const {
    return g < ghosts_.size() && ghosts_[g].list != kNone && ghosts_[g].page == page;
  }
  std::uint32_t list(std::uint32_t g) const { return ghosts_[g].list; }
  PageId page(std::uint32_t g) const { return ghosts_[g].page; }
  std::uint32_t front(std::uint32_t list) const { return lists_[list].front(); }
  std::uint64_t size(std::uint32_t list) const { return lists_[list].size(); }
  // Calls fn(page) for each ghost of `list`, oldest first.
  template <typename Fn>
  void ForEach(std::uint32_t list, Fn&& fn) const {
    for (std::uint32_t g = lists_[list].front(); g != kIndexNil; g = ghosts_[g].next) fn(ghosts_[g].page);
  }
  std::size_t MemoryBytes() const {
    return ghosts_.capacity() * sizeof(Ghost) + spare_.capacity() * sizeof(std::uint32_t);
  }

 private:
  std::vector<Ghost> ghosts_;
  std::vector<std::uint32_t> spare_;  // numbers free for reuse
  IndexList lists_[kLists];
};

// A min-heap of (key, tie, slot, version) entries with lazy deletion: the caller's
// valid(entry) says whether an entry is live (typically: its slot is in the order
// with the same version). Ties on key go to the smaller tie, then the smaller slot.
class LazyHeap {
 public:
  struct Entry {
    std::uint64_t key;
    std::uint64_t tie;
    std::uint32_t block;
    std::uint32_t version;
  };
  void Push(const Entry& e) {
    heap_.push_back(e);
    std::push_heap(heap_.begin(), heap_.end(), Later);
  }
  // Pops entries until valid(entry) holds; returns kNoSlot when none does.
  template <typename Valid>
  std::uint32_t PopValid(Valid&& valid, Entry* popped = nullptr) {
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), Later);
      const Entry e = heap_.back();
      heap_.pop_back();
      if (valid(e)) {
        if (popped != nullptr) *popped = e;
        return e.block;
      }
    }
    return kNoSlot;
  }
  std::size_t MemoryBytes() const { return heap_.capacity() * sizeof(Entry); }
  // The top entry once invalid ones are popped off; null when none is valid.
  template <typename Valid>
  const Entry* TopValid(Valid&& valid) {
    while (!heap_.empty() && !valid(heap_.front())) {
      std::pop_heap(heap_.begin(), heap_.end(), Later);
      heap_.pop_back();
    }
    return heap_.empty() ? nullptr : &heap_.front();
  }
  // Calls fn(entry) for every entry, stale or not, in no particular order.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (const Entry& e : heap_) fn(e);
  }
  // Drops stale entries when they outnumber live ones.
  template <typename Valid>
  void MaybeCompact(std::uint64_t live, Valid&& valid) {
    if (heap_.size() <= 2 * live + 1024) return;
    std::erase_if(heap_, [&](const Entry& e) { return !valid(e); });
    std::make_heap(heap_.begin(), heap_.end(), Later);
  }

 private:
  static bool Later(const Entry& a, const Entry& b) {
    if (a.key != b.key) return a.key > b.key;
    return a.tie != b.tie ? a.tie > b.tie : a.block > b.block;
  }
  std::vector<Entry> heap_;
};

}  // namespace kvwatch::curve::policy_internal

#endif  // KVWATCH_CURVE_POLICY_INTERNAL_H_
