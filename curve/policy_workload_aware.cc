// The workload-aware policy (curve/policy.h): one LRU list per request category,
// the victim chosen by estimated reuse probability.
#include <algorithm>

#include "base/byte_io.h"
#include "curve/index_list.h"
#include "curve/page_map.h"
#include "curve/policy.h"
#include "curve/policy_internal.h"
#include "curve/reuse_ghosts.h"

namespace kvwatch::curve {

namespace {

// WorkloadAwareCache: the workload-aware policy of Wang et al., "KVCache Cache in
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
class WorkloadAwareCache final : public PolicyCache {
 public:
  explicit WorkloadAwareCache(const PolicyOptions& options)
      : options_(options), lists_(kMaxCategories), stats_(kMaxCategories), ghosts_(options.capacity) {}

  SimOutcome Process(const SimRequest& request) override {
    ++now_;
    SimOutcome out;
    out.hits = policy_internal::LeadingResidentIn(map_, request.pages);
    const std::uint32_t category = std::min(request.category, kMaxCategories - 1);
    policy_internal::ForEachInTouchOrder(request.pages.size(), options_.touch_order,
                                         [&](std::size_t i) { Reference(request.pages[i], category); });
    return out;
  }

  std::uint64_t resident() const override { return live_; }
  std::size_t MemoryBytes() const override { return map_.MemoryBytes() + ghosts_.MemoryBytes() + nodes_.MemoryBytes(); }

  // The clocks, every category's statistics, the resident blocks by reference seq
  // (each category's list is LRU, i.e. in seq order, so appending them in seq
  // order rebuilds every list), and the live ghosts oldest first (stale ghost
  // entries and ghost ids only pace the compaction: not observable).
  void Serialize(std::vector<std::uint8_t>* out) const override {
    base::AppendPod(out, now_);
    base::AppendPod(out, seq_);
    for (const ReuseStats& st : stats_) {
      base::AppendPod(out, st.references);
      base::AppendPod(out, st.reuses);
      base::AppendPod(out, st.interval_sum);
    }
    std::vector<std::uint32_t> order;
    order.reserve(live_);
    for (std::uint32_t c = 0; c < kMaxCategories; ++c) {
      for (std::uint32_t i = lists_[c].front(); i != kNil; i = nodes_[i].next) order.push_back(i);
    }
    std::sort(order.begin(), order.end(),
              [&](std::uint32_t a, std::uint32_t b) { return nodes_[a].seq < nodes_[b].seq; });
    base::AppendPod<std::uint64_t>(out, order.size());
    for (std::uint32_t i : order) {
      const Node& n = nodes_[i];
      base::AppendPod(out, n.page);
      base::AppendPod(out, n.last);
      base::AppendPod(out, n.seq);
      base::AppendPod(out, n.category);
    }
    base::AppendPod(out, ghosts_.size());
    ghosts_.ForEach([&](const GhostList::Ghost& g) {
      base::AppendPod(out, g.page);
      base::AppendPod(out, g.last);
      base::AppendPod(out, g.category);
    });
  }

  bool Deserialize(std::span<const std::uint8_t>* in) override {
    if (live_ != 0 || !base::ReadPod(in, &now_) || !base::ReadPod(in, &seq_)) return false;
    for (ReuseStats& st : stats_) {
      if (!base::ReadPod(in, &st.references) || !base::ReadPod(in, &st.reuses) ||
          !base::ReadPod(in, &st.interval_sum)) {
        return false;
      }
    }
    constexpr std::size_t kNodeBytes = sizeof(PageId) + 2 * sizeof(std::uint64_t) + sizeof(std::uint32_t);
    std::uint64_t n = 0;
    if (!base::ReadCount(in, &n, kNodeBytes) || n > options_.capacity) return false;
    map_.Reserve(n);
    std::uint64_t prev_seq = 0;
    for (std::uint64_t k = 0; k < n; ++k) {
      Node node;
      if (!base::ReadPod(in, &node.page) || !base::ReadPod(in, &node.last) || !base::ReadPod(in, &node.seq) ||
          !base::ReadPod(in, &node.category)) {
        return false;
      }
      if (node.category >= kMaxCategories || node.last > now_ || node.seq > seq_ || (k > 0 && node.seq <= prev_seq) ||
          map_.Find(node.page) != nullptr) {
        return false;
      }
      prev_seq = node.seq;
      const std::uint32_t index = nodes_.Allocate();
      nodes_[index] = node;
      map_.Insert(node.page, index);
      ++live_;
      Append(index);
    }
    constexpr std::size_t kGhostBytes = sizeof(PageId) + sizeof(std::uint64_t) + sizeof(std::uint32_t);
    std::uint64_t ghosts = 0;
    if (!base::ReadCount(in, &ghosts, kGhostBytes) || ghosts > options_.capacity) return false;
    ghosts_.Reserve(ghosts);
    for (std::uint64_t k = 0; k < ghosts; ++k) {
      GhostList::Ghost g;
      if (!base::ReadPod(in, &g.page) || !base::ReadPod(in, &g.last) || !base::ReadPod(in, &g.category)) return false;
      // A block that came back is no longer a ghost.
      if (g.category >= kMaxCategories || g.last > now_ || map_.Find(g.page) != nullptr || ghosts_.Contains(g.page)) {
        return false;
      }
      ghosts_.Add(g);
    }
    return true;
  }

