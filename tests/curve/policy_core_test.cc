// The policy core (curve/policy_core.h), per policy: hold and release (a held page
// is never a victim; all held is reported; releases that do not match a hold change
// nothing; two holds need two releases), and hand-worked evictions where each step
// is a request (its arrival index, priority and class) admitting a page or hitting
// a resident one, holding its slot for a moment and releasing it; the test checks
// which pages are still resident after a slot had to be reused.
#include "curve/policy_core.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <span>
#include <vector>

namespace kvwatch::curve {
namespace {

std::unique_ptr<PolicyCore> Core(PolicyKind kind, std::uint64_t slots, const NextUseOracle* future = nullptr) {
  auto core = MakePolicyCore({kind, slots, future});
  EXPECT_TRUE(core.ok()) << PolicyName(kind);
  return core.ok() ? std::move(core.value()) : nullptr;
}

// A page admitted for request r and kept held.
Slot AdmitHeld(PolicyCore& core, PageId page, std::uint32_t r = 0) {
  core.SetReferrer({r, 0, 0});
  const Slot s = core.AcquireFor(page);
  if (s != kNoSlot) core.Admit(s, page, kNoSlot, core.NewEpoch(), 0);
  return s;
}

// The future of a script of one page per request (belady's core needs one).
struct Future {
  explicit Future(std::vector<PageId> p) : pages(std::move(p)) {
    for (const PageId& q : pages) spans.emplace_back(&q, 1);
    oracle = std::make_unique<NextUseOracle>(spans);
  }
  std::vector<PageId> pages;
  std::vector<std::span<const PageId>> spans;
  std::unique_ptr<NextUseOracle> oracle;
};

// Every policy: with every slot held, no victim; the caller learns it (kNoSlot,
// Obtainable() 0) and nothing changes. Released, the slot is the victim.
TEST(PolicyCoreTest, AllHeldGivesNoVictimAndChangesNothing) {
  const Future future({1, 2, 3, 4});
  for (PolicyKind kind : kAllPolicies) {
    if (!HasCore(kind)) continue;
    SCOPED_TRACE(PolicyName(kind));
    auto core = Core(kind, 2, future.oracle.get());
    const Slot a = AdmitHeld(*core, 1, 0), b = AdmitHeld(*core, 2, 1);
    ASSERT_NE(a, kNoSlot);
    ASSERT_NE(b, kNoSlot);
    EXPECT_EQ(core->Obtainable(), 0u);
    EXPECT_EQ(core->AcquireFor(3), kNoSlot);
    EXPECT_EQ(core->Acquire(), kNoSlot);
    EXPECT_EQ(core->Find(1), a);
    EXPECT_EQ(core->Find(2), b);
    EXPECT_EQ(core->held(), 2u);
    // Page 2 released: it is the only candidate, whatever the order.
    EXPECT_TRUE(core->Release(b));
    EXPECT_EQ(core->Obtainable(), 1u);
    EXPECT_EQ(AdmitHeld(*core, 3, 2), b);
    EXPECT_EQ(core->Find(2), kNoSlot);
    EXPECT_EQ(core->Find(1), a);
  }
}

// Every policy: the page map's layout (runs, as replay's caches use) changes no
// answer. Requests of consecutive ids, some repeating earlier ones, through a core
// in each layout: the same slots, the same hits, the same pages resident.
TEST(PolicyCoreTest, TheRunsLayoutEvictsAsTheMixedOne) {
  std::vector<PageId> pages;
  for (std::uint64_t r = 0; r < 300; ++r) {
    const PageId first = (r % 7 == 3 ? r / 2 : r) * 100;  // every seventh repeats an earlier request
    for (PageId p = first; p < first + 1 + r % 11; ++p) pages.push_back(p);
  }
  std::vector<std::span<const PageId>> spans;
  for (const PageId& p : pages) spans.emplace_back(&p, 1);
  const NextUseOracle future(spans);
  for (PolicyKind kind : kAllPolicies) {
    if (!HasCore(kind)) continue;
    SCOPED_TRACE(PolicyName(kind));
    auto mixed = MakePolicyCore({kind, 24, &future});
    auto runs = MakePolicyCore({kind, 24, &future, 0.1, 1, PageMapLayout::kRuns});
    ASSERT_TRUE(mixed.ok() && runs.ok());
    for (std::uint32_t r = 0; r < pages.size(); ++r) {
      SCOPED_TRACE(r);
      std::vector<Slot> got;
      for (PolicyCore* core : {mixed.value().get(), runs.value().get()}) {
        core->SetReferrer({r, 0, 0});
        Slot s = core->Find(pages[r]);
        if (s == kNoSlot) {
          s = core->AcquireFor(pages[r]);
          ASSERT_NE(s, kNoSlot);
          core->Admit(s, pages[r], kNoSlot, core->NewEpoch(), 0);
          ASSERT_TRUE(core->Release(s));
        } else {
          core->Reference(s);
        }
        got.push_back(s);
      }
      ASSERT_EQ(got[0], got[1]);
      ASSERT_EQ(mixed.value()->resident(), runs.value()->resident());
    }
    for (PageId p : pages) EXPECT_EQ(mixed.value()->Find(p), runs.value()->Find(p)) << p;
  }
}

// fifo: pages admitted in key order (replay) and against it (the replica admits a
// request's pages head first, each ranked tail first) leave by key, the oldest
// first, whichever queue holds them; a held page met first is requeued as admitted
// now, after every other.
TEST(PolicyCoreTest, FifoEvictsByKeyWhateverTheAdmissionOrder) {
  auto core = Core(PolicyKind::kFifo, 6);
  // Request 1: pages 10..13 admitted head first, page 10 ranked last (the
  // smallest key is page 13's); request 2: pages 20, 21 ranked in admission order.
  std::uint64_t epoch = core->NewEpoch();
  for (PageId p = 10; p < 14; ++p) {
    const Slot s = core->AcquireFor(p);
    ASSERT_NE(s, kNoSlot);
    core->Admit(s, p, kNoSlot, epoch, p - 10);
    if (p != 12) ASSERT_TRUE(core->Release(s));  // 12 stays held
  }
  epoch = core->NewEpoch();
  for (PageId p = 20; p < 22; ++p) {
    const Slot s = core->AcquireFor(p);
    core->Admit(s, p, kNoSlot, epoch, 21 - p);
    ASSERT_TRUE(core->Release(s));
  }
  // Victims, oldest key first: 13, (12 held: requeued), 11, 10, 20, 21, then 12.
  std::vector<PageId> victims;
  const std::vector<PageId> all = {10, 11, 12, 13, 20, 21};
  for (PageId p = 30; p < 35; ++p) {
    const Slot s = AdmitHeld(*core, p);
    ASSERT_NE(s, kNoSlot);
    for (PageId q : all) {
      if (core->Find(q) == kNoSlot && std::find(victims.begin(), victims.end(), q) == victims.end()) {
        victims.push_back(q);
      }
    }
  }
  EXPECT_EQ(victims, (std::vector<PageId>{13, 11, 10, 20, 21}));
  ASSERT_TRUE(core->Release(core->Find(12)));
  EXPECT_NE(AdmitHeld(*core, 40), kNoSlot);
  EXPECT_EQ(core->Find(12), kNoSlot);
}

// A page held twice stays held after one release; the second makes it a victim.
TEST(PolicyCoreTest, HoldTwiceNeedsTwoReleases) {
  const Future future({1, 1, 2, 3});
  for (PolicyKind kind : kAllPolicies) {
    if (!HasCore(kind)) continue;
    SCOPED_TRACE(PolicyName(kind));
    auto core = Core(kind, 1, future.oracle.get());
    const Slot a = AdmitHeld(*core, 1, 0);
    core->SetReferrer({1, 0, 0});
    core->Hold(a);
    EXPECT_EQ(core->holds(a), 2u);
    EXPECT_TRUE(core->Release(a));
    EXPECT_EQ(core->holds(a), 1u);
    EXPECT_EQ(AdmitHeld(*core, 2, 2), kNoSlot);  // still held
    EXPECT_TRUE(core->Release(a));
    EXPECT_EQ(core->holds(a), 0u);
    EXPECT_EQ(AdmitHeld(*core, 2, 2), a);
    EXPECT_EQ(core->Find(1), kNoSlot);
  }
}

// Releasing a slot that is not held (released already, its page evicted, or not a
// slot at all) is refused and changes nothing: no negative count, no candidate twice.
TEST(PolicyCoreTest, ReleaseOfAnUnheldEvictedOrUnknownSlotIsRefused) {
  const Future future({1, 2, 3, 4});
  for (PolicyKind kind : kAllPolicies) {
    if (!HasCore(kind)) continue;
    SCOPED_TRACE(PolicyName(kind));
    auto core = Core(kind, 2, future.oracle.get());
    const Slot a = AdmitHeld(*core, 1, 0);
    EXPECT_TRUE(core->Release(a));
    EXPECT_FALSE(core->Release(a));      // already free
    EXPECT_FALSE(core->Release(12345));  // not a slot
    EXPECT_EQ(core->held(), 0u);
    EXPECT_EQ(core->Obtainable(), 2u);
    const Slot b = AdmitHeld(*core, 2, 1);
    EXPECT_TRUE(core->Release(b));
    const Slot c = AdmitHeld(*core, 3, 2);  // evicts 1 or 2
    ASSERT_NE(c, kNoSlot);
    const Slot gone = core->Find(1) == kNoSlot ? a : b;
    EXPECT_EQ(c, gone);
    EXPECT_TRUE(core->Release(c));
    EXPECT_FALSE(core->Release(c));  // the evicted page's slot, free again
    EXPECT_EQ(core->held(), 0u);
    EXPECT_EQ(core->free_with_page(), 2u);
    EXPECT_EQ(core->Obtainable(), 2u);
  }
}

// sglang, 2 slots: page 2 extends page 1 (its parent). 1 is released before 2, so
// lru evicts 1; sglang evicts only leaves, so 2 goes, and then 1 is a leaf again.
TEST(PolicyCoreTest, SglangEvictsALeafBeforeItsParent) {
  for (PolicyKind kind : {PolicyKind::kSglang, PolicyKind::kLru}) {
    SCOPED_TRACE(PolicyName(kind));
    auto core = Core(kind, 2);
    const Slot s1 = AdmitHeld(*core, 1);
    const Slot s2 = core->AcquireFor(2);
    core->Admit(s2, 2, s1, core->NewEpoch(), 1);
    EXPECT_TRUE(core->Release(s1));
    EXPECT_TRUE(core->Release(s2));
    EXPECT_TRUE(core->Release(AdmitHeld(*core, 3)));
    EXPECT_EQ(core->Find(1) != kNoSlot, kind == PolicyKind::kSglang);
    EXPECT_EQ(core->Find(2) != kNoSlot, kind == PolicyKind::kLru);
    AdmitHeld(*core, 4);  // sglang: 1, now a leaf and released before 3
    EXPECT_EQ(core->Find(1), kNoSlot);
  }
}

// sglang: a free node whose only child is held cannot be evicted before the child:
// it is a candidate (Obtainable counts it) but no victim, so with every other slot
// held the core gives none (kNoSlot, nothing changes) instead of taking it. Once
// the child is released, the child goes first (a leaf), then the parent.
TEST(PolicyCoreTest, SglangHasNoVictimWhileAFreeNodesChildIsHeld) {
  auto core = Core(PolicyKind::kSglang, 2);
  const Slot s1 = AdmitHeld(*core, 1);
  const Slot s2 = core->AcquireFor(2);
  core->Admit(s2, 2, s1, core->NewEpoch(), 1);
  EXPECT_TRUE(core->Release(s1));  // free, but its child 2 is held
  EXPECT_EQ(core->free_with_page(), 1u);
  EXPECT_EQ(core->Obtainable(), 1u);
  EXPECT_EQ(core->AcquireFor(3), kNoSlot);
  EXPECT_EQ(core->Acquire(), kNoSlot);
  EXPECT_FALSE(core->EvictOne());
  EXPECT_EQ(core->Find(1), s1);
  EXPECT_EQ(core->free_with_page(), 1u);
  EXPECT_EQ(core->held(), 1u);
  EXPECT_TRUE(core->Release(s2));
  EXPECT_EQ(core->Obtainable(), 2u);
  EXPECT_TRUE(core->EvictOne());  // 2, the leaf; 1 only after it
  EXPECT_EQ(core->Find(2), kNoSlot);
  EXPECT_NE(core->Find(1), kNoSlot);
  EXPECT_EQ(core->Obtainable(), 2u);  // the emptied slot and 1
  EXPECT_TRUE(core->EvictOne());
  EXPECT_EQ(core->Find(1), kNoSlot);
  EXPECT_EQ(core->resident(), 0u);
  EXPECT_EQ(core->Obtainable(), 2u);
  EXPECT_FALSE(core->EvictOne());
}

// An unnamed page (sglang's generated page, AdmitUnnamed) takes its slot and keeps
// its parent from being a leaf like any page, is never found, and is evicted as a
// leaf in release order; a checkpoint keeps it unnamed.
TEST(PolicyCoreTest, AnUnnamedPageTakesASlotButIsNeverFound) {
  auto core = Core(PolicyKind::kSglang, 3);
  const Slot s1 = AdmitHeld(*core, 1);
  const Slot g = core->Acquire();
  core->AdmitUnnamed(g, s1);
  EXPECT_EQ(core->resident(), 2u);
  EXPECT_EQ(core->Find(0), kNoSlot);
  EXPECT_TRUE(core->Release(g));
  EXPECT_TRUE(core->Release(s1));
  std::vector<std::uint8_t> bytes;
  core->Serialize(&bytes);
  auto restored = Core(PolicyKind::kSglang, 3);
  std::span<const std::uint8_t> in(bytes);
  ASSERT_TRUE(restored->Deserialize(&in));
  EXPECT_TRUE(in.empty());
  for (PolicyCore* c : {core.get(), restored.get()}) {
    EXPECT_EQ(c->resident(), 2u);
    EXPECT_EQ(c->Find(0), kNoSlot);
    EXPECT_TRUE(c->Release(AdmitHeld(*c, 2)));  // the never-used slot
    EXPECT_TRUE(c->EvictOne());                 // the unnamed leaf, released first
    EXPECT_EQ(c->resident(), 2u);
    EXPECT_NE(c->Find(1), kNoSlot);
    EXPECT_TRUE(c->EvictOne());  // 1, a leaf now and released before 2
    EXPECT_EQ(c->Find(1), kNoSlot);
    EXPECT_NE(c->Find(2), kNoSlot);
  }
}

TEST(PolicyCoreTest, BadOptionsNameTheOption) {
  EXPECT_NE(MakePolicyCore({PolicyKind::kLru, 0}).error().find("slots"), std::string::npos);
  EXPECT_NE(MakePolicyCore({PolicyKind::kBelady, 4}).error().find("future"), std::string::npos);
}

class PoolScript {
 public:
  PoolScript(std::uint64_t slots, PolicyKind kind, const NextUseOracle* future = nullptr)
      : core_(Core(kind, slots, future)) {}
  // Request `r` computes `page` (not resident) and releases it.
  void Compute(Referrer r, PageId page) {
    ASSERT_EQ(core_->Find(page), kNoSlot) << page;
    core_->SetReferrer(r);
    const Slot s = core_->AcquireFor(page);
    ASSERT_NE(s, kNoSlot);
    core_->Admit(s, page, kNoSlot, core_->NewEpoch(), 0);
    ASSERT_TRUE(core_->Release(s));
  }
  // Request `r` hits resident `page` and releases it.
  void Hit(Referrer r, PageId page) {
    const Slot s = core_->Find(page);
    ASSERT_NE(s, kNoSlot) << page;
    core_->SetReferrer(r);
    core_->Reference(s);
  }
  bool InMain(PageId page) const {
    const Slot s = core_->Find(page);
    return s != kNoSlot && core_->slot(s).in_main;
  }
  std::set<PageId> Cached(std::initializer_list<PageId> among) const {
    std::set<PageId> out;
    for (PageId p : among) {
      if (core_->Find(p) != kNoSlot) out.insert(p);
    }
    return out;
  }

