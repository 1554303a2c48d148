// The replica's evictors that order free cached blocks by a key taken from the
// requests that used them (curve/policy_core.h): lfu, priority and belady on a lazy heap,
// and workload-aware on one list per request category. Each mirrors curve/'s policy
// of the same name (curve/policy_keyed.cc, curve/policy_workload_aware.cc); where
// curve says "reference" the replica has a request taking a block (computing its
// page: Filled, or holding it: Hit), and where curve says "least recently
// referenced" for ties the replica has "released longest ago", as its lru does.
//
//   lfu       LFU-DA: the key of a block is F + L, F its references since its page
//             was computed (Block::key), L the cache age (the key of the last block
//             evicted) when the block was last released; the smallest key first,
//             ties to the one released longest ago.
//   priority  the retention priority of the request that referenced the block last
//             (ReplicaRequest::priority, from --priority); the lowest first, the one
//             released longest ago within a level.
//   belady    the block whose page's next use is farthest first (never used again:
//             first of all). The next use is read from the input, which the replica
//             has whole: after a reference by request r, the first reference to the
//             page by a request after r in arrival order, numbered as curve numbers
//             references (every request's pages in tail-first touch order, requests
//             in arrival order), so ties break as in curve. A block referenced by
//             several requests keeps the latest next use. An oracle bound over
//             arrival order: the replica's own schedule (preemptions, queue order)
//             may reference pages in another order.
//   workload-aware  Wang et al. (ATC 2025), as curve/policy_workload_aware.cc: per
//             category c (the request's class id), p_c = (reuses + 1) / (references
//             + 2) and mu_c = (reuse intervals + 1) / (reuses + 1), intervals and
//             ages in requests (the request clock: one past the latest arrival index
//             that referenced a block); a reuse is a reference to a cached block or
//             to one among the last pool-size blocks evicted (a ghost list). The
//             free block with the smallest log p_c - age / mu_c is evicted; within a
//             category the one released longest ago (one list per category in
//             release order, so an eviction compares 64 heads), ties between
//             categories to the older reference, then the lower category.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "curve/index_list.h"
#include "curve/page_map.h"
#include "curve/policy_core.h"
#include "curve/policy_internal.h"
#include "curve/reuse_ghosts.h"

namespace kvwatch::curve::policy_internal {

namespace {

class KeyedOrder final : public EvictionOrder {
 public:
  KeyedOrder(PolicyKind kind, std::vector<CoreSlot>* blocks, const NextUseOracle* future)
      : kind_(kind), blocks_(*blocks), next_uses_(future) {}

  void Filled(std::uint32_t b) override {
    blocks_[b].key = 0;
    Reference(b);
  }
  void Hit(std::uint32_t b) override { Reference(b); }

  void Add(std::uint32_t b) override {
    CoreSlot& x = blocks_[b];
    x.in_order = true;
    ++size_;
    std::uint64_t key = x.key;
    if (kind_ == PolicyKind::kLfu) key += age_;
    if (kind_ == PolicyKind::kBelady) key = kNeverUsed - x.key;
    heap_.Push({key, ++seq_, b, x.version});
    heap_.MaybeCompact(size_, [&](const LazyHeap::Entry& e) { return Valid(e); });
  }
  void Remove(std::uint32_t b) override {
    CoreSlot& x = blocks_[b];
    x.in_order = false;
    ++x.version;
    --size_;
  }
  std::uint32_t Pop() override {
    LazyHeap::Entry e{};
    const std::uint32_t b = heap_.PopValid([&](const LazyHeap::Entry& entry) { return Valid(entry); }, &e);
    if (kind_ == PolicyKind::kLfu) age_ = e.key;
    Remove(b);
    return b;
  }
  std::uint64_t size() const override { return size_; }

 private:
  void Reference(std::uint32_t b) {
    CoreSlot& x = blocks_[b];
    switch (kind_) {
      case PolicyKind::kLfu:
        ++x.key;
        break;
      case PolicyKind::kPriority:
        x.key = static_cast<std::uint64_t>(static_cast<std::int64_t>(referrer().priority) + (std::int64_t{1} << 32));
        break;
      case PolicyKind::kBelady: {
        // The next use after the latest request (by arrival) that referenced it.
        // (next uses grow with the request: the largest one is that request's).
        x.key = std::max(x.key, next_uses_->After(x.page, referrer().request));
        break;
      }
      default:
        break;
    }
  }
  bool Valid(const LazyHeap::Entry& e) const {
    const CoreSlot& x = blocks_[e.block];
    return x.in_order && x.version == e.version;
  }