 private:
  static constexpr std::uint32_t kNil = kIndexNil;
  struct Node {
    PageId page = 0;
    std::uint64_t last = 0;  // request clock at the last reference
    std::uint64_t seq = 0;   // reference seq, for ties
    std::uint32_t category = 0;
    std::uint32_t prev = kNil;  // towards the list's oldest
    std::uint32_t next = kNil;
  };

  void Reference(PageId page, std::uint32_t category) {
    ++seq_;
    ++stats_[category].references;
    std::uint32_t* found = map_.Find(page);
    std::uint32_t index;
    if (found != nullptr) {
      index = *found;
      Node& n = nodes_[index];
      Observe(n.category, n.last);
      Unlink(index);
    } else {
      if (const auto ghost = ghosts_.Take(page)) Observe(ghost->category, ghost->last);
      if (live_ >= options_.capacity) EvictOne();
      index = nodes_.Allocate();
      nodes_[index].page = page;
      map_.Insert(page, index);
      ++live_;
    }
    Node& n = nodes_[index];
    n.last = now_;
    n.seq = seq_;
    n.category = category;
    Append(index);
  }

  void Observe(std::uint32_t category, std::uint64_t last) {
    stats_[category].Observe(static_cast<double>(now_ - last));
  }

  // log(p_c) - age / mu_c for the category's oldest block.
  double Score(std::uint32_t category, const Node& n) const {
    return stats_[category].Score(static_cast<double>(now_ - n.last));
  }

  void EvictOne() {
    std::uint32_t victim = kNil;
    double best = 0;
    for (std::uint32_t c = 0; c < kMaxCategories; ++c) {
      const std::uint32_t head = lists_[c].front();
      if (head == kNil) continue;
      const double score = Score(c, nodes_[head]);
      if (victim == kNil || score < best || (score == best && nodes_[head].seq < nodes_[victim].seq)) {
        victim = head;
        best = score;
      }
    }
    if (victim == kNil) return;
    Node& n = nodes_[victim];
    Unlink(victim);
    map_.Erase(n.page);
    nodes_.Release(victim);
    --live_;
    // Remember the block among the last C evicted.
    ghosts_.Add({n.page, n.last, n.category});
  }

  // One list per category, oldest reference at the front.
  void Append(std::uint32_t index) { lists_[nodes_[index].category].PushBack(nodes_, index); }
  void Unlink(std::uint32_t index) { lists_[nodes_[index].category].Erase(nodes_, index); }

  PolicyOptions options_;
  PageMap map_;
  policy_internal::SlotPool<Node> nodes_;
  std::vector<IndexList> lists_;
  std::vector<ReuseStats> stats_;
  std::uint64_t live_ = 0;
  std::uint64_t now_ = 0;
  std::uint64_t seq_ = 0;
  // The last C blocks evicted. Ghost ids are held as 32 bits, exact while fewer
  // than 2^32 evictions happen between a block's eviction and its lookup (the FIFO
  // holds at most 2C + 16 entries).
  GhostList ghosts_;
};

}  // namespace

namespace policy_internal {

std::unique_ptr<PolicyCache> MakeWorkloadAwareCache(const PolicyOptions& options) {
  return std::make_unique<WorkloadAwareCache>(options);
}

}  // namespace policy_internal

}  // namespace kvwatch::curve
