// The replica's prefix cache against curve/'s policy simulation: one request in
// flight at a time with instant compute, lru (and fifo where curve's touch order
// cannot differ) give curve's PolicyCache hits at the same capacity; with unlimited
// memory every policy gives curve's hit ratio.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <unordered_map>

#include "curve/policy.h"
#include "sim/replica.h"

namespace kvwatch::sim {
namespace {

constexpr std::uint32_t kBlock = 16;

// Requests on a prefix tree: each walks down `depth` levels, taking child j with
// probability ~ 1/(j+1) of `fanout`; page ids name the path. Prompts are whole pages.
std::vector<ReplicaRequest> TreeTrace(std::uint32_t n, std::uint32_t max_depth, std::uint32_t fanout, double gap_s,
                                      std::uint32_t max_output, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> w;
  for (std::uint32_t j = 0; j < fanout; ++j) w.push_back(1.0 / (j + 1));
  std::discrete_distribution<std::uint32_t> child(w.begin(), w.end());
  std::uniform_int_distribution<std::uint32_t> depth(1, max_depth), output(1, max_output);
  std::vector<ReplicaRequest> reqs;
  for (std::uint32_t i = 0; i < n; ++i) {
    ReplicaRequest r;
    r.arrival_s = gap_s * i;
    std::uint64_t id = 0x9e3779b97f4a7c15ull;
    const std::uint32_t d = depth(rng);
    for (std::uint32_t k = 0; k < d; ++k) {
      id = (id ^ (child(rng) + 1)) * 0xff51afd7ed558ccdull;
      id ^= id >> 29;
      r.pages.push_back(id);
    }
    r.prompt_tokens = d * kBlock;
    r.output_tokens = output(rng);
    reqs.push_back(std::move(r));
  }
  return reqs;
}

// Per-request hits of the replica (leading pages found at admission).
std::vector<std::uint32_t> ReplicaHits(const ReplicaOptions& o, const std::vector<ReplicaRequest>& reqs) {
  const LinearStepTime instant({1e-9, 0, 0, 0, 0});
  std::vector<RequestOutcome> outcomes;
  ReplicaObserver obs;
  obs.outcomes = &outcomes;
  auto r = SimulateReplicaObserved(o, reqs, instant, {}, obs);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error());
  std::vector<std::uint32_t> hits;
  for (const RequestOutcome& out : outcomes) hits.push_back(out.hit_pages);
  return hits;
}

std::vector<std::uint32_t> CurveHits(curve::PolicyKind kind, std::uint64_t capacity,
                                     const std::vector<ReplicaRequest>& reqs) {
  curve::PolicyOptions po;
  po.kind = kind;
  po.capacity = capacity;
  auto cache = curve::MakePolicyCache(po);
  EXPECT_TRUE(cache.ok());
  std::vector<std::uint32_t> hits;
  for (const ReplicaRequest& r : reqs) {
    curve::SimRequest s;
    s.pages = r.pages;
    hits.push_back(cache.value()->Process(s).hits);
  }
  return hits;
}

TEST(ReplicaCurveTest, LruOneRequestAtATimeEqualsCurvePolicyCache) {
  for (std::uint64_t capacity : {8, 20, 64}) {
    const auto reqs = TreeTrace(4000, 8, 4, 1.0, 1, 11 + capacity);
    ReplicaOptions o;
    o.pool_blocks = capacity;
    o.block_tokens = kBlock;
    o.eviction = curve::PolicyKind::kLru;
    const auto sim = ReplicaHits(o, reqs);
    const auto ref = CurveHits(curve::PolicyKind::kLru, capacity, reqs);
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_EQ(sim[i], ref[i]) << "capacity " << capacity << " request " << i;
      total += ref[i];
    }
    EXPECT_GT(total, reqs.size() / 2) << capacity;  // the trace does reuse
  }
}

// fifo: the replica orders a request's new pages as curve's fifo admits them (by
// request, tail first) and requeues a held block met at the head, as curve evicts
// and admits again a page of the request it is processing. One-page prompts agree
// exactly; on longer ones curve may also evict a page of the request it has already
// touched (then the request goes on without it), which a replica holding the
// request's blocks cannot do: a few requests differ, the hits within 1%.
TEST(ReplicaCurveTest, FifoOneRequestAtATimeMatchesCurvePolicyCache) {
  for (std::uint64_t capacity : {4, 16}) {
    const auto reqs = TreeTrace(4000, 1, 40, 1.0, 1, 5 + capacity);
    ReplicaOptions o;
    o.pool_blocks = capacity;
    o.block_tokens = kBlock;
    o.eviction = curve::PolicyKind::kFifo;
    const auto sim = ReplicaHits(o, reqs);
    const auto ref = CurveHits(curve::PolicyKind::kFifo, capacity, reqs);
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_EQ(sim[i], ref[i]) << "capacity " << capacity << " request " << i;
      total += ref[i];
    }
    EXPECT_GT(total, 100u);
    EXPECT_NE(CurveHits(curve::PolicyKind::kLru, capacity, reqs), ref);  // fifo is not lru here
  }
  for (std::uint64_t capacity : {8, 20, 64}) {
    const auto reqs = TreeTrace(4000, 8, 4, 1.0, 1, 11 + capacity);
    ReplicaOptions o;
    o.pool_blocks = capacity;
    o.block_tokens = kBlock;
    o.eviction = curve::PolicyKind::kFifo;
    const auto sim = ReplicaHits(o, reqs);
    const auto ref = CurveHits(curve::PolicyKind::kFifo, capacity, reqs);
    std::uint64_t differ = 0, a = 0, b = 0;
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      differ += sim[i] != ref[i] ? 1 : 0;
      a += sim[i];
      b += ref[i];
    }
    EXPECT_LT(differ, reqs.size() * 3 / 100) << capacity;
    EXPECT_NEAR(static_cast<double>(a) / static_cast<double>(b), 1, 0.01) << capacity;
  }
}

