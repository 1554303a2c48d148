// The stack-distance engine and the curve accumulator against the worked examples of
// docs/semantics.md and against a brute-force LRU oracle.
#include "curve/stack_distance.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <list>
#include <memory>
#include <random>
#include <set>
#include <unordered_map>
#include <vector>

#include "curve/curve_accumulator.h"

namespace kvwatch::curve {
namespace {

using Trace = std::vector<std::vector<PageId>>;

CurveAccumulator Replay(const Trace& trace, EngineOptions options, double share = 1.0) {
  StackDistanceEngine engine(options);
  CurveAccumulator acc(share);
  RequestOutcome out;
  for (const auto& r : trace) {
    engine.Process(r, &out);
    acc.Add(out);
  }
  return acc;
}

EngineOptions Order(TouchOrder order) {
  EngineOptions o;
  o.touch_order = order;
  return o;
}

// --- Worked examples of the semantics --------------------------------------------------

TEST(StackDistanceTest, SinglePageWorkedExample) {
  // A B C A D B A: the repeated A's have distance 2, the repeated B distance 3.
  const Trace trace = {{1}, {2}, {3}, {1}, {4}, {2}, {1}};
  for (TouchOrder order : {TouchOrder::kTailFirst, TouchOrder::kHeadFirst}) {
    StackDistanceEngine engine(Order(order));
    RequestOutcome out;
    std::vector<std::uint32_t> d;
    for (const auto& r : trace) {
      engine.Process(r, &out);
      d.push_back(out.distance[0]);
    }
    EXPECT_EQ(d, (std::vector<std::uint32_t>{kCold, kCold, kCold, 2, kCold, 3, 2}));
    CurveAccumulator acc = Replay(trace, Order(order));
    EXPECT_EQ(acc.page_refs(), 7u);
    EXPECT_EQ(acc.PageHits(3), 2u);
    EXPECT_EQ(acc.PageHits(4), 3u);
    EXPECT_EQ(acc.PageHits(2), 0u);
    EXPECT_EQ(acc.unlimited_page_hits(), 3u);
    EXPECT_EQ(acc.cold_misses(), 4u);
  }
}

TEST(StackDistanceTest, KvsetVectorsHeadFirst) {
  // (1,2) then (1,3): the second request's requirement at share 1 is 2 pages.
  StackDistanceEngine engine(Order(TouchOrder::kHeadFirst));
  RequestOutcome out;
  engine.Process(std::vector<PageId>{1, 2}, &out);
  engine.Process(std::vector<PageId>{1, 3}, &out);
  EXPECT_EQ(out.Requirement(1.0), 2u);
  EXPECT_EQ(out.unlimited_hits, 1u);

  CurveAccumulator acc = Replay({{1, 2}, {1, 3}}, Order(TouchOrder::kHeadFirst));
  EXPECT_EQ(acc.PageHits(1), 0u);
  EXPECT_EQ(acc.PageHits(2), 1u);

  // (A,B,C) then (A,B,A): prefix hits at capacities 1, 2, 3 are 0, 0, 3.
  CurveAccumulator acc2 = Replay({{10, 11, 12}, {10, 11, 10}}, Order(TouchOrder::kHeadFirst));
  EXPECT_EQ(acc2.PageHits(1), 0u);
  EXPECT_EQ(acc2.PageHits(2), 0u);
  EXPECT_EQ(acc2.PageHits(3), 3u);
}

TEST(StackDistanceTest, KvsetVectorsTailFirst) {
  StackDistanceEngine engine(Order(TouchOrder::kTailFirst));
  RequestOutcome out;
  engine.Process(std::vector<PageId>{1, 2}, &out);
  engine.Process(std::vector<PageId>{1, 3}, &out);
  EXPECT_EQ(out.Requirement(1.0), 1u);

  CurveAccumulator acc = Replay({{10, 11, 12}, {10, 11, 10}}, Order(TouchOrder::kTailFirst));
  EXPECT_EQ(acc.PageHits(1), 1u);
  EXPECT_EQ(acc.PageHits(2), 3u);
  EXPECT_EQ(acc.PageHits(3), 3u);
}

TEST(StackDistanceTest, RequirementAtShare) {
  RequestOutcome o;
  o.prefix_max = {0, 3, 7, 9, kCold};
  o.distance = o.prefix_max;
  o.unlimited_hits = 4;
  EXPECT_EQ(o.Requirement(1.0), 10u);  // k = 4: m(3) + 1
  EXPECT_EQ(o.Requirement(0.5), 4u);   // k = 2: m(1) + 1
  EXPECT_EQ(o.Requirement(0.51), 8u);  // k = ceil(2.04) = 3: m(2) + 1
  EXPECT_EQ(o.Requirement(0.25), 1u);  // k = 1
  o.unlimited_hits = 0;
  EXPECT_EQ(o.Requirement(1.0), 0u);
}

TEST(StackDistanceTest, EmptyRequestCountsAndIsCovered) {
  CurveAccumulator acc = Replay({{}, {1}, {}}, EngineOptions{});
  EXPECT_EQ(acc.requests(), 3u);
  EXPECT_EQ(acc.page_refs(), 1u);
  EXPECT_DOUBLE_EQ(acc.RequestCoverage(0), 1.0);
}

TEST(StackDistanceTest, WorkingSetTargets) {
  // 4 requests; the repeated A's hit at capacity 3, the repeated B at 4.
  CurveAccumulator acc = Replay({{1}, {2}, {3}, {1}, {4}, {2}, {1}}, EngineOptions{});
  EXPECT_EQ(acc.WorkingSetForPageHits(0.5), 3u);  // 2 of 3 unlimited hits
  EXPECT_EQ(acc.WorkingSetForPageHits(0.66), 3u);
  EXPECT_EQ(acc.WorkingSetForPageHits(0.67), 4u);
  EXPECT_EQ(acc.WorkingSetForPageHits(1.0), 4u);
  // Coverage: 4 cold requests have R = 0; the A's R = 3, B's R = 4.
  EXPECT_EQ(acc.WorkingSetForCoverage(4.0 / 7), 0u);
  EXPECT_EQ(acc.WorkingSetForCoverage(6.0 / 7), 3u);
  EXPECT_EQ(acc.WorkingSetForCoverage(1.0), 4u);
  EXPECT_NEAR(acc.RequestCoverage(3), 6.0 / 7, 1e-12);
}

TEST(StackDistanceTest, BeyondTrackedIsNotColdAndDoesNotConverge) {
  EngineOptions options;
  options.max_pages = 2;
  StackDistanceEngine engine(options);
  RequestOutcome out;
  for (PageId p : {1, 2, 3}) engine.Process(std::vector<PageId>{p}, &out);
  EXPECT_EQ(engine.tracked_pages(), 2u);
  EXPECT_EQ(engine.evicted_pages(), 1u);
  engine.Process(std::vector<PageId>{1}, &out);
  EXPECT_EQ(out.distance[0], kBeyondTracked);
  EXPECT_EQ(out.beyond_tracked, 1u);
  EXPECT_EQ(out.cold_misses, 0u);
  EXPECT_EQ(out.unlimited_hits, 1u);  // it would hit in an unlimited cache
  EXPECT_EQ(out.Requirement(1.0), kBeyondTracked);

  CurveAccumulator acc = Replay({{1}, {2}, {3}, {1}}, options);
  EXPECT_EQ(acc.unlimited_page_hits(), 1u);
  EXPECT_EQ(acc.PageHits(2), 0u);
  EXPECT_FALSE(acc.WorkingSetForPageHits(0.5).has_value());
  EXPECT_FALSE(acc.WorkingSetForCoverage(1.0).has_value());
  EXPECT_EQ(acc.WorkingSetForCoverage(0.75), 0u);
}

TEST(StackDistanceTest, RememberedEvictionsAreBounded) {
  EngineOptions options;
  options.max_pages = 4;
  options.remembered_evictions = 8;
  StackDistanceEngine engine(options);
  RequestOutcome out;
  for (PageId p = 0; p < 1000; ++p) engine.Process(std::vector<PageId>{p}, &out);
  // Page 995 was evicted recently: beyond tracked. Page 0 long ago: looks cold.
  engine.Process(std::vector<PageId>{990}, &out);
  EXPECT_EQ(out.distance[0], kBeyondTracked);
  engine.Process(std::vector<PageId>{0}, &out);
  EXPECT_EQ(out.distance[0], kCold);
  EXPECT_LT(engine.MemoryBytes(), 64u * 1024);
}

// --- Brute-force oracle ----------------------------------------------------------------

// An explicit LRU cache of a fixed capacity, with the prefix rule read in the
// arrival state.
class OracleLru {
 public:
  explicit OracleLru(std::size_t capacity) : capacity_(capacity) {}
  // Returns h_r(C): the leading pages of r present before r touches anything.
  std::size_t Request(const std::vector<PageId>& pages, TouchOrder order) {
    std::size_t hits = 0;
    while (hits < pages.size() && where_.count(pages[hits])) ++hits;
    auto touch = [&](PageId p) {
      auto it = where_.find(p);
      if (it != where_.end()) {
        lru_.erase(it->second);
      } else if (where_.size() == capacity_) {
        where_.erase(lru_.back());
        lru_.pop_back();
      }
      lru_.push_front(p);
      where_[p] = lru_.begin();
    };
    if (capacity_ > 0) {
      if (order == TouchOrder::kTailFirst) {
        for (std::size_t i = pages.size(); i-- > 0;) touch(pages[i]);
      } else {
        for (PageId p : pages) touch(p);
      }
    }
    return hits;
  }