  PolicyKind kind_;
  std::vector<CoreSlot>& blocks_;
  const NextUseOracle* next_uses_;  // belady
  LazyHeap heap_;                   // key, then release order
  std::uint64_t size_ = 0, seq_ = 0;
  std::uint64_t age_ = 0;  // lfu: LFU-DA's L
};

class WorkloadAwareOrder final : public EvictionOrder {
 public:
  WorkloadAwareOrder(std::vector<CoreSlot>* blocks, std::uint64_t pool_blocks)
      : blocks_(*blocks), ghosts_(std::max<std::uint64_t>(1, pool_blocks)) {}

  // A page computed: the reference is counted, and a ghost's reuse observed,
  // before the block for it is chosen (as curve counts before it evicts).
  void Incoming(PageId page) override {
    ++stats_[Tick()].references;
    if (const auto ghost = ghosts_.Take(page)) Observe(ghost->category, ghost->last);
  }

  void Filled(std::uint32_t b) override {
    CoreSlot& x = blocks_[b];
    x.key = clock_;
    x.category = static_cast<std::uint8_t>(Tick());
  }

  void Hit(std::uint32_t b) override {
    const std::uint32_t category = Tick();
    ++stats_[category].references;
    CoreSlot& x = blocks_[b];
    Observe(x.category, x.key);
    x.key = clock_;
    x.category = static_cast<std::uint8_t>(category);
  }

  void Add(std::uint32_t b) override {
    CoreSlot& x = blocks_[b];
    lists_[x.category].PushBack(blocks_, b);
    x.in_order = true;
    ++size_;
  }

  void Remove(std::uint32_t b) override {
    CoreSlot& x = blocks_[b];
    lists_[x.category].Erase(blocks_, b);
    x.in_order = false;
    --size_;
  }

  std::uint32_t Pop() override {
    Tick();
    std::uint32_t victim = kNoSlot;
    double best = 0;
    for (std::uint32_t c = 0; c < kMaxCategories; ++c) {
      const std::uint32_t head = lists_[c].front();
      if (head == kNoSlot) continue;
      const double score = Score(c, blocks_[head]);
      if (victim == kNoSlot || score < best || (score == best && blocks_[head].key < blocks_[victim].key)) {
        victim = head;
        best = score;
      }
    }
    Remove(victim);
    const CoreSlot& x = blocks_[victim];
    ghosts_.Add({x.page, x.key, x.category});
    return victim;
  }

  std::uint64_t size() const override { return size_; }

 private:
  // Advances the request clock to the referrer's; its category.
  std::uint32_t Tick() {
    clock_ = std::max<std::uint64_t>(clock_, std::uint64_t{referrer().request} + 1);
    return std::min<std::uint32_t>(referrer().category, kMaxCategories - 1);
  }

  void Observe(std::uint32_t category, std::uint64_t last) {
    stats_[category].Observe(static_cast<double>(clock_ - last));
  }

  double Score(std::uint32_t category, const CoreSlot& x) const {
    return stats_[category].Score(static_cast<double>(clock_ - x.key));
  }

  std::vector<CoreSlot>& blocks_;
  GhostList ghosts_;                 // the last pool-size blocks evicted
  IndexList lists_[kMaxCategories];  // free cached blocks per category, released first at the front
  ReuseStats stats_[kMaxCategories];
  std::uint64_t size_ = 0;
  std::uint64_t clock_ = 0;
};

}  // namespace

std::unique_ptr<EvictionOrder> MakeKeyedOrder(const CoreOptions& options, std::vector<CoreSlot>* slots) {
  return std::make_unique<KeyedOrder>(options.kind, slots, options.future);
}

std::unique_ptr<EvictionOrder> MakeWorkloadAwareOrder(const CoreOptions& options, std::vector<CoreSlot>* slots) {
  return std::make_unique<WorkloadAwareOrder>(slots, options.slots);
}

}  // namespace kvwatch::curve::policy_internal
