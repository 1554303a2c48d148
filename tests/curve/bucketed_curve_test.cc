// The live agent's bucketed, windowed curves against the exact accumulator.
#include "curve/bucketed_curve.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "curve/curve_accumulator.h"

namespace kvwatch::curve {
namespace {

TEST(LogBucketBoundsTest, IntegerLogSpacedUpToTheTrackedRange) {
  const auto b = LogBucketBounds(1000, 4);
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(b.front(), 1u);
  EXPECT_EQ(b.back(), 1000u);
  for (std::size_t i = 1; i < b.size(); ++i) {
    ASSERT_GT(b[i], b[i - 1]);
    // At least 4 per octave: consecutive bounds within 2^(1/4) (plus rounding).
    if (b[i - 1] >= 8 && i + 1 < b.size()) {
      EXPECT_LE(static_cast<double>(b[i]) / b[i - 1], std::exp2(0.25) + 0.07);
    }
  }
  EXPECT_EQ(LogBucketBounds(1, 8), std::vector<std::uint64_t>{1});
}

std::vector<std::vector<PageId>> Trace(std::uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<PageId>> sessions(300), trace;
  PageId next = 1;
  for (int r = 0; r < n; ++r) {
    auto& s = sessions[rng() % sessions.size()];
    if (s.size() > 100) s.clear();
    for (int k = 0; k < 1 + static_cast<int>(rng() % 5); ++k) s.push_back(next++);
    trace.push_back(s);
  }
  return trace;
}

// AddToEach (and Add, which is AddToEach of one curve) count page runs and
// search bounds by bisection: the same counts as the per-page definition.
TEST(BucketedCurveTest, AddToEachMatchesPerPageCounting) {
  std::mt19937_64 rng(11);
  for (std::uint64_t max_pages : {1ull, 7ull, 300ull, 1ull << 20}) {
    const auto bounds = LogBucketBounds(max_pages, 8);
    BucketedCurve a(&bounds, 0.8), b(&bounds, 0.8), c(&bounds, 0.8);
    std::vector<std::uint64_t> hits(bounds.size()), depth(bounds.size());
    for (int r = 0; r < 3000; ++r) {
      RequestOutcome o;
      const std::size_t n = rng() % 40;
      std::uint32_t m = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t step = rng() % 4 == 0 ? rng() % (2 * max_pages + 2) : rng() % 3;
        m = rng() % 50 == 0 ? (rng() % 2 ? kBeyondTracked : kCold)
                            : static_cast<std::uint32_t>(std::min<std::uint64_t>(m + step, kBeyondTracked - 1));
        if (!o.prefix_max.empty()) m = std::max(m, o.prefix_max.back());
        o.distance.push_back(m);
        o.prefix_max.push_back(m);
        if (m != kCold) ++o.unlimited_hits;
      }
      const std::uint64_t w = 1 + rng() % 3;
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t h = o.hit_capacity(i);
        if (h == 0) break;
        const std::size_t j = std::lower_bound(bounds.begin(), bounds.end(), h) - bounds.begin();
        if (j == bounds.size()) break;
        hits[j] += w;
        depth[j] += i * w;
      }
      a.Add(o, w);
      BucketedCurve* const both[2] = {&b, &c};
      BucketedCurve::AddToEach(both, o, w);
    }
    for (const BucketedCurve* x : {&a, &b, &c}) {
      EXPECT_EQ(x->hits(), hits);
      EXPECT_EQ(x->depth(), depth);
      EXPECT_EQ(x->required(), a.required());
      EXPECT_EQ(x->required_beyond(), a.required_beyond());
      EXPECT_EQ(x->page_refs(), a.page_refs());
    }
  }
}