// Unlimited memory, instant compute, overlapping requests with output tokens: the
// prefix hit ratio (tokens) equals curve's page hit ratio for the same policy.
TEST(ReplicaCurveTest, UnlimitedMemoryHitRatioEqualsCurvePolicySimulation) {
  const auto reqs = TreeTrace(3000, 10, 3, 1e-9, 50, 3);
  std::uint64_t refs = 0;
  for (const ReplicaRequest& r : reqs) refs += r.pages.size();
  const std::uint64_t unlimited = refs + 3000 * 50;
  for (curve::PolicyKind kind : curve::kAllPolicies) {
    ReplicaOptions o;
    o.pool_blocks = unlimited;
    o.block_tokens = kBlock;
    o.max_running = 100000;
    o.max_batched_tokens = 1 << 24;
    o.eviction = kind;
    const LinearStepTime instant({1e-9, 0, 0, 0, 0});
    auto r = SimulateReplica(o, reqs, instant);
    ASSERT_TRUE(r.ok()) << r.error();
    const auto ref = CurveHits(kind, unlimited, reqs);
    std::uint64_t hits = 0;
    for (std::uint32_t h : ref) hits += h;
    EXPECT_GT(hits, refs / 2);
    EXPECT_DOUBLE_EQ(r.value().prefix_hit_ratio, static_cast<double>(hits) / static_cast<double>(refs))
        << curve::PolicyName(kind);
    EXPECT_EQ(r.value().preemptions, 0u);
  }
}

}  // namespace
}  // namespace kvwatch::sim

namespace kvwatch::sim {
namespace {

// curve's hits with what the other policies read from a request: its priority
// (priority), its category (workload-aware) and each page's next use (belady:
// numbered as curve/policy_replay.cc's ComputeNextUse numbers touches, tail first).
std::vector<std::uint32_t> CurveHitsWithKeys(curve::PolicyKind kind, std::uint64_t capacity,
                                             const std::vector<ReplicaRequest>& reqs) {
  std::vector<std::vector<std::uint64_t>> next(reqs.size());
  std::uint64_t g = 0;
  for (const ReplicaRequest& r : reqs) g += r.pages.size();
  std::unordered_map<curve::PageId, std::uint64_t> later;
  for (std::size_t i = reqs.size(); i-- > 0;) {
    const auto& pages = reqs[i].pages;
    next[i].assign(pages.size(), curve::kNeverUsed);
    for (std::size_t pos = 0; pos < pages.size(); ++pos) {  // touches backwards: tail first forwards
      --g;
      auto it = later.find(pages[pos]);
      if (it != later.end()) next[i][pos] = it->second;
      later[pages[pos]] = g;
    }
  }
  curve::PolicyOptions po;
  po.kind = kind;
  po.capacity = capacity;
  auto cache = curve::MakePolicyCache(po);
  EXPECT_TRUE(cache.ok());
  std::vector<std::uint32_t> hits;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    curve::SimRequest s;
    s.pages = reqs[i].pages;
    s.priority = reqs[i].priority;
    s.category = reqs[i].class_id;
    s.next_use = next[i];
    hits.push_back(cache.value()->Process(s).hits);
  }
  return hits;
}

struct Agreement {
  std::uint64_t differ = 0, replica = 0, curve = 0;
};

// TreeTrace with priorities 0..2 and classes 0..3 drawn per first page (so that a
// subtree has a typical class and priority, as a tenant would).
std::vector<ReplicaRequest> KeyedTreeTrace(std::uint32_t n, std::uint32_t max_depth, std::uint32_t fanout,
                                           std::uint64_t seed) {
  auto reqs = TreeTrace(n, max_depth, fanout, 1.0, 1, seed);
  std::mt19937_64 rng(seed * 7 + 1);
  std::uniform_int_distribution<int> coin(0, 9);
  for (ReplicaRequest& r : reqs) {
    const std::uint64_t root = r.pages.front();
    r.class_id = static_cast<std::uint32_t>(root % 4);
    if (coin(rng) == 0) r.class_id = (r.class_id + 1) % 4;  // some noise
    r.priority = static_cast<std::int32_t>((root >> 8) % 3);
  }
  return reqs;
}

Agreement Compare(curve::PolicyKind kind, std::uint64_t capacity, const std::vector<ReplicaRequest>& reqs) {
  ReplicaOptions o;
  o.pool_blocks = capacity;
  o.block_tokens = kBlock;
  o.eviction = kind;
  const auto sim = ReplicaHits(o, reqs);
  const auto ref = CurveHitsWithKeys(kind, capacity, reqs);
  Agreement a;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    a.differ += sim[i] != ref[i] ? 1 : 0;
    a.replica += sim[i];
    a.curve += ref[i];
  }
  return a;
}

