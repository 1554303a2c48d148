// The eviction orders that order free cached pages (blocks) by a key taken from
// the requests that used them (curve/policy_core.h): lfu and belady on a lazy heap,
// priority on one list per level, and workload-aware on one list per request
// category. lfu, priority and belady are the only implementation of those
// policies: replay and the canaries drive them one page at a time (CoreCache: a
// reference is a hold and a release at once, so "released longest ago" is "least
// recently referenced"), the replica with running requests holding blocks (a
// request taking a block: computing its page, Filled, or holding it, Hit).
// Likewise workload-aware, described first as the paper's policy over pages, then
// over the core's blocks.
//
// workload-aware: the workload-aware policy of Wang et al., "KVCache Cache in
// the Wild: Characterizing and Optimizing KVCache Cache at a Large Cloud Provider"
// (USENIX ATC 2025). The paper finds that within one request category the reuse
// probability of a block is predictable and its reuse time roughly exponential,
// and evicts the block least likely to be reused. What is estimated here, online
// from the stream's own past (no look-ahead), per category c (the category of the
// request that referenced the block last):
//   p_c  = (reuses_c + 1) / (references_c + 2): the probability that a block
//          referenced by a category-c request is referenced again. A reuse is
//          observed when a block comes back while it is resident or among the
//          last C evicted blocks (a ghost list), so it is the reuse seen within
//          about twice this cache's reach;
//   mu_c = (sum of those reuses' intervals + 1) / (reuses_c + 1): the mean reuse
//          interval, in requests (the one clock every trace has).
// A block of category c last referenced a requests ago is reused later with
// probability proportional to p_c * exp(-a / mu_c); the block with the smallest
// value is evicted, the least recently referenced one on ties. Within a category
// that order is LRU, so each category keeps an LRU list and an eviction compares
// only the categories' oldest blocks: O(categories) per eviction.
//
// Each order over the core's blocks:
//   lfu       LFU-DA (Arlitt, Cherkasova et al., "Evaluating content management
//             techniques for Web proxy caches", 2000): the key of a block is F + L, F its references since its page
//             was computed (Block::key), L the cache age (the key of the last block
//             evicted) when the block was last released; the smallest key first,
//             ties to the one released longest ago.
//   priority  the retention priority of the request that referenced the block last
//             (TensorRT-LLM's retention priorities; SGLang's priority eviction:
//             ReplicaRequest::priority from --priority, SimRequest::priority in
//             replay); the lowest first, the one released longest ago within a level.
//   belady    the block whose page's next use is farthest first (never used again:
//             first of all). The next use is read from the input, which the replica
//             has whole: after a reference by request r, the first reference to the
//             page by a request after r in arrival order, numbered as curve numbers
//             references (every request's pages in tail-first touch order, requests
//             in arrival order), so ties break as in curve. A block referenced by
//             several requests keeps the latest next use. An oracle bound over
//             arrival order: the replica's own schedule (preemptions, queue order)
//             may reference pages in another order. Replay has no oracle: it gives
//             each reference's next use in its own touch order (SetNextUse,
//             curve/policy_replay.h's next-use table).
//   workload-aware  Wang et al. (ATC 2025), as above: per
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

#include "base/byte_io.h"
#include "curve/index_list.h"
#include "curve/page_map.h"
#include "curve/policy_core.h"
#include "curve/policy_core_cache.h"
#include "curve/policy_internal.h"
#include "curve/reuse_ghosts.h"

namespace kvwatch::curve::policy_internal {

namespace {

class KeyedOrder final : public EvictionOrder {
 public:
  KeyedOrder(const CoreOptions& options, std::vector<CoreSlot>* blocks)
      : kind_(options.kind), blocks_(*blocks), next_uses_(options.future) {}

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
  std::size_t MemoryBytes() const override { return heap_.MemoryBytes(); }