TEST(BucketedCurveTest, ExactAtEveryBound) {
  const auto bounds = LogBucketBounds(1u << 16, 8);
  for (double share : {1.0, 0.8}) {
    StackDistanceEngine engine;
    CurveAccumulator exact(share);
    BucketedCurve bucketed(&bounds, share);
    RequestOutcome out;
    for (const auto& r : Trace(3, 5000)) {
      engine.Process(r, &out);
      exact.Add(out);
      bucketed.Add(out);
    }
    EXPECT_EQ(bucketed.page_refs(), exact.page_refs());
    EXPECT_EQ(bucketed.unlimited_page_hits(), exact.unlimited_page_hits());
    for (std::size_t j = 0; j < bounds.size(); ++j) {
      ASSERT_EQ(bucketed.PageHitsAt(j), exact.PageHits(bounds[j])) << bounds[j];
      ASSERT_DOUBLE_EQ(bucketed.RequestCoverage(bounds[j]), exact.RequestCoverage(bounds[j])) << bounds[j];
    }
    // A working set read off the buckets is the exact one rounded up to a bound.
    for (double f : {0.5, 0.9, 0.95, 0.99}) {
      const auto e = exact.WorkingSetForPageHits(f);
      const auto b = bucketed.WorkingSetForPageHits(f);
      ASSERT_TRUE(e && b);
      EXPECT_GE(*b, *e);
      EXPECT_EQ(*b, *std::lower_bound(bounds.begin(), bounds.end(), *e));
    }
  }
}

TEST(WindowedCurvesTest, WindowsCountOnlyRecentRequests) {
  const auto bounds = LogBucketBounds(1024, 8);
  WindowedCurves w({60, 3600}, &bounds, 1.0);
  StackDistanceEngine engine;
  RequestOutcome out;
  // One request per second for two hours.
  for (int t = 0; t < 7200; ++t) {
    engine.Process(std::vector<PageId>{static_cast<PageId>(t % 50)}, &out);
    w.Add(out, t);
  }
  // The 60 s window holds the last 59-60 s of requests, the hour the last 3540-3600.
  EXPECT_GE(w.Window(0).requests(), 59u);
  EXPECT_LE(w.Window(0).requests(), 60u);
  EXPECT_GE(w.Window(1).requests(), 3540u);
  EXPECT_LE(w.Window(1).requests(), 3600u);
  // Silence: the windows empty as the clock moves on.
  w.Advance(7200 + 61);
  EXPECT_EQ(w.Window(0).requests(), 0u);
  EXPECT_GT(w.Window(1).requests(), 0u);
  w.Advance(7200 + 3601);
  EXPECT_EQ(w.Window(1).requests(), 0u);
}

TEST(WindowedCurvesTest, LateRequestsAreCountedWhereTheyStillFit) {
  const auto bounds = LogBucketBounds(64, 4);
  WindowedCurves w({60, 3600}, &bounds, 1.0);
  RequestOutcome out;
  StackDistanceEngine engine;
  engine.Process(std::vector<PageId>{1}, &out);
  w.Add(out, 1000);
  w.Add(out, 900);  // 100 s late: outside the minute, inside the hour
  EXPECT_EQ(w.Window(0).requests(), 1u);
  EXPECT_EQ(w.Window(1).requests(), 2u);
  EXPECT_EQ(w.late_requests(), 1u);
  EXPECT_EQ(w.now(), 1000);
}

TEST(WindowedCurvesTest, SerializeRoundTrip) {
  const auto bounds = LogBucketBounds(4096, 8);
  WindowedCurves a({300, 3600, 86400}, &bounds, 0.9);
  StackDistanceEngine engine;
  RequestOutcome out;
  int t = 0;
  for (const auto& r : Trace(9, 3000)) {
    engine.Process(r, &out);
    a.Add(out, t++ * 0.5);
  }
  std::vector<std::uint8_t> bytes;
  a.Serialize(&bytes);
  WindowedCurves b({300, 3600, 86400}, &bounds, 0.9);
  std::span<const std::uint8_t> in(bytes);
  ASSERT_TRUE(b.Deserialize(&in));
  EXPECT_TRUE(in.empty());
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(a.Window(i).hits(), b.Window(i).hits());
    EXPECT_EQ(a.Window(i).required(), b.Window(i).required());
    EXPECT_EQ(a.Window(i).requests(), b.Window(i).requests());
  }
  // Different windows or truncated bytes are refused.
  WindowedCurves c({300, 3600}, &bounds, 0.9);
  std::span<const std::uint8_t> in2(bytes);
  EXPECT_FALSE(c.Deserialize(&in2));
  std::span<const std::uint8_t> in3(bytes.data(), bytes.size() / 2);
  EXPECT_FALSE(b.Deserialize(&in3));
}

}  // namespace
}  // namespace kvwatch::curve