 private:
  std::size_t capacity_;
  std::list<PageId> lru_;
  std::unordered_map<PageId, std::list<PageId>::iterator> where_;
};

// Random prefix-sharing traces: requests extend or repeat earlier chains (as
// multi-turn sessions and shared system prompts do), with some duplicates inside a
// request and some requests longer than the small capacities.
Trace RandomTrace(std::uint64_t seed, int requests, int max_len) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](std::uint64_t n) { return rng() % n; };
  Trace trace;
  std::vector<std::vector<PageId>> chains;
  PageId next = 1;
  for (int r = 0; r < requests; ++r) {
    std::vector<PageId> pages;
    const std::uint64_t kind = uniform(10);
    if (!chains.empty() && kind < 6) {
      const auto& base = chains[chains.size() - 1 - uniform(std::min<std::size_t>(chains.size(), 12))];
      pages.assign(base.begin(), base.begin() + static_cast<long>(uniform(base.size() + 1)));
    }
    const std::uint64_t grow = uniform(static_cast<std::uint64_t>(max_len / 2) + 1);
    for (std::uint64_t i = 0; i < grow && pages.size() < static_cast<std::size_t>(max_len); ++i) {
      pages.push_back(next++);
    }
    if (!pages.empty() && uniform(8) == 0) {
      pages.insert(pages.begin() + static_cast<long>(uniform(pages.size())), pages[uniform(pages.size())]);
    }
    chains.push_back(pages);
    trace.push_back(pages);
  }
  return trace;
}