  // lfu's age and the release sequence, then the candidates in eviction order,
  // each with its heap key and tie (the slots' own keys are the core's).
  void SerializeOrder(std::vector<std::uint8_t>* out) const override {
    base::AppendPod(out, age_);
    base::AppendPod(out, seq_);
    std::vector<LazyHeap::Entry> live;
    live.reserve(size_);
    heap_.ForEach([&](const LazyHeap::Entry& e) {
      if (Valid(e)) live.push_back(e);
    });
    std::sort(live.begin(), live.end(), [](const LazyHeap::Entry& a, const LazyHeap::Entry& b) {
      return a.key != b.key ? a.key < b.key : a.tie != b.tie ? a.tie < b.tie : a.block < b.block;
    });
    base::AppendPod<std::uint64_t>(out, live.size());
    for (const LazyHeap::Entry& e : live) {
      base::AppendPod(out, e.block);
      base::AppendPod(out, e.key);
      base::AppendPod(out, e.tie);
    }
  }
  bool DeserializeOrder(std::span<const std::uint8_t>* in) override {
    std::uint64_t n = 0;
    if (size_ != 0 || !base::ReadPod(in, &age_) || !base::ReadPod(in, &seq_) ||
        !base::ReadCount(in, &n, sizeof(std::uint32_t) + 2 * sizeof(std::uint64_t))) {
      return false;
    }
    for (std::uint64_t k = 0; k < n; ++k) {
      LazyHeap::Entry e{};
      if (!base::ReadPod(in, &e.block) || !base::ReadPod(in, &e.key) || !base::ReadPod(in, &e.tie) ||
          e.block >= blocks_.size() || e.tie > seq_) {
        return false;
      }
      CoreSlot& x = blocks_[e.block];
      if (x.in_order || x.holds != 0 || !x.has_page) return false;
      x.in_order = true;
      ++size_;
      e.version = x.version;
      heap_.Push(e);
    }
    return true;
  }

