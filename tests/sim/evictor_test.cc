// The replica's eviction policies: where vllm's one free queue differs from lru,
// and the pool's accounting under every policy and rule on a constrained workload.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <span>

#include "sim/replica.h"

namespace kvwatch::sim {
namespace {

ReplicaRequest One(double arrival, curve::PageId page, std::uint32_t output) {
  ReplicaRequest r;
  r.arrival_s = arrival;
  r.pages = {page};
  r.prompt_tokens = 4;
  r.output_tokens = output;
  return r;
}

std::vector<RequestOutcome> Outcomes(curve::PolicyKind kind, const std::vector<ReplicaRequest>& reqs, std::uint64_t pool) {
  const LinearStepTime time({1, 0, 0, 0, 0});
  ReplicaOptions o;
  o.pool_blocks = pool;
  o.block_tokens = 4;
  o.eviction = kind;
  std::vector<RequestOutcome> out;
  ReplicaObserver obs;
  obs.outcomes = &out;
  EXPECT_TRUE(SimulateReplicaObserved(o, reqs, time, {}, obs).ok());
  return out;
}

// Page 1 is released before request 2's generated block: vLLM's free queue then
// reuses page 1's block first, lru the empty generated block.
TEST(EvictorTest, VllmQueuesEmptyBlocksBehindCachedOnes) {
  const std::vector<ReplicaRequest> reqs = {One(0, 1, 1), One(10, 2, 5), One(100, 4, 1), One(200, 1, 1)};
  EXPECT_EQ(Outcomes(curve::PolicyKind::kLru, reqs, 3)[3].hit_pages, 1u);
  EXPECT_EQ(Outcomes(curve::PolicyKind::kVllm, reqs, 3)[3].hit_pages, 0u);
}

// Under memory pressure, every policy and rule: blocks held plus free blocks make
// the pool at every step, every request finishes, and the prefix cache serves some.
TEST(EvictorTest, EveryPolicyAndRuleKeepsThePoolAccountedUnderPressure) {
  std::mt19937_64 rng(42);
  std::exponential_distribution<double> gap(3);
  std::uniform_int_distribution<std::uint32_t> depth(1, 12), child(0, 2), output(1, 200);
  std::vector<ReplicaRequest> reqs;
  double t = 0;
  for (int i = 0; i < 2000; ++i) {
    t += gap(rng);
    ReplicaRequest r;
    r.arrival_s = t;
    std::uint64_t id = 1;
    const std::uint32_t d = depth(rng);
    for (std::uint32_t k = 0; k < d; ++k) {
      id = id * 4 + child(rng) + 1;
      r.pages.push_back(id);
    }
    r.prompt_tokens = d * 16 - 3;  // a partial last page
    r.output_tokens = output(rng);
    reqs.push_back(std::move(r));
  }
  const LinearStepTime time({0.01, 1e-5, 0, 1e-4, 0});
  for (curve::PolicyKind kind : curve::kAllPolicies) {
    for (Admission a : kAllAdmissions) {
      ReplicaOptions o;
      o.pool_blocks = 120;
      o.block_tokens = 16;
      o.max_batched_tokens = 256;
      o.eviction = kind;
      o.admission = a;
      bool accounted = true;
      ReplicaObserver obs;
      obs.on_step = [&](const StepRecord& s) {
        accounted = accounted && s.held_blocks + s.free_blocks == o.pool_blocks && s.cached_free_blocks <= s.free_blocks;
      };
      auto r = SimulateReplicaObserved(o, reqs, time, {}, obs);
      ASSERT_TRUE(r.ok()) << r.error();
      const std::string what = std::string(curve::PolicyName(kind)) + "/" + std::string(AdmissionName(a));
      EXPECT_TRUE(accounted) << what;
      EXPECT_EQ(r.value().finished, reqs.size()) << what;
      EXPECT_GT(r.value().prefix_hit_ratio, 0.2) << what;
      EXPECT_LE(r.value().mean_running_blocks + r.value().mean_cached_blocks, 120.0) << what;
    }
  }
}

}  // namespace
}  // namespace kvwatch::sim