constexpr curve::PolicyKind kKeyedKinds[] = {curve::PolicyKind::kArc, curve::PolicyKind::kLfu,
                                             curve::PolicyKind::kPriority, curve::PolicyKind::kWorkloadAware,
                                             curve::PolicyKind::kBelady};

// One-page prompts, one request at a time, instant compute: a request references
// one page, so the replica's order of events (hits held, then each missing page's
// block chosen, then released) is curve's (the page's lookup, its eviction, its
// admission), and every policy gives curve's hits, request by request: arc's T1,
// T2, ghosts and target; lfu's aging; priority's levels; belady's next uses;
// workload-aware's per-class estimates and ghosts.
TEST(ReplicaCurveTest, ArcLfuPriorityWorkloadAwareBeladyOnePagePromptsEqualCurvePolicyCache) {
  for (curve::PolicyKind kind : kKeyedKinds) {
    for (std::uint64_t capacity : {4, 16}) {
      const auto reqs = KeyedTreeTrace(4000, 1, 40, 5 + capacity);
      const Agreement a = Compare(kind, capacity, reqs);
      EXPECT_EQ(a.differ, 0u) << curve::PolicyName(kind) << " capacity " << capacity;
      EXPECT_EQ(a.replica, a.curve) << curve::PolicyName(kind) << " capacity " << capacity;
      EXPECT_GT(a.curve, 500u) << curve::PolicyName(kind) << " capacity " << capacity;  // the trace does reuse
    }
  }
  // The policies differ from each other here (a key that is not read would pass).
  const auto reqs = KeyedTreeTrace(4000, 1, 40, 9);
  std::set<std::vector<std::uint32_t>> distinct;
  for (curve::PolicyKind kind : kKeyedKinds) distinct.insert(CurveHitsWithKeys(kind, 4, reqs));
  distinct.insert(CurveHitsWithKeys(curve::PolicyKind::kLru, 4, reqs));
  EXPECT_EQ(distinct.size(), 6u);
}

// Longer prompts, one request at a time. curve references a request's pages one by
// one (tail first) and may evict a page of the request it is processing to admit
// the next one; the replica holds a running request's whole KV, so it never can,
// and it takes the request's blocks in prefix order, hits first. Where a request is
// small against the pool (prompts of at most 8 pages in 64 blocks) that rarely
// matters: arc, lfu, workload-aware and belady differ on fewer than 5% of the
// requests and their hits are within 1% of curve's. (With 8 or 20 blocks they
// part: belady at 8 blocks gets 40% fewer hits, as curve's belady drops a
// request's never-reused pages as it goes, which a replica cannot do.) priority
// parts even at 64: a low-priority request's pages are the lowest level, so curve
// evicts them to admit its next pages, while the replica must evict other blocks
// (tested above on one-page prompts; with one level it is lru, equal to curve's).
TEST(ReplicaCurveTest, ArcLfuWorkloadAwareBeladyLongerPromptsWithinOnePercentOfCurve) {
  for (curve::PolicyKind kind : {curve::PolicyKind::kArc, curve::PolicyKind::kLfu, curve::PolicyKind::kWorkloadAware,
                                 curve::PolicyKind::kBelady}) {
    const auto reqs = KeyedTreeTrace(4000, 8, 4, 75);
    const Agreement a = Compare(kind, 64, reqs);
    EXPECT_LT(a.differ, reqs.size() * 5 / 100) << curve::PolicyName(kind);
    EXPECT_NEAR(static_cast<double>(a.replica) / static_cast<double>(a.curve), 1, 0.01) << curve::PolicyName(kind);
    EXPECT_GT(a.curve, reqs.size()) << curve::PolicyName(kind);
  }
}

TEST(ReplicaCurveTest, PriorityWithOneLevelEqualsCurvePolicyCacheOnLongerPrompts) {
  for (std::uint64_t capacity : {8, 20, 64}) {
    auto reqs = KeyedTreeTrace(4000, 8, 4, 11 + capacity);
    for (ReplicaRequest& r : reqs) r.priority = 3;
    const Agreement a = Compare(curve::PolicyKind::kPriority, capacity, reqs);
    EXPECT_EQ(a.differ, 0u) << capacity;
    EXPECT_GT(a.curve, reqs.size() / 2) << capacity;
  }
}

}  // namespace
}  // namespace kvwatch::sim
