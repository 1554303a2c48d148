// ARC (curve/policy.h): Megiddo and Modha, "ARC: A Self-Tuning, Low Overhead
// Replacement Cache", FAST 2003 (Figure 4, the algorithm ARC(c)).
//
// Four LRU lists over page ids: T1 (resident, referenced once since they entered
// the directory), T2 (resident, referenced at least twice), and the ghosts B1 and
// B2 (ids recently evicted from T1 and T2, no data). p, 0 <= p <= c, is the target
// size of T1. On the reference of page x, with c the capacity:
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
// p is a real number, as in the paper (d1 and d2 are ratios). Every REPLACE
// happens with the cache full (pages leave only through REPLACE and case IV(A)),
// so at most c pages are resident and the directory holds at most 2c ids.
//
// Under the curve's prefix rule (curve/policy.h) a request's hits are its leading
// resident pages at arrival; then each of its pages, in touch order, is one ARC
// reference as above.
#include <algorithm>
#include <array>
#include <cstdint>

#include "base/byte_io.h"
#include "curve/index_list.h"
#include "curve/page_map.h"
#include "curve/policy.h"
#include "curve/policy_internal.h"

namespace kvwatch::curve {

namespace {

class ArcCache final : public PolicyCache {
 public:
  explicit ArcCache(const PolicyOptions& options) : options_(options) {}

  SimOutcome Process(const SimRequest& request) override {
    SimOutcome out;
    out.hits = policy_internal::LeadingResident(request.pages, [&](PageId p) {
      const std::uint32_t* found = map_.Find(p);
      return found != nullptr && IsResident(nodes_[*found].list);
    });
    policy_internal::ForEachInTouchOrder(request.pages.size(), options_.touch_order, [&](std::size_t i) {
      policy_internal::PrefetchAhead(map_, request.pages, i, options_.touch_order);
      Reference(request.pages[i]);
    });
    return out;
  }

  std::uint64_t resident() const override { return lists_[kT1].size() + lists_[kT2].size(); }
  std::size_t MemoryBytes() const override { return map_.MemoryBytes() + nodes_.MemoryBytes(); }

  // p, then T1, T2, B1 and B2, each from its LRU end to its MRU end.
  void Serialize(std::vector<std::uint8_t>* out) const override {
    base::AppendPod(out, p_);
    for (std::uint32_t l = 0; l < kLists; ++l) {
      base::AppendPod<std::uint64_t>(out, lists_[l].size());
      for (std::uint32_t i = lists_[l].front(); i != kNil; i = nodes_[i].next) base::AppendPod(out, nodes_[i].page);
    }
  }

  bool Deserialize(std::span<const std::uint8_t>* in) override {
    const double c = static_cast<double>(options_.capacity);
    if (map_.size() != 0 || !base::ReadPod(in, &p_) || !(p_ >= 0 && p_ <= c)) return false;
    for (std::uint32_t l = 0; l < kLists; ++l) {
      std::uint64_t n = 0;
      if (!base::ReadCount(in, &n, sizeof(PageId)) || n > 2 * options_.capacity) return false;
      map_.Reserve(map_.size() + n);
      for (std::uint64_t k = 0; k < n; ++k) {
        PageId page = 0;
        if (!base::ReadPod(in, &page) || map_.Find(page) != nullptr) return false;
        const std::uint32_t index = nodes_.Allocate();
        nodes_[index] = Node{page, kNil, kNil, l};
        map_.Insert(page, index);
        PushMru(l, index);
      }
    }
    // The paper's invariants: at most c resident, |T1| + |B1| <= c, at most 2c ids,
    // and ghosts only once the cache is full.
    const std::uint64_t cap = options_.capacity;
    return resident() <= cap && lists_[kT1].size() + lists_[kB1].size() <= cap && map_.size() <= 2 * cap &&
           (resident() == cap || lists_[kB1].size() + lists_[kB2].size() == 0);
  }

 private:
  static constexpr std::uint32_t kNil = kIndexNil;
  enum : std::uint32_t { kT1 = 0, kT2 = 1, kB1 = 2, kB2 = 3, kLists = 4 };
  struct Node {
    PageId page = 0;
    std::uint32_t prev = kNil;  // towards the LRU end
    std::uint32_t next = kNil;  // towards the MRU end
    std::uint32_t list = kT1;
  };
  static bool IsResident(std::uint32_t list) { return list == kT1 || list == kT2; }

  void Reference(PageId page) {
    const double c = static_cast<double>(options_.capacity);
    if (std::uint32_t* found = map_.Find(page)) {
      const std::uint32_t index = *found;
      const std::uint32_t list = nodes_[index].list;
      if (IsResident(list)) {  // case I
        Move(index, kT2);
        return;
      }
      const double b1 = static_cast<double>(lists_[kB1].size());
      const double b2 = static_cast<double>(lists_[kB2].size());
      if (list == kB1) {  // case II
        p_ = std::min(c, p_ + (b1 >= b2 ? 1.0 : b2 / b1));
      } else {  // case III
        p_ = std::max(0.0, p_ - (b2 >= b1 ? 1.0 : b1 / b2));
      }
      Replace(list == kB2);
      Move(index, kT2);
      return;
    }
    // Case IV.
    const std::uint64_t cap = options_.capacity;
    const std::uint64_t l1 = lists_[kT1].size() + lists_[kB1].size();
    const std::uint64_t total = l1 + lists_[kT2].size() + lists_[kB2].size();
    if (l1 == cap) {
      if (lists_[kT1].size() < cap) {
        Drop(lists_[kB1].front());
        Replace(false);
      } else {
        Drop(lists_[kT1].front());
      }
    } else if (total >= cap) {
      if (total == 2 * cap) Drop(lists_[kB2].front());
      Replace(false);
    }
    const std::uint32_t index = nodes_.Allocate();
    nodes_[index] = Node{page, kNil, kNil, kT1};
    map_.Insert(page, index);
    PushMru(kT1, index);
  }

  // REPLACE(x, p); in_b2: x is in B2.
  void Replace(bool in_b2) {
    const double t1 = static_cast<double>(lists_[kT1].size());
    if (lists_[kT1].size() >= 1 && (t1 > p_ || (in_b2 && t1 == p_))) {
      Move(lists_[kT1].front(), kB1);
    } else if (lists_[kT2].size() >= 1) {
      Move(lists_[kT2].front(), kB2);
    }
  }

  void Move(std::uint32_t index, std::uint32_t to) {
    Unlink(index);
    nodes_[index].list = to;
    PushMru(to, index);
  }

  // Forgets an id (a ghost, or a T1 page in case IV(A)).
  void Drop(std::uint32_t index) {
    Unlink(index);
    map_.Erase(nodes_[index].page);
    nodes_.Release(index);
  }

  // Each list's front is its LRU end, its back the MRU end.
  void PushMru(std::uint32_t list, std::uint32_t index) { lists_[list].PushBack(nodes_, index); }
  void Unlink(std::uint32_t index) { lists_[nodes_[index].list].Erase(nodes_, index); }

  PolicyOptions options_;
  double p_ = 0;  // the target size of T1
  PageMap map_;   // every id in the directory (T1, T2, B1, B2) -> its node
  policy_internal::SlotPool<Node> nodes_;
  std::array<IndexList, kLists> lists_{};
};

}  // namespace

namespace policy_internal {

std::unique_ptr<PolicyCache> MakeArcCache(const PolicyOptions& options) { return std::make_unique<ArcCache>(options); }

}  // namespace policy_internal

}  // namespace kvwatch::curve
