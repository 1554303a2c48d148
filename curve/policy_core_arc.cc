// The core's arc order (curve/policy_core.h): ARC (Megiddo and Modha, FAST 2003)
// as curve/policy_arc.cc defines it, mirrored over the pool. Replay and the
// canaries keep their own ArcCache (curve/policy_arc.cc): driven through the core,
// every eviction and every ghost hit moves an id between two hash maps (the core's
// pages, this order's ghosts) where ArcCache's one directory map only relinks it,
// which made replay's arc 0.5x as fast (bench/policy_bench, VsLibCacheSim).
//
// The pool's cached blocks, held or free, are ARC's resident pages, each in T1
// (referenced once since it entered the directory) or T2 (at least twice); the
// capacity c is the pool's block count. A reference is a request taking a block:
// computing its page (Filled) or holding it (Hit: a prefix hit, or a page shared
// with a running request). What the paper does on a reference, here:
//   I    a hit on a cached block: it moves to T2 (case I).
//   II, III  a page computed again whose id is in the ghost list B1 (B2): p grows
//        (shrinks) as in the paper before the block for it is chosen (Incoming),
//        the id leaves its ghost list and the page enters T2.
//   IV   a page in no list: the directory is trimmed as in the paper (B1's LRU id
//        dropped when |T1| + |B1| = c and B1 is not empty, B2's when the directory
//        holds 2c ids) and the page enters T1; when T1 alone fills the pool, the
//        block reused is T1's LRU one and its id is not remembered (case IV(A)).
//   REPLACE, when a fresh block is needed and no empty block is left: T1's LRU free
//        block if |T1| >= 1 and (|T1| > p or (the page is from B2 and |T1| = p)),
//        else T2's LRU free block (when the list chosen has no free block, the
//        other's); its id goes to the MRU end of B1 or B2.
// |T1| and |T2| count held blocks too (they are resident pages in ARC's sense), but
// only free blocks can be reused: a held block leaves its list's order while
// running and returns to the MRU end of its list (T2 after a hit) when its last
// holder releases it, as the s3fifo evictor does. So "LRU" here is release order,
// as for the lru evictor. Blocks without a page id (generated tokens) are not pages:
// allocating one when no empty block is left reuses a block by REPLACE as above.
// The ghost lists hold page ids only, at most 2c in all and |T1| + |B1| <= c.
//
// Block fields used: prev/next (the free lists), in_main (T2, else T1), in_order.
#include <cstdint>
#include <vector>

#include "curve/index_list.h"
#include "curve/page_map.h"
#include "curve/policy_core.h"
#include "curve/policy_core_cache.h"
#include "curve/policy_internal.h"

namespace kvwatch::curve::policy_internal {

namespace {

class ArcOrder final : public EvictionOrder {
 public:
  ArcOrder(const CoreOptions& options, std::vector<CoreSlot>* blocks)
      : blocks_(*blocks), c_(std::max<std::uint64_t>(1, options.slots)) {}

  void Incoming(PageId page) override {
    const double c = static_cast<double>(c_);
    if (std::uint32_t* found = ghost_map_.Find(page)) {
      const std::uint32_t g = *found;
      const std::uint32_t list = ghosts_[g].list;
      const double b1 = static_cast<double>(ghost_lists_[kB1].size());
      const double b2 = static_cast<double>(ghost_lists_[kB2].size());
      if (list == kB1) {  // case II
        p_ = std::min(c, p_ + (b1 >= b2 ? 1.0 : b2 / b1));
      } else {  // case III
        p_ = std::max(0.0, p_ - (b2 >= b1 ? 1.0 : b1 / b2));
        from_b2_ = true;
      }
      DropGhost(g);
      to_t2_ = true;
      return;
    }
    // Case IV.
    const std::uint64_t l1 = t_[kT1] + ghost_lists_[kB1].size();
    const std::uint64_t total = l1 + t_[kT2] + ghost_lists_[kB2].size();
    if (l1 >= c_) {
      if (ghost_lists_[kB1].size() > 0) {
        DropGhost(ghost_lists_[kB1].front());
      } else {
        no_ghost_ = true;  // T1 fills the pool: its LRU page leaves without a ghost
      }
    } else if (total >= 2 * c_) {
      DropGhost(ghost_lists_[ghost_lists_[kB2].empty() ? kB1 : kB2].front());
    }
  }

