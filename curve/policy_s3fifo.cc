// S3-FIFO (curve/policy.h): three FIFO queues.
#include <algorithm>
#include <cmath>
#include <deque>

#include "base/byte_io.h"
#include "curve/page_map.h"
#include "curve/policy.h"
#include "curve/policy_internal.h"

namespace kvwatch::curve {

namespace {

// S3FifoCache: S3-FIFO (Yang, Zhang, Qiu, Yue and Rashmi, "FIFO queues are all
// you need for cache eviction", SOSP 2023). A small FIFO S of 10% of the capacity
// admits new pages; a main FIFO M holds the rest; a ghost FIFO G remembers as many
// evicted ids as M's share of the capacity. Each resident page has a 2-bit
// frequency (0..3), set to 0 when it enters the cache and incremented on each hit.
// A miss whose id is in G is admitted to M, any other to S. Eviction: when S
// holds at least its share (or M is empty), S's oldest pages are examined in
// turn: one with at least `s3fifo_promotion_hits` hits while in S moves to M with
// its frequency reset to 0, and if M is then over its share M evicts instead
// (below); the first with fewer leaves to G. Otherwise M evicts: its oldest page
// is reinserted at M's head with its frequency decremented while that is
// non-zero, and the first with frequency 0 is evicted. One page leaves the cache
// per eviction.
//
// The promotion threshold. The paper moves a page from S to M when it was
// accessed again while in S: one hit, this implementation's default
// (PolicyOptions::s3fifo_promotion_hits = 1). libCacheSim
// (github.com/1a1a11a/libCacheSim, libCacheSim/cache/eviction/S3FIFO.c, read at
// commit aa0fc40, October 2024) makes it a parameter, `move-to-main-threshold`,
// whose default there is 2 (DEFAULT_CACHE_PARAMS "fifo-size-ratio=0.10,
// ghost-size-ratio=0.90,move-to-main-threshold=2"): S3FIFO_evict_fifo moves an
// object to main when its count of hits since insertion is >= the threshold, and
// otherwise inserts it into the ghost FIFO. Its main FIFO reinserts an object
// with frequency min(freq, 3) - 1 while that was >= 1, as here. Set the threshold
// to 2 (`--s3fifo-promotion-hits 2`, `curve.s3fifo_promotion_hits: 2`) to
// compare with libCacheSim's default.
class S3FifoCache final : public PolicyCache {
 public:
  explicit S3FifoCache(const PolicyOptions& options) : options_(options) {
    small_target_ =
        std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::llround(options.s3fifo_small_fraction *
                                                                           static_cast<double>(options.capacity))));
    ghost_target_ = std::max<std::uint64_t>(1, MainTarget());
  }

  SimOutcome Process(const SimRequest& request) override {
    SimOutcome out;
    out.hits = policy_internal::LeadingResidentIn(map_, request.pages);
    policy_internal::ForEachInTouchOrder(request.pages.size(), options_.touch_order, [&](std::size_t i) {
      policy_internal::PrefetchAhead(map_, request.pages, i, options_.touch_order);
      Reference(request.pages[i]);
    });
    return out;
  }

  std::uint64_t resident() const override { return small_.size() + main_.size(); }
  std::size_t MemoryBytes() const override {
    return map_.MemoryBytes() + ghost_map_.MemoryBytes() + nodes_.MemoryBytes() +
           (small_.size() + main_.size()) * sizeof(std::uint32_t) + ghost_.size() * sizeof(GhostEntry);
  }

  // S and M in queue order with each page's frequency, then the live ghosts oldest
  // first (stale ghost entries only pace the compaction; ids are renumbered).
  void Serialize(std::vector<std::uint8_t>* out) const override {
    for (const std::deque<std::uint32_t>* q : {&small_, &main_}) {
      base::AppendPod<std::uint64_t>(out, q->size());
      for (std::uint32_t index : *q) {
        base::AppendPod(out, nodes_[index].page);
        base::AppendPod(out, nodes_[index].freq);
      }
    }
    std::uint64_t ghosts = 0;
    for (const GhostEntry& g : ghost_) ghosts += LiveGhost(g) ? 1 : 0;
    base::AppendPod(out, ghosts);
    for (const GhostEntry& g : ghost_) {
      if (LiveGhost(g)) base::AppendPod(out, g.page);
    }
  }