struct OracleResult {
  std::vector<std::uint64_t> hits_at;  // page hits at capacity index
  std::uint64_t unlimited = 0;
  std::vector<double> coverage_at;  // request coverage at capacity index
};

OracleResult RunOracle(const Trace& trace, TouchOrder order, std::size_t max_capacity, double share) {
  OracleResult res;
  std::vector<std::vector<std::size_t>> h(max_capacity + 1);
  for (std::size_t c = 0; c <= max_capacity; ++c) {
    OracleLru lru(c);
    for (const auto& r : trace) h[c].push_back(lru.Request(r, order));
  }
  // Unlimited hits: the leading pages seen before (an unbounded cache).
  std::set<PageId> seen;
  std::vector<std::size_t> unlimited;
  for (const auto& r : trace) {
    std::size_t t = 0;
    while (t < r.size() && seen.count(r[t])) ++t;
    unlimited.push_back(t);
    res.unlimited += t;
    seen.insert(r.begin(), r.end());
  }
  for (std::size_t c = 0; c <= max_capacity; ++c) {
    std::uint64_t hits = 0;
    std::size_t covered = 0;
    for (std::size_t i = 0; i < trace.size(); ++i) {
      hits += h[c][i];
      const auto k = static_cast<std::size_t>(std::ceil(share * static_cast<double>(unlimited[i]) - 1e-9));
      if (h[c][i] >= k) ++covered;
    }
    res.hits_at.push_back(hits);
    res.coverage_at.push_back(static_cast<double>(covered) / static_cast<double>(trace.size()));
  }
  return res;
}