 private:
  std::unique_ptr<PolicyCore> core_;
};

using Pages = std::set<PageId>;

// ARC, c = 2. 1 and 2 enter T1; a hit moves 1 to T2. 3: |T1| = 1 > p = 0, so T1's
// LRU (2) goes to B1. 2 again is a B1 ghost: p = 1, and |T1| = 1 is not above p,
// so T2's LRU (1) goes to B2; 2 enters T2. 4 (new): |T1| = 1 = p, not from B2, so
// T2's LRU, 2, goes; lru would have evicted 3, released longest ago.
TEST(PolicyCoreTest, ArcChoosesByTheAdaptiveTarget) {
  PoolScript arc(2, PolicyKind::kArc), lru(2, PolicyKind::kLru);
  for (PoolScript* s : {&arc, &lru}) {
    s->Compute({0}, 1);
    s->Compute({1}, 2);
    s->Hit({2}, 1);
    s->Compute({3}, 3);
    EXPECT_EQ(s->Cached({1, 2, 3}), (Pages{1, 3}));
    s->Compute({4}, 2);
    EXPECT_EQ(s->Cached({1, 2, 3}), (Pages{2, 3}));
    s->Compute({5}, 4);
  }
  EXPECT_EQ(arc.Cached({1, 2, 3, 4}), (Pages{3, 4}));
  EXPECT_EQ(lru.Cached({1, 2, 3, 4}), (Pages{2, 4}));
}

// S3-FIFO, 10 slots: the small queue's share is 1 slot, the ghost queue's 9 ids.
// 1..10 enter the small queue; 1 is hit. 11: the small queue's head, 1, was hit, so
// it moves to the main queue; the next, 2, was not: evicted, its id a ghost (not
// found). 2 again: 3 is evicted and 2, a ghost, enters the main queue. A hit moves
// nothing: 4 and 10 are hit, 4 is still the small queue's head when 12 comes,
// promoted, and 5 behind it is evicted (10, hit later, stays in its place). 5
// again is a ghost: it enters the main queue, and 6 makes room.
TEST(PolicyCoreTest, S3FifoPromotesFromTheSmallQueueAndRemembersGhosts) {
  PoolScript s(10, PolicyKind::kS3Fifo);
  for (PageId p = 1; p <= 10; ++p) s.Compute({static_cast<std::uint32_t>(p)}, p);
  s.Hit({11}, 1);
  s.Compute({12}, 11);
  EXPECT_EQ(s.Cached({1, 2, 3}), (Pages{1, 3}));
  EXPECT_TRUE(s.InMain(1));
  s.Compute({13}, 2);
  EXPECT_EQ(s.Cached({2, 3, 4}), (Pages{2, 4}));
  EXPECT_TRUE(s.InMain(2));
  EXPECT_FALSE(s.InMain(4));
  s.Hit({14}, 4);
  s.Hit({15}, 10);
  s.Compute({16}, 12);
  EXPECT_EQ(s.Cached({4, 5, 6, 10}), (Pages{4, 6, 10}));
  EXPECT_TRUE(s.InMain(4));
  s.Compute({17}, 5);
  EXPECT_TRUE(s.InMain(5));
  EXPECT_EQ(s.Cached({6, 7}), (Pages{7}));  // 6, the small queue's head, made room
}

// S3-FIFO with running requests: a held page met at the small queue's head is not
// evicted but moves to the main queue (in use: re-accessed); the free one behind
// it is evicted. Released, it stays in the main queue: the next victim is the
// small queue's page.
TEST(PolicyCoreTest, S3FifoPromotesAHeldPage) {
  auto core = Core(PolicyKind::kS3Fifo, 2);
  const Slot a = AdmitHeld(*core, 1, 0);
  EXPECT_TRUE(core->Release(AdmitHeld(*core, 2, 1)));
  EXPECT_NE(AdmitHeld(*core, 3, 2), kNoSlot);
  EXPECT_EQ(core->Find(1), a);
  EXPECT_TRUE(core->slot(a).in_main);
  EXPECT_EQ(core->Find(2), kNoSlot);
  EXPECT_TRUE(core->Release(a));
  EXPECT_TRUE(core->Release(core->Find(3)));
  EXPECT_NE(AdmitHeld(*core, 4, 3), kNoSlot);
  EXPECT_EQ(core->Find(1), a);
  EXPECT_EQ(core->Find(3), kNoSlot);
}

// LFU-DA, 3 blocks. 1 is referenced 3 times, 2 twice, 3 once: 4 evicts 3 (key 1),
// and the cache age L becomes 1. 4 is released with key 1 + 1 = 2, as 2's (2 + 0):
// the tie goes to 2, released longer ago. Plain LFU would have evicted 4.
TEST(PolicyCoreTest, LfuEvictsTheFewestReferencesWithAging) {
  PoolScript s(3, PolicyKind::kLfu);
  s.Compute({0}, 1);
  s.Compute({1}, 2);
  s.Compute({2}, 3);
  s.Hit({3}, 1);
  s.Hit({4}, 1);
  s.Hit({5}, 2);
  s.Compute({6}, 4);
  EXPECT_EQ(s.Cached({1, 2, 3, 4}), (Pages{1, 2, 4}));
  s.Compute({7}, 5);
  EXPECT_EQ(s.Cached({1, 2, 3, 4, 5}), (Pages{1, 4, 5}));
}

// priority, 3 blocks: the lowest level first, the one released longest ago within
// it. A page takes the priority of the request that referenced it last.
TEST(PolicyCoreTest, PriorityEvictsTheLowestLevelThenTheOldest) {
  PoolScript s(3, PolicyKind::kPriority);
  s.Compute({0, 5}, 1);
  s.Compute({1, 0}, 2);
  s.Compute({2, 5}, 3);
  s.Compute({3, 9}, 4);  // 2 (level 0) goes
  EXPECT_EQ(s.Cached({1, 2, 3, 4}), (Pages{1, 3, 4}));
  s.Hit({4, 9}, 1);      // 1 rises to level 9
  s.Compute({5, 9}, 5);  // 3, alone at level 5, goes
  EXPECT_EQ(s.Cached({1, 3, 4, 5}), (Pages{1, 4, 5}));
  s.Compute({6, 9}, 6);  // level 9: 4 was released before 1's hit
  EXPECT_EQ(s.Cached({1, 4, 5, 6}), (Pages{1, 5, 6}));
}

// belady, 3 blocks, requests 0..6 of one page each: 1 2 3 4 2 1 3. At request 3
// the next uses are 1 -> request 5, 2 -> 4, 3 -> 6: 3 goes. At request 4 (2, a
// hit) nothing goes; then 5 (1) hits, and 6 finds 3 evicted: it evicts 4, never
// used again.
TEST(PolicyCoreTest, BeladyEvictsTheFarthestNextUseInArrivalOrder) {
  const std::vector<PageId> pages = {1, 2, 3, 4, 2, 1, 3};
  std::vector<std::span<const PageId>> reqs;
  for (const PageId& p : pages) reqs.emplace_back(&p, 1);
  const NextUseOracle future(reqs);
  PoolScript s(3, PolicyKind::kBelady, &future);
  s.Compute({0}, 1);
  s.Compute({1}, 2);
  s.Compute({2}, 3);
  s.Compute({3}, 4);
  EXPECT_EQ(s.Cached({1, 2, 3, 4}), (Pages{1, 2, 4}));
  s.Hit({4}, 2);
  s.Hit({5}, 1);
  s.Compute({6}, 3);
  EXPECT_EQ(s.Cached({1, 2, 3, 4}), (Pages{1, 2, 3}));
}

// workload-aware, 3 blocks. Class 0: page 1 computed by request 0 and reused by
// request 10 (p = 2/4, mu = 11/2). Class 1: pages 2 and 3 by requests 11 and 12,
// never reused (p = 1/4, mu = 1). At request 13, page 1 (age 3) scores
// log(1/2) - 3/5.5 = -1.24 and page 2 (age 2, its class's oldest) log(1/4) - 2 =
// -3.39: page 2 goes, although page 1 was released longer ago (lru's victim).
TEST(PolicyCoreTest, WorkloadAwareEvictsTheLeastLikelyReuse) {
  PoolScript s(3, PolicyKind::kWorkloadAware);
  s.Compute({0, 0, 0}, 1);
  s.Hit({10, 0, 0}, 1);
  s.Compute({11, 0, 1}, 2);
  s.Compute({12, 0, 1}, 3);
  s.Compute({13, 0, 1}, 4);
  EXPECT_EQ(s.Cached({1, 2, 3, 4}), (Pages{1, 3, 4}));
}

}  // namespace
}  // namespace kvwatch::curve
