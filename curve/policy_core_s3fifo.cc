// The core's s3fifo order (curve/policy_core.h): S3-FIFO, Yang, Zhang, Qiu, Yue and
// Rashmi, "FIFO queues are all you need for cache eviction", SOSP 2023. Replay, the
// live canaries and the simulator's pool all run it.
//
// Three FIFO queues. A small FIFO S of 10% of the capacity c (the slot count;
// `s3fifo_small_fraction`, rounded, at least 1) admits new pages; a main FIFO M holds
// the rest; a ghost FIFO G remembers as many evicted ids as M's share of the
// capacity. Each cached page has a 2-bit frequency (0..3), set to 0 when its page
// is computed and incremented on each hit; hits do not move it. A page computed
// while its id is in G enters M (the id leaves G), any other enters S. Eviction,
// when a slot is needed and none is empty: while S holds at least its share (or M
// is empty), S's oldest page is examined: with at least `s3fifo_promotion_hits`
// hits it moves to M's tail with its frequency reset to 0, and the choice between
// S and M is made again; with fewer it is evicted and its id enters G. Otherwise
// M's oldest page is reinserted at M's tail with its frequency decremented while
// that is non-zero, and the first with frequency 0 is evicted.
//
// Where readings differ, this one and why:
// - The promotion threshold: the paper moves a page from S to M when it was
//   accessed again while in S, one hit, this implementation's default
//   (PolicyOptions::s3fifo_promotion_hits = 1). libCacheSim
//   (github.com/1a1a11a/libCacheSim, libCacheSim/cache/eviction/S3FIFO.c, read at
//   commit aa0fc40, October 2024) makes it a parameter, `move-to-main-threshold`,
//   whose default there is 2 (DEFAULT_CACHE_PARAMS "fifo-size-ratio=0.10,
//   ghost-size-ratio=0.90,move-to-main-threshold=2"). Its main FIFO reinserts an
//   object with frequency min(freq, 3) - 1 while that was >= 1, as here.
// - A promotion that puts M over its share: here S and M are chosen again, so M
//   evicts at once (the paper's "if M is full then evictM()"); libCacheSim's
//   S3FIFO_evict_fifo keeps promoting until one object leaves S for the ghost and
//   lets M overshoot until later evictions drain it.
// - The ghost of an id computed again is looked up after the eviction that makes
//   room for it (the paper's insert: evict while full, then test G); libCacheSim's
//   S3FIFO_find takes the id out of its ghost FIFO before that eviction. On the
//   coding-agent trace at 14,000 pages these two differences are 1,113 of 6.5 M
//   hits (docs/performance.md).
// - The queue sizes are shares of the capacity, fixed, as in both (libCacheSim
//   sizes S as floor(0.1 c), G as floor(0.9 c); here S is rounded to nearest and G
//   is c minus S).
//
// Running requests (the simulator's pool): a held page keeps its place in its
// queue, as any page does. When eviction meets one it is not evicted: at S's head
// it moves to M as a page re-accessed in S does (a running request reads its KV at
// every step); in M its frequency is spent as above, and at 0 it is requeued at
// M's tail. The choice of queue is by the queues' sizes (held pages count: they
// are cached), but a queue with no free page is passed over for the other.
//
// Slot fields used: freq (hits, at most 3), in_main (in M, else S), in_order.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "base/byte_io.h"
#include "curve/policy_core.h"
#include "curve/policy_core_cache.h"
#include "curve/policy_internal.h"

namespace kvwatch::curve::policy_internal {

namespace {

class S3FifoOrder final : public EvictionOrder {
 public:
  S3FifoOrder(const CoreOptions& options, std::vector<CoreSlot>* slots)
      : slots_(*slots), promotion_hits_(std::max<std::uint32_t>(1, options.s3fifo_promotion_hits)) {
    const std::uint64_t c = std::max<std::uint64_t>(1, options.slots);
    small_target_ = std::max<std::uint64_t>(
        1, static_cast<std::uint64_t>(std::llround(options.s3fifo_small_fraction * static_cast<double>(c))));
    ghost_limit_ = std::max<std::uint64_t>(1, c > small_target_ ? c - small_target_ : 0);
  }

  bool KeepsGhosts() const override { return true; }
  // The ghost is tested when the page gets its slot, after the eviction (Filled).
  void Incoming(PageId /*page*/, std::uint32_t ghost) override { incoming_ghost_ = ghost; }

  void Filled(std::uint32_t s) override {
    CoreSlot& x = slots_[s];
    x.freq = 0;
    x.in_main = ghosts_.Holds(incoming_ghost_, x.page);  // still in G after the eviction
    if (x.in_main) {
      ghosts_.Unlink(incoming_ghost_);
      ghosts_.Free(incoming_ghost_);
    }
    incoming_ghost_ = kNoGhost;
    (x.in_main ? main_ : small_).push_back(s);
  }
  void Hit(std::uint32_t s) override {
    CoreSlot& x = slots_[s];
    if (x.freq < 3) ++x.freq;
  }
  void Add(std::uint32_t s) override {
    CoreSlot& x = slots_[s];
    x.in_order = true;
    ++free_[x.in_main ? 1 : 0];
  }
  void Remove(std::uint32_t s) override {
    CoreSlot& x = slots_[s];
    x.in_order = false;
    --free_[x.in_main ? 1 : 0];
  }