 private:
  void Reference(std::uint32_t b) {
    CoreSlot& x = blocks_[b];
    switch (kind_) {
      case PolicyKind::kLfu:
        ++x.key;
        break;
      case PolicyKind::kBelady: {
        // The next use after the latest request (by arrival) that referenced it.
        // (next uses grow with the request: the largest one is that request's).
        // Replay, without an oracle: the next use after this reference (its table
        // of next uses in touch order, curve/policy_replay.h), which also grows.
        const std::uint64_t next =
            next_uses_ != nullptr ? next_uses_->After(x.page, referrer().request) : referrer().next_use;
        x.key = std::max(x.key, next);
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

// priority: one list per level (the slot's key, the priority + 2^32), each in
// release order, so a victim is the front of the lowest nonempty level: the
// order of a heap on (key, release order), in O(1) a reference instead of a heap
// push and pop's O(log n) cache misses (replay at 0.55x of the lists it had
// before the core). Levels are the distinct priorities of the rules (tenants and
// classes given one, and 0), few: a sorted vector, looked up through the level
// last used (a request's pages share their referrer's level) and pruned of its
// empty levels when it reaches kPruneAt, as the old replay cache erased a level
// when it emptied.
class PriorityOrder final : public EvictionOrder {
 public:
  PriorityOrder(const CoreOptions& /*options*/, std::vector<CoreSlot>* blocks) : blocks_(*blocks) {}

  void Filled(std::uint32_t b) override { Reference(b); }
  void Hit(std::uint32_t b) override { Reference(b); }

  void Add(std::uint32_t b) override {
    CoreSlot& x = blocks_[b];
    const std::size_t level = LevelOf(x.key);
    levels_[level].list.PushBack(blocks_, b);
    lowest_ = std::min(lowest_, level);
    x.in_order = true;
    ++size_;
  }
  void Remove(std::uint32_t b) override {
    CoreSlot& x = blocks_[b];
    levels_[LevelOf(x.key)].list.Erase(blocks_, b);
    x.in_order = false;
    --size_;
  }
  std::uint32_t Pop() override {
    while (levels_[lowest_].list.empty()) ++lowest_;  // size() > 0: some level is not empty
    const std::uint32_t b = levels_[lowest_].list.PopFront(blocks_);
    blocks_[b].in_order = false;
    --size_;
    return b;
  }
  std::uint64_t size() const override { return size_; }
  std::size_t MemoryBytes() const override { return levels_.capacity() * sizeof(Level); }

  // The candidates in eviction order (their levels are the slots' keys, the core's).
  void SerializeOrder(std::vector<std::uint8_t>* out) const override {
    base::AppendPod<std::uint64_t>(out, size_);
    for (const Level& level : levels_) {
      for (std::uint32_t b = level.list.front(); b != kNoSlot; b = blocks_[b].next) base::AppendPod(out, b);
    }
  }
  bool DeserializeOrder(std::span<const std::uint8_t>* in) override {
    std::uint64_t n = 0;
    if (size_ != 0 || !base::ReadCount(in, &n, sizeof(std::uint32_t))) return false;
    std::uint64_t previous = 0;
    for (std::uint64_t k = 0; k < n; ++k) {
      std::uint32_t b = 0;
      if (!base::ReadPod(in, &b) || b >= blocks_.size()) return false;
      const CoreSlot& x = blocks_[b];
      // Candidates level by level, lowest first (the eviction order).
      if (x.in_order || x.holds != 0 || !x.has_page || x.key < previous) return false;
      previous = x.key;
      Add(b);
    }
    return true;
  }

 private:
  struct Level {
    std::uint64_t key;
    IndexList list;  // free blocks of this level, released first at the front
  };
  static constexpr std::size_t kPruneAt = 64;

  void Reference(std::uint32_t b) {
    blocks_[b].key =
        static_cast<std::uint64_t>(static_cast<std::int64_t>(referrer().priority) + (std::int64_t{1} << 32));
  }
  // The index of level `key` in levels_, made (empty) when new.
  std::size_t LevelOf(std::uint64_t key) {
    if (last_ < levels_.size() && levels_[last_].key == key) return last_;
    auto below = [](const Level& l, std::uint64_t k) { return l.key < k; };
    auto it = std::lower_bound(levels_.begin(), levels_.end(), key, below);
    if (it == levels_.end() || it->key != key) {
      if (levels_.size() >= kPruneAt) {
        std::erase_if(levels_, [](const Level& l) { return l.list.empty(); });
        lowest_ = 0;
        it = std::lower_bound(levels_.begin(), levels_.end(), key, below);
      }
      // An empty level: every level below lowest_ is still empty.
      it = levels_.insert(it, Level{key, IndexList{}});
    }
    last_ = static_cast<std::size_t>(it - levels_.begin());
    return last_;
  }

  std::vector<CoreSlot>& blocks_;
  std::vector<Level> levels_;  // by key; an empty level stays until pruned
  std::size_t last_ = 0;       // the level LevelOf answered last
  std::size_t lowest_ = 0;     // every level below it is empty
  std::uint64_t size_ = 0;
};

class WorkloadAwareOrder final : public EvictionOrder {
 public:
  WorkloadAwareOrder(const CoreOptions& options, std::vector<CoreSlot>* blocks)
      : blocks_(*blocks), ghost_limit_(std::max<std::uint64_t>(1, options.slots)), ghosts_(ghost_limit_) {}

  // A page computed: the reference is counted, and a ghost's reuse observed,
  // before the block for it is chosen (as curve counts before it evicts).
  void Incoming(PageId page, std::uint32_t /*ghost*/) override {
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
  std::size_t MemoryBytes() const override { return ghosts_.MemoryBytes(); }

  // The clock, every category's statistics, each category's list from its front,
  // and the live ghosts oldest first (the slots' clocks and categories are the
  // core's).
  void SerializeOrder(std::vector<std::uint8_t>* out) const override {
    base::AppendPod(out, clock_);
    for (const ReuseStats& st : stats_) {
      base::AppendPod(out, st.references);
      base::AppendPod(out, st.reuses);
      base::AppendPod(out, st.interval_sum);
    }
    for (const IndexList& list : lists_) {
      base::AppendPod<std::uint64_t>(out, list.size());
      for (std::uint32_t b = list.front(); b != kNoSlot; b = blocks_[b].next) base::AppendPod(out, b);
    }
    base::AppendPod(out, ghosts_.size());
    ghosts_.ForEach([&](const GhostList::Ghost& g) {
      base::AppendPod(out, g.page);
      base::AppendPod(out, g.last);
      base::AppendPod(out, g.category);
    });
  }
  bool DeserializeOrder(std::span<const std::uint8_t>* in) override {
    if (size_ != 0 || !base::ReadPod(in, &clock_)) return false;
    for (ReuseStats& st : stats_) {
      if (!base::ReadPod(in, &st.references) || !base::ReadPod(in, &st.reuses) ||
          !base::ReadPod(in, &st.interval_sum)) {
        return false;
      }
    }
    for (std::uint32_t c = 0; c < kMaxCategories; ++c) {
      std::uint64_t n = 0;
      if (!base::ReadCount(in, &n, sizeof(std::uint32_t))) return false;
      for (std::uint64_t k = 0; k < n; ++k) {
        std::uint32_t b = 0;
        if (!base::ReadPod(in, &b) || b >= blocks_.size()) return false;
        const CoreSlot& x = blocks_[b];
        if (x.in_order || x.holds != 0 || !x.has_page || x.category != c || x.key > clock_) return false;
        Add(b);
      }
    }
    constexpr std::size_t kGhostBytes = sizeof(PageId) + sizeof(std::uint64_t) + sizeof(std::uint32_t);
    std::uint64_t ghosts = 0;
    if (!base::ReadCount(in, &ghosts, kGhostBytes) || ghosts > ghost_limit_) return false;
    ghosts_.Reserve(ghosts);
    for (std::uint64_t k = 0; k < ghosts; ++k) {
      GhostList::Ghost g;
      if (!base::ReadPod(in, &g.page) || !base::ReadPod(in, &g.last) || !base::ReadPod(in, &g.category) ||
          g.category >= kMaxCategories || g.last > clock_ || ghosts_.Contains(g.page)) {
        return false;
      }
      ghosts_.Add(g);
    }
    return true;
  }

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
  std::uint64_t ghost_limit_;
  GhostList ghosts_;                 // the last pool-size blocks evicted
  IndexList lists_[kMaxCategories];  // free cached blocks per category, released first at the front
  ReuseStats stats_[kMaxCategories];
  std::uint64_t size_ = 0;
  std::uint64_t clock_ = 0;
};

}  // namespace

std::unique_ptr<EvictionOrder> MakeKeyedOrder(const CoreOptions& options, std::vector<CoreSlot>* slots) {
  return NewOrder<KeyedOrder>(options, slots);
}
std::unique_ptr<PolicyCache> MakeKeyedCache(const PolicyOptions& options) { return NewCoreCache<KeyedOrder>(options); }

std::unique_ptr<EvictionOrder> MakePriorityOrder(const CoreOptions& options, std::vector<CoreSlot>* slots) {
  return NewOrder<PriorityOrder>(options, slots);
}
std::unique_ptr<PolicyCache> MakePriorityCache(const PolicyOptions& options) {
  return NewCoreCache<PriorityOrder>(options);
}

std::unique_ptr<EvictionOrder> MakeWorkloadAwareOrder(const CoreOptions& options, std::vector<CoreSlot>* slots) {
  return NewOrder<WorkloadAwareOrder>(options, slots);
}
std::unique_ptr<PolicyCache> MakeWorkloadAwareCache(const PolicyOptions& options) {
  return NewCoreCache<WorkloadAwareOrder>(options);
}

}  // namespace kvwatch::curve::policy_internal