struct OracleCase {
  TouchOrder order;
  std::uint32_t max_pages;  // M
  double share;
  int max_len;
  // The traces number pages consecutively (runs of ids, as the weka trace):
  // the case kRuns lays out neighbours together (replay's layout).
  PageMapLayout layout = PageMapLayout::kMixed;
};

class OracleTest : public ::testing::TestWithParam<OracleCase> {};

TEST_P(OracleTest, EngineEqualsExplicitLruAtEveryCapacity) {
  const OracleCase& p = GetParam();
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    const Trace trace = RandomTrace(seed * 7919 + static_cast<std::uint64_t>(p.max_len), 300, p.max_len);
    EngineOptions options;
    options.touch_order = p.order;
    options.max_pages = p.max_pages;
    options.page_layout = p.layout;
    const CurveAccumulator acc = Replay(trace, options, p.share);
    const std::size_t max_c = std::min<std::size_t>(p.max_pages, 140);
    const OracleResult oracle = RunOracle(trace, p.order, max_c, p.share);
    ASSERT_EQ(acc.unlimited_page_hits(), oracle.unlimited) << "seed " << seed;
    for (std::size_t c = 0; c <= max_c; ++c) {
      ASSERT_EQ(acc.PageHits(c), oracle.hits_at[c]) << "seed " << seed << " capacity " << c;
      ASSERT_DOUBLE_EQ(acc.RequestCoverage(c), oracle.coverage_at[c]) << "seed " << seed << " capacity " << c;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, OracleTest,
                         ::testing::Values(OracleCase{TouchOrder::kTailFirst, 1u << 20, 1.0, 30},
                                           OracleCase{TouchOrder::kHeadFirst, 1u << 20, 1.0, 30},
                                           OracleCase{TouchOrder::kTailFirst, 1u << 20, 0.8, 30},
                                           OracleCase{TouchOrder::kHeadFirst, 1u << 20, 0.5, 30},
                                           // Requests longer than most capacities.
                                           OracleCase{TouchOrder::kTailFirst, 1u << 20, 1.0, 120},
                                           OracleCase{TouchOrder::kHeadFirst, 1u << 20, 1.0, 120},
                                           // M smaller than the distinct pages: exact for C <= M.
                                           OracleCase{TouchOrder::kTailFirst, 60, 1.0, 30},
                                           OracleCase{TouchOrder::kHeadFirst, 60, 0.9, 30},
                                           OracleCase{TouchOrder::kTailFirst, 7, 1.0, 12},
                                           // Replay's map layout, with evictions from tracking (erasure).
                                           OracleCase{TouchOrder::kTailFirst, 1u << 20, 0.8, 120, PageMapLayout::kRuns},
                                           OracleCase{TouchOrder::kHeadFirst, 60, 1.0, 30, PageMapLayout::kRuns},
                                           OracleCase{TouchOrder::kTailFirst, 7, 0.9, 12, PageMapLayout::kRuns}),
                         [](const ::testing::TestParamInfo<OracleCase>& info) {
                           const OracleCase& c = info.param;
                           return std::string(c.order == TouchOrder::kTailFirst ? "TailFirst" : "HeadFirst") + "_M" +
                                  std::to_string(c.max_pages) + "_Share" +
                                  std::to_string(static_cast<int>(c.share * 100)) + "_Len" + std::to_string(c.max_len) +
                                  (c.layout == PageMapLayout::kRuns ? "_Runs" : "");
                         });

// --- Long streams: compaction, memory, checkpoints ------------------------------------

TEST(StackDistanceTest, LongStreamCompactsAndKeepsDistancesExact) {
  // A cyclic scan over W pages: every reference after the first lap has distance
  // W - 1, however many compactions happen underneath.
  constexpr PageId kW = 5000;
  StackDistanceEngine engine;
  RequestOutcome out;
  for (int lap = 0; lap < 40; ++lap) {
    for (PageId p = 0; p < kW; ++p) {
      engine.Process(std::vector<PageId>{p}, &out);
      ASSERT_EQ(out.distance[0], lap == 0 ? kCold : static_cast<std::uint32_t>(kW - 1));
    }
  }
  EXPECT_EQ(engine.tracked_pages(), kW);
  EXPECT_LT(engine.MemoryBytes(), 64u * kW + 16384);
}

TEST(StackDistanceTest, CheckpointRoundTripContinuesIdentically) {
  const Trace trace = RandomTrace(99, 2000, 40);
  EngineOptions options;
  options.max_pages = 300;
  options.remembered_evictions = 500;
  StackDistanceEngine a(options);
  RequestOutcome out_a, out_b;
  for (std::size_t i = 0; i < 1000; ++i) a.Process(trace[i], &out_a);
  const std::vector<std::uint8_t> bytes = a.Serialize();
  StackDistanceEngine b;
  ASSERT_TRUE(b.Deserialize(bytes));
  EXPECT_EQ(b.tracked_pages(), a.tracked_pages());
  EXPECT_EQ(b.options().max_pages, 300u);
  for (std::size_t i = 1000; i < trace.size(); ++i) {
    a.Process(trace[i], &out_a);
    b.Process(trace[i], &out_b);
    ASSERT_EQ(out_a.distance, out_b.distance) << "request " << i;
  }
}

// The slot -> page array is kept only from the first eviction from tracking on:
// a checkpoint taken before it (pages put in recency order from the map) restores
// the same state, and both engines then start evicting at the same point, the
// least recently used pages first.
// The map layout is the process's choice, not part of the state: a checkpoint
// written by an engine of one layout continues identically in the other, which
// keeps its own.
TEST(StackDistanceTest, CheckpointCrossesMapLayouts) {
  const Trace trace = RandomTrace(17, 2000, 40);
  for (const PageMapLayout from : {PageMapLayout::kMixed, PageMapLayout::kRuns}) {
    const PageMapLayout to = from == PageMapLayout::kMixed ? PageMapLayout::kRuns : PageMapLayout::kMixed;
    EngineOptions options;
    options.max_pages = 300;
    options.remembered_evictions = 500;
    options.page_layout = from;
    StackDistanceEngine a(options);
    RequestOutcome out_a, out_b;
    for (std::size_t i = 0; i < 1000; ++i) a.Process(trace[i], &out_a);
    EngineOptions other;
    other.page_layout = to;
    StackDistanceEngine b(other);
    ASSERT_TRUE(b.Deserialize(a.Serialize()));
    EXPECT_EQ(b.options().page_layout, to);
    EXPECT_EQ(b.evicted_pages(), a.evicted_pages());
    for (std::size_t i = 1000; i < trace.size(); ++i) {
      a.Process(trace[i], &out_a);
      b.Process(trace[i], &out_b);
      ASSERT_EQ(out_a.distance, out_b.distance) << "request " << i;
    }
  }
}

TEST(StackDistanceTest, CheckpointBeforeTheFirstEvictionAndEvictionsAfterIt) {
  const Trace trace = RandomTrace(5, 1500, 40);
  EngineOptions options;
  options.max_pages = 400;
  StackDistanceEngine a(options);
  RequestOutcome out_a, out_b;
  std::size_t i = 0;
  // Enough requests for compactions, none for an eviction.
  for (; i < trace.size() && a.tracked_pages() + 40 < options.max_pages; ++i) a.Process(trace[i], &out_a);
  ASSERT_GT(i, 20u);
  ASSERT_EQ(a.evicted_pages(), 0u);
  const std::vector<std::uint8_t> bytes = a.Serialize();
  StackDistanceEngine b;
  ASSERT_TRUE(b.Deserialize(bytes));
  EXPECT_EQ(b.Serialize(), bytes);  // the same pages in the same recency order
  for (; i < trace.size(); ++i) {
    a.Process(trace[i], &out_a);
    b.Process(trace[i], &out_b);
    ASSERT_EQ(out_a.distance, out_b.distance) << "request " << i;
  }
  EXPECT_GT(a.evicted_pages(), 1000u);
  EXPECT_EQ(a.Serialize(), b.Serialize());
  // Exact below M: the capacity-100 cache of an explicit LRU agrees.
  StackDistanceEngine c(options);
  OracleLru lru(100);
  RequestOutcome out_c;
  for (const auto& r : trace) {
    c.Process(r, &out_c);
    std::size_t hits = 0;
    while (hits < out_c.size() && out_c.hit_capacity(hits) != 0 && out_c.hit_capacity(hits) <= 100) ++hits;
    ASSERT_EQ(hits, lru.Request(r, TouchOrder::kTailFirst));
  }
}

TEST(StackDistanceTest, CorruptCheckpointIsRejected) {
  StackDistanceEngine a;
  RequestOutcome out;
  a.Process(std::vector<PageId>{1, 2, 3}, &out);
  std::vector<std::uint8_t> bytes = a.Serialize();
  StackDistanceEngine b;
  EXPECT_FALSE(b.Deserialize(std::vector<std::uint8_t>(bytes.begin(), bytes.end() - 3)));
  EXPECT_EQ(b.tracked_pages(), 0u);
  bytes[0] = 'X';
  EXPECT_FALSE(b.Deserialize(bytes));
  EXPECT_FALSE(b.Deserialize({}));
}

// --- The compact accumulator (replay's per-tenant and per-class curves) ----------------

// Equal to CurveAccumulator at every capacity, for groups of a shared stream (every
// fourth request, as one tenant of four), with a bounded engine so that some
// requests are beyond the tracked range, across merges of its entries.
TEST(CompactCurveAccumulatorTest, DenseEqualsTheCurveAccumulatorAtEveryCapacity) {
  for (const std::uint64_t max_pages : {std::uint64_t{EngineOptions{}.max_pages}, std::uint64_t{300}}) {
    for (const double share : {1.0, 0.5}) {
      EngineOptions options;
      options.max_pages = max_pages;
      StackDistanceEngine engine(options);
      std::mt19937_64 rng(7 + max_pages);
      CurveAccumulator dense[4] = {CurveAccumulator(share), CurveAccumulator(share), CurveAccumulator(share),
                                   CurveAccumulator(share)};
      CompactCurveAccumulator compact[4] = {CompactCurveAccumulator(share), CompactCurveAccumulator(share),
                                            CompactCurveAccumulator(share), CompactCurveAccumulator(share)};
      RequestOutcome out;
      for (int i = 0; i < 5000; ++i) {
        // Prefix-sharing requests: a system prompt of 1..3 pages, then a few pages
        // drawn from a space of 600 so that distances reach past the bound.
        std::vector<PageId> pages;
        const int prefix = 1 + static_cast<int>(rng() % 3);
        for (int p = 0; p < prefix; ++p) pages.push_back(1'000'000 + p);
        const int n = static_cast<int>(rng() % 6);
        for (int p = 0; p < n; ++p) pages.push_back(rng() % 600);
        engine.Process(pages, &out);
        dense[i % 4].Add(out);
        compact[i % 4].Add(out);
      }
      for (int g = 0; g < 4; ++g) {
        const CurveAccumulator rebuilt = compact[g].Dense();
        ASSERT_EQ(rebuilt.requests(), dense[g].requests());
        EXPECT_EQ(compact[g].requests(), dense[g].requests());
        EXPECT_EQ(rebuilt.page_refs(), dense[g].page_refs());
        EXPECT_EQ(rebuilt.unlimited_page_hits(), dense[g].unlimited_page_hits());
        EXPECT_EQ(rebuilt.cold_misses(), dense[g].cold_misses());
        EXPECT_EQ(rebuilt.requests_beyond_tracked(), dense[g].requests_beyond_tracked());
        EXPECT_EQ(rebuilt.MaxCapacity(), dense[g].MaxCapacity());
        if (max_pages == 300) {
          EXPECT_GT(dense[g].requests_beyond_tracked(), 0u);
        }
        for (std::uint64_t c = 0; c <= dense[g].MaxCapacity() + 2; ++c) {
          ASSERT_EQ(rebuilt.PageHits(c), dense[g].PageHits(c)) << "group " << g << " capacity " << c;
          ASSERT_EQ(rebuilt.HitDepthSum(c), dense[g].HitDepthSum(c)) << "group " << g << " capacity " << c;
          ASSERT_EQ(rebuilt.RequestCoverage(c), dense[g].RequestCoverage(c)) << "group " << g << " capacity " << c;
        }
      }
    }
  }
}

// A busy group (many requests over a small range of capacities) turns dense, and
// a group started from a dense accumulator adds to it: both keep the numbers of
// CurveAccumulator at every capacity.
TEST(CompactCurveAccumulatorTest, BusyGroupsTurnDenseWithTheSameNumbers) {
  EngineOptions options;
  StackDistanceEngine engine(options);
  std::mt19937_64 rng(11);
  CurveAccumulator dense(0.5), first_half(0.5);
  CompactCurveAccumulator compact(0.5);
  std::unique_ptr<CompactCurveAccumulator> seeded;
  RequestOutcome out;
  for (int i = 0; i < 4000; ++i) {
    std::vector<PageId> pages = {1'000'000};
    for (int p = static_cast<int>(rng() % 5); p > 0; --p) pages.push_back(rng() % 300);
    engine.Process(pages, &out);
    dense.Add(out);
    compact.Add(out);
    if (i < 2000) {
      first_half.Add(out);
    } else {
      if (!seeded) seeded = std::make_unique<CompactCurveAccumulator>(first_half);
      seeded->Add(out);
    }
  }
  EXPECT_TRUE(compact.is_dense());
  ASSERT_TRUE(seeded && seeded->is_dense());
  for (const CompactCurveAccumulator* c : {&compact, seeded.get()}) {
    const CurveAccumulator rebuilt = c->Dense();
    EXPECT_EQ(c->requests(), dense.requests());
    EXPECT_EQ(rebuilt.requests_beyond_tracked(), dense.requests_beyond_tracked());
    EXPECT_EQ(rebuilt.MaxCapacity(), dense.MaxCapacity());
    for (std::uint64_t cap = 0; cap <= dense.MaxCapacity() + 2; ++cap) {
      ASSERT_EQ(rebuilt.PageHits(cap), dense.PageHits(cap)) << cap;
      ASSERT_EQ(rebuilt.HitDepthSum(cap), dense.HitDepthSum(cap)) << cap;
      ASSERT_EQ(rebuilt.RequestCoverage(cap), dense.RequestCoverage(cap)) << cap;
    }
  }
}

// A group of a few requests late in a long stream holds a few entries, where the
// dense histograms span the largest distance it met.
TEST(CompactCurveAccumulatorTest, SmallGroupsStaySmall) {
  StackDistanceEngine engine(EngineOptions{});
  RequestOutcome out;
  std::vector<PageId> pages(1);
  for (PageId p = 0; p < 20000; ++p) {
    pages[0] = p;
    engine.Process(pages, &out);
  }
  CurveAccumulator dense;
  CompactCurveAccumulator compact;
  for (PageId p : {PageId{0}, PageId{1}, PageId{2}}) {  // each at distance about 20,000
    pages[0] = p;
    engine.Process(pages, &out);
    dense.Add(out);
    compact.Add(out);
  }
  EXPECT_EQ(compact.Dense().PageHits(20000), dense.PageHits(20000));
  EXPECT_EQ(dense.PageHits(20000), 3u);
  EXPECT_LT(compact.MemoryBytes(), 2000u);
  EXPECT_FALSE(compact.is_dense());
  EXPECT_GT(dense.MaxCapacity(), 19000u);  // what the dense form spans
}

}  // namespace
}  // namespace kvwatch::curve