  bool Deserialize(std::span<const std::uint8_t>* in) override {
    if (resident() != 0) return false;
    for (std::deque<std::uint32_t>* q : {&small_, &main_}) {
      std::uint64_t n = 0;
      if (!base::ReadCount(in, &n, sizeof(PageId) + 1) || resident() + n > options_.capacity) return false;
      map_.Reserve(resident() + n);
      for (std::uint64_t k = 0; k < n; ++k) {
        Node node;
        if (!base::ReadPod(in, &node.page) || !base::ReadPod(in, &node.freq) || node.freq > 3 ||
            map_.Find(node.page) != nullptr) {
          return false;
        }
        const std::uint32_t index = nodes_.Allocate();
        nodes_[index] = node;
        map_.Insert(node.page, index);
        q->push_back(index);
      }
    }
    std::uint64_t ghosts = 0;
    if (!base::ReadCount(in, &ghosts, sizeof(PageId)) || ghosts > ghost_target_) return false;
    ghost_map_.Reserve(ghosts);
    for (std::uint64_t k = 0; k < ghosts; ++k) {
      PageId page = 0;
      if (!base::ReadPod(in, &page) || map_.Find(page) != nullptr || ghost_map_.Find(page) != nullptr) return false;
      const std::uint64_t id = ghost_next_++;
      ghost_.push_back(GhostEntry{page, id});
      ghost_map_.Insert(page, static_cast<std::uint32_t>(id));
    }
    return true;
  }

 private:
  struct Node {
    PageId page = 0;
    std::uint8_t freq = 0;
  };
  struct GhostEntry {
    PageId page;
    std::uint64_t id;
  };

  void Reference(PageId page) {
    if (std::uint32_t* found = map_.Find(page)) {
      Node& n = nodes_[*found];
      if (n.freq < 3) ++n.freq;
      return;
    }
    while (resident() >= options_.capacity) Evict();
    const std::uint32_t index = nodes_.Allocate();
    nodes_[index] = Node{page, 0};
    map_.Insert(page, index);
    if (ghost_map_.Find(page) != nullptr) {
      ghost_map_.Erase(page);
      main_.push_back(index);
    } else {
      small_.push_back(index);
    }
  }

  void Evict() {
    if (small_.size() >= small_target_ || main_.empty()) {
      EvictSmall();
    } else {
      EvictMain();
    }
  }

  void EvictSmall() {
    while (!small_.empty()) {
      const std::uint32_t index = small_.front();
      small_.pop_front();
      Node& n = nodes_[index];
      if (n.freq >= options_.s3fifo_promotion_hits) {
        // Hit enough while in S: promoted to M; when M is over its share, M gives up a page.
        n.freq = 0;
        main_.push_back(index);
        if (main_.size() > MainTarget()) {
          EvictMain();
          return;
        }
      } else {
        Remove(index);
        AddGhost(n.page);
        return;
      }
    }
    EvictMain();
  }

  std::uint64_t MainTarget() const { return options_.capacity > small_target_ ? options_.capacity - small_target_ : 0; }

  void EvictMain() {
    while (!main_.empty()) {
      const std::uint32_t index = main_.front();
      main_.pop_front();
      Node& n = nodes_[index];
      if (n.freq > 0) {
        --n.freq;
        main_.push_back(index);
      } else {
        Remove(index);
        return;
      }
    }
  }

  void Remove(std::uint32_t index) {
    map_.Erase(nodes_[index].page);
    nodes_.Release(index);
  }

  void AddGhost(PageId page) {
    const std::uint64_t id = ghost_next_++;
    ghost_.push_back(GhostEntry{page, id});
    if (std::uint32_t* g = ghost_map_.Find(page)) {
      *g = static_cast<std::uint32_t>(id);
    } else {
      ghost_map_.Insert(page, static_cast<std::uint32_t>(id));
    }
    while (ghost_map_.size() > ghost_target_) {
      const GhostEntry& old = ghost_.front();
      if (LiveGhost(old)) ghost_map_.Erase(old.page);
      ghost_.pop_front();
    }
    if (ghost_.size() > 2 * ghost_target_ + 16) {
      std::deque<GhostEntry> kept;
      for (const GhostEntry& g : ghost_) {
        if (LiveGhost(g)) kept.push_back(g);
      }
      ghost_ = std::move(kept);
    }
  }

  bool LiveGhost(const GhostEntry& g) const {
    const std::uint32_t* id = ghost_map_.Find(g.page);
    return id != nullptr && *id == static_cast<std::uint32_t>(g.id);
  }

  PolicyOptions options_;
  std::uint64_t small_target_ = 1;
  std::uint64_t ghost_target_ = 1;
  PageMap map_;
  policy_internal::SlotPool<Node> nodes_;
  std::deque<std::uint32_t> small_;  // front = oldest
  std::deque<std::uint32_t> main_;
  std::deque<GhostEntry> ghost_;
  std::uint64_t ghost_next_ = 0;
  PageMap ghost_map_;
};

}  // namespace

namespace policy_internal {

std::unique_ptr<PolicyCache> MakeS3FifoCache(const PolicyOptions& options) {
  return std::make_unique<S3FifoCache>(options);
}

}  // namespace policy_internal

}  // namespace kvwatch::curve