namespace kvwatch::sim {
namespace {

// A request holds its whole prefix and releases its tail first, so a free block is
// never released later than its free children: lru's victim is always a leaf, the
// least recently released one, which is sglang's choice. The two coincide here
// (curve's sglang differs from its lru by its lifetimes and touch order).
TEST(EvictorTest, SglangChoosesAsLruInThisModel) {
  std::mt19937_64 rng(9);
  std::exponential_distribution<double> gap(5);
  std::uniform_int_distribution<std::uint32_t> depth(1, 10), child(0, 3), output(1, 100);
  std::vector<ReplicaRequest> reqs;
  double t = 0;
  for (int i = 0; i < 3000; ++i) {
    t += gap(rng);
    ReplicaRequest r;
    r.arrival_s = t;
    std::uint64_t id = 7;
    const std::uint32_t d = depth(rng);
    for (std::uint32_t k = 0; k < d; ++k) {
      id = id * 5 + child(rng) + 1;
      r.pages.push_back(id);
    }
    r.prompt_tokens = d * 16;
    r.output_tokens = output(rng);
    reqs.push_back(std::move(r));
  }
  const LinearStepTime time({0.01, 1e-5, 0, 1e-4, 0});
  ReplicaOptions o;
  o.pool_blocks = 150;
  o.block_tokens = 16;
  std::vector<RequestOutcome> lru, sglang;
  ReplicaObserver obs;
  obs.outcomes = &lru;
  ASSERT_TRUE(SimulateReplicaObserved(o, reqs, time, {}, obs).ok());
  o.eviction = curve::PolicyKind::kSglang;
  obs.outcomes = &sglang;
  ASSERT_TRUE(SimulateReplicaObserved(o, reqs, time, {}, obs).ok());
  std::uint64_t hits = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_EQ(lru[i].hit_pages, sglang[i].hit_pages) << i;
    ASSERT_EQ(lru[i].finish_s, sglang[i].finish_s) << i;
    hits += lru[i].hit_pages;
  }
  EXPECT_GT(hits, reqs.size());
}

}  // namespace
}  // namespace kvwatch::sim

// Hand-worked evictions on the pool itself (sim/kv_pool.h): each step is a request
// (its arrival index, priority and class) computing a page or hitting a cached one,
// holding its block for a moment and releasing it; the test checks which pages are
// still cached after a block had to be reused.
#include "sim/kv_pool.h"

namespace kvwatch::sim {
namespace {

using internal::KvPool;
using internal::Referrer;

class PoolScript {
 public:
  PoolScript(std::uint64_t blocks, curve::PolicyKind kind, std::span<const ReplicaRequest> requests = {})
      : pool_(blocks, kind, requests) {}
  // Request `r` computes `page` (not cached) and releases it.
  void Compute(Referrer r, curve::PageId page) {
    ASSERT_EQ(pool_.Find(page), internal::kNoBlock) << page;
    pool_.SetReferrer(r);
    const std::uint32_t b = pool_.AllocateFor(page);
    pool_.Fill(b, page, internal::kNoBlock, pool_.NewEpoch(), 0);
    pool_.Release(std::span<const std::uint32_t>(&b, 1));
  }
  // Request `r` hits cached `page` and releases it.
  void Hit(Referrer r, curve::PageId page) {
    const std::uint32_t b = pool_.Find(page);
    ASSERT_NE(b, internal::kNoBlock) << page;
    pool_.SetReferrer(r);
    pool_.Hold(b);
    pool_.Release(std::span<const std::uint32_t>(&b, 1));
  }
  std::set<curve::PageId> Cached(std::initializer_list<curve::PageId> among) const {
    std::set<curve::PageId> out;
    for (curve::PageId p : among) {
      if (pool_.Find(p) != internal::kNoBlock) out.insert(p);
    }
    return out;
  }

 private:
  KvPool pool_;
};

using Pages = std::set<curve::PageId>;

// ARC, c = 2. 1 and 2 enter T1; a hit moves 1 to T2. 3: |T1| = 1 > p = 0, so T1's
// LRU (2) goes to B1. 2 again is a B1 ghost: p = 1, and |T1| = 1 is not above p,
// so T2's LRU (1) goes to B2; 2 enters T2. 4 (new): |T1| = 1 = p, not from B2, so
// T2's LRU, 2, goes; lru would have evicted 3, released longest ago.
TEST(EvictorTest, ArcChoosesByTheAdaptiveTarget) {
  PoolScript arc(2, curve::PolicyKind::kArc), lru(2, curve::PolicyKind::kLru);
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

// LFU-DA, 3 blocks. 1 is referenced 3 times, 2 twice, 3 once: 4 evicts 3 (key 1),
// and the cache age L becomes 1. 4 is released with key 1 + 1 = 2, as 2's (2 + 0):
// the tie goes to 2, released longer ago. Plain LFU would have evicted 4.
TEST(EvictorTest, LfuEvictsTheFewestReferencesWithAging) {
  PoolScript s(3, curve::PolicyKind::kLfu);
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
TEST(EvictorTest, PriorityEvictsTheLowestLevelThenTheOldest) {
  PoolScript s(3, curve::PolicyKind::kPriority);
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
TEST(EvictorTest, BeladyEvictsTheFarthestNextUseInArrivalOrder) {
  std::vector<ReplicaRequest> reqs;
  for (curve::PageId p : {1, 2, 3, 4, 2, 1, 3}) reqs.push_back(One(reqs.size(), p, 1));
  PoolScript s(3, curve::PolicyKind::kBelady, reqs);
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
TEST(EvictorTest, WorkloadAwareEvictsTheLeastLikelyReuse) {
  PoolScript s(3, curve::PolicyKind::kWorkloadAware);
  s.Compute({0, 0, 0}, 1);
  s.Hit({10, 0, 0}, 1);
  s.Compute({11, 0, 1}, 2);
  s.Compute({12, 0, 1}, 3);
  s.Compute({13, 0, 1}, 4);
  EXPECT_EQ(s.Cached({1, 2, 3, 4}), (Pages{1, 3, 4}));
}

}  // namespace
}  // namespace kvwatch::sim