  std::uint32_t Pop() override {
    for (;;) {
      const bool from_small = free_[0] > 0 && (small_.size() >= small_target_ || free_[1] == 0);
      if (from_small) {
        const std::uint32_t s = small_.front();
        small_.pop_front();
        CoreSlot& x = slots_[s];
        // Hit enough while in S, or in use by a running request (a page re-accessed
        // while in S): to M, its count reset.
        if (x.freq >= promotion_hits_ || !x.in_order) {
          x.freq = 0;
          if (x.in_order) {
            --free_[0];
            ++free_[1];
          }
          x.in_main = true;
          main_.push_back(s);
          continue;
        }
        Remove(s);
        to_ghost_ = true;
        return s;
      }
      const std::uint32_t s = main_.front();
      main_.pop_front();
      CoreSlot& x = slots_[s];
      if (x.freq > 0 || !x.in_order) {
        if (x.freq > 0) --x.freq;
        main_.push_back(s);
        continue;
      }
      Remove(s);
      to_ghost_ = false;
      return s;
    }
  }

  // A victim from S leaves its id in G; G keeps its newest ghost_limit_ ids.
  std::uint32_t Evicted(std::uint32_t s) override {
    if (!to_ghost_) return kNoGhost;
    to_ghost_ = false;
    while (ghosts_.size(0) >= ghost_limit_) {
      const std::uint32_t g = ghosts_.front(0);
      const PageId page = ghosts_.page(g);
      ghosts_.Unlink(g);
      ghosts_.Free(g);
      ForgetGhostPage(page);
    }
    return ghosts_.Add(slots_[s].page, 0);
  }

  std::uint64_t size() const override { return free_[0] + free_[1]; }
  Slot PeekVictim() const override {
    const std::deque<std::uint32_t>& q = small_.size() >= small_target_ || main_.empty() ? small_ : main_;
    return q.empty() ? kNoSlot : q.front();
  }
  std::size_t MemoryBytes() const override {
    return (small_.size() + main_.size()) * sizeof(std::uint32_t) + ghosts_.MemoryBytes();
  }

  // S and M, oldest first (the slots carry each page's frequency), then G's ids,
  // oldest first.
  void SerializeOrder(std::vector<std::uint8_t>* out) const override {
    for (const std::deque<std::uint32_t>* q : {&small_, &main_}) {
      base::AppendPod<std::uint64_t>(out, q->size());
      for (std::uint32_t s : *q) base::AppendPod(out, s);
    }
    base::AppendPod<std::uint64_t>(out, ghosts_.size(0));
    ghosts_.ForEach(0, [&](PageId page) { base::AppendPod(out, page); });
  }

  bool DeserializeOrder(std::span<const std::uint8_t>* in) override {
    if (!small_.empty() || !main_.empty()) return false;
    std::vector<bool> queued(slots_.size(), false);
    std::uint64_t cached = 0;
    for (const CoreSlot& x : slots_) cached += x.has_page ? 1 : 0;
    for (std::deque<std::uint32_t>* q : {&small_, &main_}) {
      const bool main = q == &main_;
      std::uint64_t n = 0;
      if (!base::ReadCount(in, &n, sizeof(std::uint32_t))) return false;
      for (std::uint64_t k = 0; k < n; ++k) {
        std::uint32_t s = 0;
        // A slot with a page of this queue, once, its count a 2-bit one.
        if (!base::ReadPod(in, &s) || s >= slots_.size() || queued[s] || !slots_[s].has_page ||
            slots_[s].in_main != main || slots_[s].freq > 3) {
          return false;
        }
        queued[s] = true;
        q->push_back(s);
        if (slots_[s].holds == 0) Add(s);
      }
    }
    std::uint64_t ghosts = 0;
    if (small_.size() + main_.size() != cached || !base::ReadCount(in, &ghosts, sizeof(PageId)) ||
        ghosts > ghost_limit_) {
      return false;
    }
    for (std::uint64_t k = 0; k < ghosts; ++k) {
      PageId page = 0;
      if (!base::ReadPod(in, &page)) return false;
      if (!RestoreGhostPage(page, ghosts_.Add(page, 0))) return false;  // resident, or a ghost twice
    }
    return true;
  }

 private:
  std::vector<CoreSlot>& slots_;
  std::uint32_t promotion_hits_;
  std::uint64_t small_target_ = 1;
  std::uint64_t ghost_limit_ = 1;
  std::deque<std::uint32_t> small_, main_;   // S and M, oldest at the front: every cached slot, held or free
  std::uint64_t free_[2] = {0, 0};           // free slots in S, in M
  GhostTable<1> ghosts_;                     // G, oldest at the front
  std::uint32_t incoming_ghost_ = kNoGhost;  // Incoming's ghost number, tested at Filled
  bool to_ghost_ = false;                    // set by Pop: the victim came from S
};

}  // namespace

std::unique_ptr<EvictionOrder> MakeS3FifoOrder(const CoreOptions& options, std::vector<CoreSlot>* slots) {
  return NewOrder<S3FifoOrder>(options, slots);
}

// Replay's and the canaries' s3fifo.
std::unique_ptr<PolicyCache> MakeS3FifoCache(const PolicyOptions& options) {
  return NewCoreCache<S3FifoOrder>(options);
}

}  // namespace kvwatch::curve::policy_internal
