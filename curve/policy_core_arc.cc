// The core's arc order (curve/policy_core.h): ARC, Megiddo and Modha, "ARC: A
// Self-Tuning, Low Overhead Replacement Cache", FAST 2003 (Figure 4, the algorithm
// ARC(c)). Replay, the live canaries and the simulator's pool all run it.
//
// The paper's algorithm, four LRU lists over page ids: T1 (resident, referenced
// once since they entered the directory), T2 (resident, referenced at least
// twice), and the ghosts B1 and B2 (ids recently evicted from T1 and T2, no data).
// p, 0 <= p <= c, is the target size of T1. On the reference of page x, with c the
// capacity:
//   I    x in T1 or T2 (a hit): x moves to T2's MRU end.
//   II   x in B1: p = min(c, p + d1), d1 = 1 if |B1| >= |B2| else |B2| / |B1|;
//        REPLACE(x); x moves from B1 to T2's MRU end.
//   III  x in B2: p = max(0, p - d2), d2 = 1 if |B2| >= |B1| else |B1| / |B2|;
//        REPLACE(x); x moves from B2 to T2's MRU end.
//   IV   x in none: (A) when |T1| + |B1| = c: if |T1| < c, B1's LRU id is dropped
//        and REPLACE(x); else T1's LRU page is evicted (no ghost). (B) when
//        |T1| + |B1| < c and |T1| + |T2| + |B1| + |B2| >= c: if that total is 2c,
//        B2's LRU id is dropped; REPLACE(x). Then x enters at T1's MRU end.
//   REPLACE(x): if |T1| >= 1 and (|T1| > p or (x in B2 and |T1| = p)), T1's LRU
//        page moves to B1's MRU end; else T2's LRU page moves to B2's MRU end.
// p is a real number, as in the paper (d1 and d2 are ratios).
//
// Over the core: the slots' cached pages, held or free, are ARC's resident pages,
// each in T1 or T2; c is the slot count. A reference is a request taking a slot:
// computing its page (Filled) or holding it (Hit: a prefix hit, or a page shared
// with a running request). What the paper does on a reference, here:
//   I    a hit on a cached slot: it moves to T2 (case I).
//   II, III  a page computed again whose id is in the ghost list B1 (B2): p grows
//        (shrinks) as in the paper before the slot for it is chosen (Incoming),
//        the id leaves its ghost list and the page enters T2.
//   IV   a page in no list: the directory is trimmed as in the paper (B1's LRU id
//        dropped when |T1| + |B1| = c and B1 is not empty, B2's when the directory
//        holds 2c ids) and the page enters T1; when T1 alone fills the core, the
//        slot reused is T1's LRU one and its id is not remembered (case IV(A)).
//   REPLACE, when a fresh slot is needed and no empty slot is left: T1's LRU free
//        slot if |T1| >= 1 and (|T1| > p or (the page is from B2 and |T1| = p)),
//        else T2's LRU free slot (when the list chosen has no free slot, the
//        other's); its id goes to the MRU end of B1 or B2 (Evicted).
// |T1| and |T2| count held slots too (they are resident pages in ARC's sense), but
// only free slots can be reused: a held slot leaves its list's order while
// running and returns to the MRU end of its list (T2 after a hit) when its last
// holder releases it. So "LRU" here is release order, as for the lru order; in
// replay, where a request's pages are released as they are touched, it is the
// paper's recency, and replay's hits are the paper's (tests/curve/policy_test.cc
// checks them against a direct transcription). Slots without a page id (generated
// tokens) are not pages: acquiring one when no empty slot is left reuses a slot by
// REPLACE as above. The ghosts are page ids in the core's page map (their numbers
// here): at most 2c ids in all and |T1| + |B1| <= c.
//
// Slot fields used: prev/next (the free lists), in_main (T2, else T1), in_order.
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "base/byte_io.h"
#include "curve/index_list.h"
#include "curve/page_map.h"
#include "curve/policy_core.h"
#include "curve/policy_core_cache.h"
#include "curve/policy_internal.h"

