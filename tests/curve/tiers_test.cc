// Tiers (docs/semantics.md section 6), the report builder, and spatial sampling.
#include "curve/tiers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "curve/curve_accumulator.h"
#include "curve/report.h"
#include "curve/sampled_engine.h"

namespace kvwatch::curve {
namespace {

RequestOutcome Outcome(std::vector<std::uint32_t> distance) {
  RequestOutcome o;
  o.distance = distance;
  std::uint32_t m = 0;
  for (std::uint32_t d : distance) {
    m = std::max(m, d);
    o.prefix_max.push_back(m);
    if (m != kCold) ++o.unlimited_hits;
  }
  return o;
}

TEST(TiersTest, PagesAreServedFromTheTierTheirDistancePlacesThem) {
  // Tiers of 2, 3 and 5 pages: distances 0-1 in hbm, 2-4 in dram, 5-9 in ssd.
  TierAccumulator tiers({{"hbm", 2, 0, 0}, {"dram", 3, 1e9, 0}, {"ssd", 5, 1e9, 0}}, 100, 16, std::nullopt,
                        std::nullopt);
  tiers.Add(Outcome({0, 3, 1, 9, 10, 0}));  // m: 0 3 3 9 10 10 -> the first 4 pages hit (total 10)
  ASSERT_EQ(tiers.totals().size(), 3u);
  EXPECT_EQ(tiers.total_capacity(), 10u);
  EXPECT_EQ(tiers.prefix_hits(), 4u);
  EXPECT_EQ(tiers.totals()[0].pages_served, 2u);  // d 0 and 1
  EXPECT_EQ(tiers.totals()[1].pages_served, 1u);  // d 3
  EXPECT_EQ(tiers.totals()[2].pages_served, 1u);  // d 9
  EXPECT_DOUBLE_EQ(tiers.totals()[0].bytes_moved, 0);
  EXPECT_DOUBLE_EQ(tiers.totals()[1].bytes_moved, 100);
  EXPECT_DOUBLE_EQ(tiers.totals()[2].bytes_moved, 100);
  EXPECT_FALSE(tiers.in_time_known());
}

TEST(TiersTest, SlowTierHitsCountInTimeOnlyWhenMovingBeatsRecomputing) {
  // One page of 16 tokens: cost with a = 1, b = 0 is 16 FLOPs; at 16 FLOP/s
  // recomputing takes 1 s. A page of 1000 bytes moves in 0.5 s at 2000 B/s (in
  // time) and in 2 s at 500 B/s (not in time).
  PrefillCost cost{1, 0};
  TierAccumulator fast({{"hbm", 1, 0, 0}, {"dram", 10, 2000, 0}}, 1000, 16, cost, 16.0);
  fast.Add(Outcome({0, 5}));
  EXPECT_TRUE(fast.in_time_known());
  EXPECT_EQ(fast.hits_in_time(), 2u);
  TierAccumulator slow({{"hbm", 1, 0, 0}, {"dram", 10, 500, 0}}, 1000, 16, cost, 16.0);
  slow.Add(Outcome({0, 5}));
  EXPECT_EQ(slow.hits_in_time(), 1u);
  // Latency counts too: 0.5 s + 0.6 s > 1 s.
  TierAccumulator latent({{"hbm", 1, 0, 0}, {"dram", 10, 2000, 0.6}}, 1000, 16, cost, 16.0);
  latent.Add(Outcome({0, 5}));
  EXPECT_EQ(latent.hits_in_time(), 1u);
  // The prefix rule: a page after one that is not in time is not used either.
  TierAccumulator prefix({{"hbm", 1, 0, 0}, {"dram", 10, 500, 0}}, 1000, 16, cost, 16.0);
  prefix.Add(Outcome({5, 0}));
  EXPECT_EQ(prefix.prefix_hits(), 2u);
  EXPECT_EQ(prefix.hits_in_time(), 0u);
}

TEST(TiersTest, ParseTierSpec) {
  auto t = ParseTierSpec("dram:200000:50:10");
  ASSERT_TRUE(t.ok()) << t.error();
  EXPECT_EQ(t.value().name, "dram");
  EXPECT_EQ(t.value().capacity_pages, 200000u);
  EXPECT_DOUBLE_EQ(t.value().bandwidth_bytes_per_s, 50e9);
  EXPECT_DOUBLE_EQ(t.value().latency_s, 10e-6);
  EXPECT_TRUE(ParseTierSpec("hbm:100").ok());
  for (const char* bad : {"", "hbm", ":5", "hbm:0", "hbm:1.5", "hbm:x", "ssd:10:0", "ssd:10:5:-1", "a:1:2:3:4"}) {
    EXPECT_FALSE(ParseTierSpec(bad).ok()) << bad;
  }
}

// --- The report ----------------------------------------------------------------------

TEST(ReportTest, DefaultAndLogSpacedCapacities) {
  EXPECT_EQ(DefaultCapacities(0), std::vector<std::uint64_t>{});
  EXPECT_EQ(DefaultCapacities(7), (std::vector<std::uint64_t>{1, 2, 5, 7}));
  EXPECT_EQ(DefaultCapacities(100), (std::vector<std::uint64_t>{1, 2, 5, 10, 20, 50, 100}));
  const auto log = LogSpacedCapacities(1000000, 50);
  EXPECT_EQ(log.front(), 1u);
  EXPECT_EQ(log.back(), 1000000u);
  EXPECT_TRUE(std::is_sorted(log.begin(), log.end()));
  EXPECT_EQ(std::adjacent_find(log.begin(), log.end()), log.end());
}

TEST(ReportTest, AvoidedPrefillIsTheSumOfTheHitPagesCosts) {
  // Two requests of 3 pages, the second a full repeat: its pages hit at
  // capacity 3 (tail-first, all distances <= 2).
  StackDistanceEngine engine;
  CurveAccumulator acc;
  RequestOutcome out;
  for (int r = 0; r < 2; ++r) {
    engine.Process(std::vector<PageId>{1, 2, 3}, &out);
    acc.Add(out);
  }
  ReportOptions options;
  options.page_tokens = 4;
  options.prefill_cost = PrefillCost{10, 3};
  options.prefill_flops_per_s = 2;
  options.bytes_per_token = 8;
  const CurvePoint p = PointAt(acc, 3, options);
  double brute = 0;
  for (int i = 0; i < 3; ++i) {
    for (int t = i * 4; t < (i + 1) * 4; ++t) brute += 10 + 3.0 * t;
  }
  EXPECT_EQ(p.page_hits, 3);
  EXPECT_DOUBLE_EQ(*p.avoided_prefill_flops, brute);
  EXPECT_DOUBLE_EQ(*p.avoided_prefill_seconds, brute / 2);
  EXPECT_DOUBLE_EQ(*p.capacity_bytes, 3 * 4 * 8);
  EXPECT_DOUBLE_EQ(p.reused_tokens, 12);
}

TEST(ReportTest, KneeOfACyclicWorkingSetIsItsSize) {
  // Requests cycling over W pages with a little noise: the hit ratio jumps
  // near W. The knee sits at W.
  constexpr std::uint64_t kW = 400;
  std::mt19937_64 rng(5);
  StackDistanceEngine engine;
  CurveAccumulator acc;
  RequestOutcome out;
  for (int i = 0; i < 40000; ++i) {
    const PageId p = rng() % 10 == 0 ? 1000000 + rng() % 100000 : static_cast<PageId>(i % kW);
    engine.Process(std::vector<PageId>{p}, &out);
    acc.Add(out);
  }
  const CurveReport r = BuildCurveReport(acc, ReportOptions{});
  ASSERT_TRUE(r.knee.has_value());
  EXPECT_GE(r.knee->capacity_pages, kW * 9 / 10);
  EXPECT_LE(r.knee->capacity_pages, kW * 13 / 10);
}

// --- Spatial sampling ---------------------------------------------------------------------

std::vector<std::vector<PageId>> PrefixTrace(std::uint64_t seed, int requests) {
  // Sessions that grow a chain turn by turn, over a Zipf-ish choice of sessions.
  std::mt19937_64 rng(seed);
  std::vector<std::vector<PageId>> sessions(600);
  PageId next = 1;
  std::vector<std::vector<PageId>> trace;
  for (int r = 0; r < requests; ++r) {
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    auto& s = sessions[static_cast<std::size_t>(std::pow(u, 2.0) * static_cast<double>(sessions.size()))];
    if (s.size() > 200) s.clear();
    for (int k = 0; k < 1 + static_cast<int>(rng() % 6); ++k) s.push_back(next++);
    trace.push_back(s);
  }
  return trace;
}

TEST(SampledEngineTest, RateOneIsExact) {
  const auto trace = PrefixTrace(1, 2000);
  SampledEngine sampled({}, 1.0);
  StackDistanceEngine exact;
  RequestOutcome a, b;
  for (const auto& r : trace) {
    sampled.Process(r, &a);
    exact.Process(r, &b);
    ASSERT_EQ(a.distance, b.distance);
  }
}

TEST(SampledEngineTest, SamplingIsConsistentPerPage) {
  SampledEngine sampled({}, 0.1);
  int kept = 0;
  for (PageId p = 0; p < 100000; ++p) {
    EXPECT_EQ(sampled.Sampled(p), sampled.Sampled(p));
    kept += sampled.Sampled(p);
  }
  EXPECT_NEAR(kept, 10000, 500);
}

TEST(SampledEngineTest, CurveIsCloseToExact) {
  const auto trace = PrefixTrace(7, 30000);
  StackDistanceEngine exact;
  SampledEngine sampled({}, 0.1);
  CurveAccumulator exact_acc, sampled_acc;
  RequestOutcome out;
  for (const auto& r : trace) {
    exact.Process(r, &out);
    exact_acc.Add(out);
    sampled.Process(r, &out);
    if (out.size() != 0) sampled_acc.Add(out);
  }
  double max_err = 0;
  for (std::uint64_t c = 0; c <= exact_acc.MaxCapacity(); ++c) {
    max_err = std::max(max_err, std::fabs(exact_acc.PageHitRatio(c) - sampled_acc.PageHitRatio(c)));
  }
  EXPECT_LT(max_err, 0.03);
  EXPECT_NEAR(sampled_acc.UnlimitedPageHitRatio(), exact_acc.UnlimitedPageHitRatio(), 0.02);
}

}  // namespace
}  // namespace kvwatch::curve