  void Filled(std::uint32_t b) override {
    CoreSlot& x = blocks_[b];
    x.in_main = to_t2_;
    ++t_[x.in_main ? kT2 : kT1];
    to_t2_ = from_b2_ = no_ghost_ = false;
  }

  void Hit(std::uint32_t b) override {
    CoreSlot& x = blocks_[b];
    if (x.in_main) return;
    --t_[kT1];
    ++t_[kT2];
    x.in_main = true;
  }

  void Add(std::uint32_t b) override {
    CoreSlot& x = blocks_[b];
    free_[x.in_main ? kT2 : kT1].PushBack(blocks_, b);
    x.in_order = true;
  }

  void Remove(std::uint32_t b) override {
    CoreSlot& x = blocks_[b];
    free_[x.in_main ? kT2 : kT1].Erase(blocks_, b);
    x.in_order = false;
  }

  std::uint32_t Pop() override {
    std::uint32_t from;
    bool ghost = true;
    if (no_ghost_ && !free_[kT1].empty()) {
      from = kT1;
      ghost = false;
    } else {
      const double t1 = static_cast<double>(t_[kT1]);
      from = t_[kT1] >= 1 && (t1 > p_ || (from_b2_ && t1 == p_)) ? kT1 : kT2;
      if (free_[from].empty()) from = 1 - from;
    }
    no_ghost_ = false;
    const std::uint32_t b = free_[from].front();
    Remove(b);
    --t_[from];
    if (ghost) AddGhost(blocks_[b].page, from == kT1 ? kB1 : kB2);
    return b;
  }

  std::uint64_t size() const override { return free_[kT1].size() + free_[kT2].size(); }
  std::size_t MemoryBytes() const override {
    return ghosts_.capacity() * sizeof(Ghost) + spare_.capacity() * sizeof(std::uint32_t) + ghost_map_.MemoryBytes();
  }

 private:
  enum : std::uint32_t { kT1 = 0, kT2 = 1, kB1 = 0, kB2 = 1 };
  struct Ghost {
    PageId page = 0;
    std::uint32_t prev = kNoSlot;  // towards the LRU end
    std::uint32_t next = kNoSlot;
    std::uint32_t list = kB1;
  };

  void AddGhost(PageId page, std::uint32_t list) {
    std::uint32_t g;
    if (spare_.empty()) {
      g = static_cast<std::uint32_t>(ghosts_.size());
      ghosts_.emplace_back();
    } else {
      g = spare_.back();
      spare_.pop_back();
    }
    ghosts_[g] = Ghost{page, kNoSlot, kNoSlot, list};
    ghost_lists_[list].PushBack(ghosts_, g);
    ghost_map_.Insert(page, g);
  }

  void DropGhost(std::uint32_t g) {
    const Ghost& x = ghosts_[g];
    ghost_lists_[x.list].Erase(ghosts_, g);
    ghost_map_.Erase(x.page);
    spare_.push_back(g);
  }

  std::vector<CoreSlot>& blocks_;
  std::uint64_t c_;
  double p_ = 0;                 // the target size of T1
  std::uint64_t t_[2] = {0, 0};  // |T1|, |T2|: cached blocks, held or free
  IndexList free_[2];            // the free blocks of T1 and T2, LRU (released first) at the front
  IndexList ghost_lists_[2];     // B1, B2, LRU at the front
  std::vector<Ghost> ghosts_;
  std::vector<std::uint32_t> spare_;  // unused slots of ghosts_
  PageMap ghost_map_;                 // page -> slot in ghosts_
  // Set by Incoming for the page being allocated, cleared when it is filled.
  bool to_t2_ = false;     // it was a ghost: it enters T2
  bool from_b2_ = false;   // it was in B2 (REPLACE's tie rule)
  bool no_ghost_ = false;  // case IV(A) with T1 filling the pool
};

}  // namespace

std::unique_ptr<EvictionOrder> MakeArcOrder(const CoreOptions& options, std::vector<CoreSlot>* slots) {
  return NewOrder<ArcOrder>(options, slots);
}

}  // namespace kvwatch::curve::policy_internal