namespace kvwatch::curve::policy_internal {

namespace {

class ArcOrder final : public EvictionOrder {
 public:
  ArcOrder(const CoreOptions& options, std::vector<CoreSlot>* slots)
      : slots_(*slots), c_(std::max<std::uint64_t>(1, options.slots)) {}

  bool KeepsGhosts() const override { return true; }

  void Incoming(PageId /*page*/, std::uint32_t ghost) override {
    const double c = static_cast<double>(c_);
    if (ghost != kNoGhost) {
      const std::uint32_t list = ghosts_.list(ghost);
      const double b1 = static_cast<double>(ghosts_.size(kB1));
      const double b2 = static_cast<double>(ghosts_.size(kB2));
      if (list == kB1) {  // case II
        p_ = std::min(c, p_ + (b1 >= b2 ? 1.0 : b2 / b1));
      } else {  // case III
        p_ = std::max(0.0, p_ - (b2 >= b1 ? 1.0 : b1 / b2));
        from_b2_ = true;
      }
      // Out of its list; its number is freed once the page has its slot (the map
      // names it until then).
      ghosts_.Unlink(ghost);
      returning_ = ghost;
      to_t2_ = true;
      return;
    }
    // Case IV.
    const std::uint64_t l1 = t_[kT1] + ghosts_.size(kB1);
    const std::uint64_t total = l1 + t_[kT2] + ghosts_.size(kB2);
    if (l1 >= c_) {
      if (ghosts_.size(kB1) > 0) {
        Forget(ghosts_.front(kB1));
      } else {
        no_ghost_ = true;  // T1 fills the core: its LRU page leaves without a ghost
      }
    } else if (total >= 2 * c_) {
      Forget(ghosts_.front(ghosts_.size(kB2) == 0 ? kB1 : kB2));
    }
  }

  void Filled(std::uint32_t s) override {
    CoreSlot& x = slots_[s];
    x.in_main = to_t2_;
    ++t_[x.in_main ? kT2 : kT1];
    if (returning_ != kNoGhost) ghosts_.Free(returning_);
    returning_ = kNoGhost;
    to_t2_ = from_b2_ = no_ghost_ = false;
  }

  void Hit(std::uint32_t s) override {
    CoreSlot& x = slots_[s];
    if (x.in_main) return;
    --t_[kT1];
    ++t_[kT2];
    x.in_main = true;
  }

  void Add(std::uint32_t s) override {
    CoreSlot& x = slots_[s];
    free_[x.in_main ? kT2 : kT1].PushBack(slots_, s);
    x.in_order = true;
  }

  void Remove(std::uint32_t s) override {
    CoreSlot& x = slots_[s];
    free_[x.in_main ? kT2 : kT1].Erase(slots_, s);
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
    const std::uint32_t s = free_[from].front();
    Remove(s);
    --t_[from];
    evicted_to_ = ghost ? (from == kT1 ? kB1 : kB2) : kNoList;
    return s;
  }

  std::uint32_t Evicted(std::uint32_t s) override {
    const std::uint32_t list = evicted_to_;
    evicted_to_ = kNoList;
    return list == kNoList ? kNoGhost : ghosts_.Add(slots_[s].page, list);
  }

  std::uint64_t size() const override { return free_[kT1].size() + free_[kT2].size(); }
  // REPLACE's choice as it stands (a ghost hit may change it).
  Slot PeekVictim() const override {
    const double t1 = static_cast<double>(t_[kT1]);
    std::uint32_t from = t_[kT1] >= 1 && t1 > p_ ? kT1 : kT2;
    if (free_[from].empty()) from = 1 - from;
    return free_[from].front();
  }
  std::size_t MemoryBytes() const override { return ghosts_.MemoryBytes(); }

  // p, the free slots of T1 and of T2 (least recently released first), then the
  // ghosts of B1 and of B2 (LRU first). |T1| and |T2| are the slots' in_main flags.
  void SerializeOrder(std::vector<std::uint8_t>* out) const override {
    base::AppendPod(out, p_);
    for (const IndexList& list : free_) {
      base::AppendPod<std::uint64_t>(out, list.size());
      for (std::uint32_t s = list.front(); s != kIndexNil; s = slots_[s].next) base::AppendPod(out, s);
    }
    for (std::uint32_t l : {kB1, kB2}) {
      base::AppendPod<std::uint64_t>(out, ghosts_.size(l));
      ghosts_.ForEach(l, [&](PageId page) { base::AppendPod(out, page); });
    }
  }

  bool DeserializeOrder(std::span<const std::uint8_t>* in) override {
    const double c = static_cast<double>(c_);
    if (size() != 0 || t_[kT1] + t_[kT2] != 0 || !base::ReadPod(in, &p_) || !(p_ >= 0 && p_ <= c)) return false;
    for (const CoreSlot& x : slots_) {
      if (x.has_page) ++t_[x.in_main ? kT2 : kT1];
    }
    for (std::uint32_t l : {kT1, kT2}) {
      std::uint64_t n = 0;
      if (!base::ReadCount(in, &n, sizeof(std::uint32_t))) return false;
      for (std::uint64_t k = 0; k < n; ++k) {
        std::uint32_t s = 0;
        // A free slot with a page of this list, once (the core checks after that
        // every candidate is listed).
        if (!base::ReadPod(in, &s) || s >= slots_.size() || slots_[s].in_order || slots_[s].holds != 0 ||
            !slots_[s].has_page || slots_[s].in_main != (l == kT2)) {
          return false;
        }
        Add(s);
      }
    }
    for (std::uint32_t l : {kB1, kB2}) {
      std::uint64_t n = 0;
      if (!base::ReadCount(in, &n, sizeof(PageId)) || n > 2 * c_) return false;
      for (std::uint64_t k = 0; k < n; ++k) {
        PageId page = 0;
        if (!base::ReadPod(in, &page)) return false;
        const std::uint32_t g = ghosts_.Add(page, l);
        if (!RestoreGhostPage(page, g)) return false;  // resident, or a ghost twice
      }
    }
    // The paper's invariants: |T1| + |B1| <= c and at most 2c ids.
    return t_[kT1] + ghosts_.size(kB1) <= c_ && t_[kT1] + t_[kT2] + ghosts_.size(kB1) + ghosts_.size(kB2) <= 2 * c_;
  }

 private:
  enum : std::uint32_t { kT1 = 0, kT2 = 1, kB1 = 0, kB2 = 1, kNoList = 2 };

  // Drops ghost g from the directory (its page leaves the page map).
  void Forget(std::uint32_t g) {
    const PageId page = ghosts_.page(g);
    ghosts_.Unlink(g);
    ghosts_.Free(g);
    ForgetGhostPage(page);
  }

  std::vector<CoreSlot>& slots_;
  std::uint64_t c_;
  double p_ = 0;                 // the target size of T1
  std::uint64_t t_[2] = {0, 0};  // |T1|, |T2|: cached slots, held or free
  IndexList free_[2];            // the free slots of T1 and T2, LRU (released first) at the front
  GhostTable<2> ghosts_;         // B1, B2, LRU at the front
  // Set by Incoming for the page being acquired, cleared when it is filled.
  bool to_t2_ = false;                  // it was a ghost: it enters T2
  bool from_b2_ = false;                // it was in B2 (REPLACE's tie rule)
  bool no_ghost_ = false;               // case IV(A) with T1 filling the core
  std::uint32_t returning_ = kNoGhost;  // its ghost number, freed at Filled
  std::uint32_t evicted_to_ = kNoList;  // set by Pop: the ghost list of the victim's page
};

}  // namespace

std::unique_ptr<EvictionOrder> MakeArcOrder(const CoreOptions& options, std::vector<CoreSlot>* slots) {
  return NewOrder<ArcOrder>(options, slots);
}

// Replay's and the canaries' arc.
std::unique_ptr<PolicyCache> MakeArcCache(const PolicyOptions& options) { return NewCoreCache<ArcOrder>(options); }

}  // namespace kvwatch::curve::policy_internal
