// Tests of curve/knee.h: kneed's published vectors (arvkevi/kneed tests/test_sample.py
// and kneed/data_generator.py, interp1d), curves whose knee is known by
// construction, invariances of the algorithm, and the capacity-curve convenience.
#include "curve/knee.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace kvwatch::curve {
namespace {

using Vec = std::vector<double>;

Vec Range(int n, double scale = 1.0) {
  Vec x(n);
  for (int i = 0; i < n; ++i) x[i] = i * scale;
  return x;
}

KneeOptions Opts(CurveShape shape, CurveDirection direction, double s = 1.0, bool online = false) {
  KneeOptions o;
  o.shape = shape;
  o.direction = direction;
  o.sensitivity = s;
  o.online = online;
  return o;
}

constexpr auto kConcave = CurveShape::kConcave;
constexpr auto kConvex = CurveShape::kConvex;
constexpr auto kInc = CurveDirection::kIncreasing;
constexpr auto kDec = CurveDirection::kDecreasing;

// Deterministic pseudo-random numbers (splitmix64), independent of the standard
// library's distributions.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t Next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)

 private:
  std::uint64_t state_;
};

// --- kneed's vectors ----------------------------------------------------------

TEST(KneeTest, Figure2OfThePaperHasItsKneeAtTheThirdPoint) {
  // dg.figure2(): x = linspace(0, 1, 10), y = -1 / (x + 0.1) + 5; kneed: 0.22.
  Vec x(10), y(10);
  for (int i = 0; i < 10; ++i) {
    x[i] = i / 9.0;
    y[i] = -1.0 / (x[i] + 0.1) + 5.0;
  }
  const std::optional<Knee> knee = FindKnee(x, y);
  ASSERT_TRUE(knee.has_value());
  EXPECT_EQ(knee->index, 2u);
  EXPECT_NEAR(knee->x, 0.22, 0.22 * 0.05);
  EXPECT_NEAR(knee->y, 1.897, 1.897 * 0.03);  // test_y
}

struct KneedCase {
  const char* name;
  Vec y;
  CurveShape shape;
  CurveDirection direction;
  std::size_t knee;            // on x = 0..9
  std::size_t truncated_knee;  // on x[:-3] / 10, y[:-3] / 10, as an index
};

TEST(KneeTest, KneedDataGeneratorCurves) {
  const std::vector<KneedCase> cases = {
      {"concave_increasing", {0, 60, 80, 85, 90, 95, 96, 97, 98, 99}, kConcave, kInc, 2, 2},
      {"concave_decreasing", {99, 98, 97, 96, 95, 90, 85, 80, 60, 0}, kConcave, kDec, 7, 4},
      {"convex_increasing", {1, 2, 3, 4, 5, 10, 15, 20, 40, 100}, kConvex, kInc, 7, 4},
      {"convex_decreasing", {100, 40, 20, 15, 10, 5, 4, 3, 2, 1}, kConvex, kDec, 2, 2},
  };
  for (const KneedCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Vec x = Range(10);
    std::optional<Knee> knee = FindKnee(x, c.y, Opts(c.shape, c.direction));
    ASSERT_TRUE(knee.has_value());
    EXPECT_EQ(knee->index, c.knee);
    EXPECT_EQ(knee->x, static_cast<double>(c.knee));
    EXPECT_EQ(knee->y, c.y[c.knee]);

    // test_*_truncated: the first 7 points, both axes divided by 10.
    Vec xt, yt;
    for (int i = 0; i < 7; ++i) {
      xt.push_back(x[i] / 10);
      yt.push_back(c.y[i] / 10);
    }
    knee = FindKnee(xt, yt, Opts(c.shape, c.direction));
    ASSERT_TRUE(knee.has_value());
    EXPECT_EQ(knee->index, c.truncated_knee);
    EXPECT_DOUBLE_EQ(knee->x, c.truncated_knee / 10.0);
  }
}

const Vec& Bumpy() {
  static const Vec y = {7305.0, 6979.0, 6666.6, 6463.2, 6326.5, 6048.8, 6032.8, 5762.0, 5742.8, 5398.2, 5256.8, 5227.0,
                        5001.7, 4942.0, 4854.2, 4734.6, 4558.7, 4491.1, 4411.6, 4333.0, 4234.6, 4139.1, 4056.8, 4022.5,
                        3868.0, 3808.3, 3745.3, 3692.3, 3645.6, 3618.3, 3574.3, 3504.3, 3452.4, 3401.2, 3382.4, 3340.7,
                        3301.1, 3247.6, 3190.3, 3180.0, 3154.2, 3089.5, 3045.6, 2989.0, 2993.6, 2941.3, 2875.6, 2866.3,
                        2834.1, 2785.1, 2759.7, 2763.2, 2720.1, 2660.1, 2690.2, 2635.7, 2632.9, 2574.6, 2556.0, 2545.7,
                        2513.4, 2491.6, 2496.0, 2466.5, 2442.7, 2420.5, 2381.5, 2388.1, 2340.6, 2335.0, 2318.9, 2319.0,
                        2308.2, 2262.2, 2235.8, 2259.3, 2221.0, 2202.7, 2184.3, 2170.1, 2160.0, 2127.7, 2134.7, 2102.0,
                        2101.4, 2066.4, 2074.3, 2063.7, 2048.1, 2031.9};
  return y;
}

TEST(KneeTest, BumpyConvexDecreasingCurveHasItsFirstElbowAt26) {
  // test_convex_decreasing_bumpy, interp1d -> 26.
  const std::optional<Knee> knee = FindKnee(Range(90), Bumpy(), Opts(kConvex, kDec));
  ASSERT_TRUE(knee.has_value());
  EXPECT_EQ(knee->index, 26u);
}

TEST(KneeTest, BumpyCurveOnlineFindsEveryElbow) {
  // test_all_knees: all_elbows == {41, 46, 53, 26, 31}; online keeps the last.
  const Vec x = Range(90);
  std::vector<std::size_t> all;
  for (const Knee& k : FindAllKnees(x, Bumpy(), Opts(kConvex, kDec))) all.push_back(k.index);
  std::vector<std::size_t> sorted = all;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<std::size_t>{26, 31, 41, 46, 53}));
  EXPECT_EQ(all.front(), 26u);  // the offline knee is the first detection
  const std::optional<Knee> online = FindKnee(x, Bumpy(), Opts(kConvex, kDec, 1.0, true));
  ASSERT_TRUE(online.has_value());
  EXPECT_EQ(online->index, all.back());
}

TEST(KneeTest, FlatMaximumSensitivityPicksFirstOrGlobalMaximum) {
  // test_flat_maxima: S = 0 -> 1.0, S = 1 -> 8.0 (convex decreasing).
  const Vec y = {1,
                 0.787701317715959,
                 0.7437774524158126,
                 0.6559297218155198,
                 0.5065885797950219,
                 0.36749633967789164,
                 0.2547584187408492,
                 0.16251830161054173,
                 0.10395314787701318,
                 0.06734992679355783,
                 0.043923865300146414,
                 0.027818448023426062,
                 0.01903367496339678,
                 0.013177159590043924,
                 0.010248901903367497,
                 0.007320644216691069,
                 0.005856515373352855,
                 0.004392386530014641};
  const Vec x = Range(18);
  std::optional<Knee> knee = FindKnee(x, y, Opts(kConvex, kDec, 0.0));
  ASSERT_TRUE(knee.has_value());
  EXPECT_EQ(knee->x, 1.0);
  knee = FindKnee(x, y, Opts(kConvex, kDec, 1.0));
  ASSERT_TRUE(knee.has_value());
  EXPECT_EQ(knee->x, 8.0);
}

TEST(KneeTest, SineOnlineInAllFourOrientations) {
  // test_sine: x = arange(0, 10, 0.1), y = sin(x), S = 1, online.
  const Vec x = Range(100, 0.1);
  Vec y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = std::sin(x[i]);
  struct Case {
    CurveDirection direction;
    CurveShape shape;
    double knee;
  };
  const Case cases[] = {{kDec, kConvex, 4.5}, {kInc, kConvex, 4.9}, {kInc, kConcave, 7.7}, {kDec, kConcave, 1.8}};
  for (const Case& c : cases) {
    const std::optional<Knee> knee = FindKnee(x, y, Opts(c.shape, c.direction, 1.0, true));
    ASSERT_TRUE(knee.has_value());
    EXPECT_NEAR(knee->x, c.knee, 1e-8);
  }
}

TEST(KneeTest, ThreeSmoothPointsHaveNoKnee) {
  // test_y_no_knee.
  EXPECT_FALSE(FindKnee(Vec{1, 2, 3}, Vec{0.90483742, 0.81873075, 0.74081822}, Opts(kConvex, kDec)).has_value());
}

// --- Degenerate and invalid input -----------------------------------------------

TEST(KneeTest, FlatCurveHasNoKnee) {
  // test_x_equals_y: y constant.
  const Vec x = Range(10);
  const Vec y(10, 1.0);
  for (CurveShape s : {kConcave, kConvex}) {
    for (CurveDirection d : {kInc, kDec}) {
      EXPECT_FALSE(FindKnee(x, y, Opts(s, d)).has_value());
      EXPECT_FALSE(FindKnee(x, y, Opts(s, d, 1.0, true)).has_value());
      EXPECT_TRUE(FindAllKnees(x, y, Opts(s, d)).empty());
    }
  }
}

TEST(KneeTest, InvalidInputHasNoKnee) {
  const Vec y = {0, 60, 80, 85, 90, 95, 96, 97, 98, 99};
  const Vec x = Range(10);
  ASSERT_TRUE(FindKnee(x, y).has_value());  // the valid curve has one
  EXPECT_FALSE(FindKnee(Vec{0, 1}, Vec{0, 1}).has_value());
  EXPECT_FALSE(FindKnee(Vec{}, Vec{}).has_value());
  EXPECT_FALSE(FindKnee(Range(9), y).has_value());  // sizes differ
  Vec bad_x = x;
  bad_x[5] = bad_x[4];  // not strictly increasing
  EXPECT_FALSE(FindKnee(bad_x, y).has_value());
  bad_x = x;
  std::reverse(bad_x.begin(), bad_x.end());
  EXPECT_FALSE(FindKnee(bad_x, y).has_value());
  Vec bad_y = y;
  bad_y[3] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(FindKnee(x, bad_y).has_value());
  bad_y[3] = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(FindKnee(x, bad_y).has_value());
  EXPECT_FALSE(FindKnee(x, y, Opts(kConcave, kInc, -1.0)).has_value());
  EXPECT_FALSE(FindKnee(x, y, Opts(kConcave, kInc, std::numeric_limits<double>::quiet_NaN())).has_value());
}

TEST(KneeTest, CurveStartingBelowItsChordHasItsFirstKneeAtTheFirstPoint) {
  // Flat then a jump at the very end: the difference curve is 0 at both ends and
  // negative between. kneed calls x[0] a knee (a maximum by the "clip" rule, then a
  // drop below its threshold); the last point, which nothing follows, never is.
  const Vec x = Range(10);
  const Vec y = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  const std::optional<Knee> knee = FindKnee(x, y);
  ASSERT_TRUE(knee.has_value());
  EXPECT_EQ(knee->index, 0u);
  const std::vector<Knee> all = FindAllKnees(x, y);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].index, 0u);
}

// --- Curves with a knee known by construction ------------------------------------

TEST(KneeTest, PiecewiseLinearMinOfXAndKHasItsKneeAtK) {
  for (int n : {11, 21, 50, 101}) {
    for (int k = 1; k < n - 2; k += std::max(1, n / 10)) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " k=" << k);
      const Vec x = Range(n);
      Vec y(n);
      for (int i = 0; i < n; ++i) y[i] = std::min<double>(i, k);
      const std::optional<Knee> knee = FindKnee(x, y);
      ASSERT_TRUE(knee.has_value());
      EXPECT_EQ(knee->index, static_cast<std::size_t>(k));
    }
  }
}

TEST(KneeTest, KneeIsInvariantUnderPositiveAffineChangesOfBothAxes) {
  Rng rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const int n = 30;
    Vec x(n), y(n);
    double xi = 0;
    for (int i = 0; i < n; ++i) {
      x[i] = xi;
      xi += 1.0;  // uniform grid: the transform only rescales it
      y[i] = 1 - std::exp(-x[i] / (2 + 8 * rng.Uniform())) + 0.01 * rng.Uniform();
    }
    const std::optional<Knee> base = FindKnee(x, y);
    Vec x2(n), y2(n);
    for (int i = 0; i < n; ++i) {
      x2[i] = 4096.0 * x[i] + 128.0;
      y2[i] = 0.5 * y[i] - 3.0;
    }
    const std::optional<Knee> moved = FindKnee(x2, y2);
    ASSERT_EQ(base.has_value(), moved.has_value());
    if (base) {
      EXPECT_EQ(base->index, moved->index);
      EXPECT_EQ(moved->x, x2[moved->index]);
      EXPECT_EQ(moved->y, y2[moved->index]);
    }
  }
}

TEST(KneeTest, MirroredCurvesMapTheKneeBackToTheInput) {
  // On a uniform grid, the three other orientations of a concave increasing curve
  // y (reversed, negated, both) are turned back into y by Kneedle's transform, so
  // their knees are the same difference-curve point mapped back to the input.
  Rng rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    const std::size_t n = 25;
    const Vec x = Range(static_cast<int>(n));
    Vec y(n);
    for (std::size_t i = 0; i < n; ++i) {
      y[i] = std::log1p(x[i] * (0.2 + rng.Uniform())) + 0.02 * rng.Uniform();
    }
    const std::optional<Knee> base = FindKnee(x, y);
    ASSERT_TRUE(base.has_value());
    const std::size_t k = base->index;
    Vec reversed(n), negated(n), both(n);
    for (std::size_t i = 0; i < n; ++i) {
      reversed[i] = y[n - 1 - i];
      negated[i] = -y[i];
      both[i] = -y[n - 1 - i];
    }
    std::optional<Knee> knee = FindKnee(x, reversed, Opts(kConcave, kDec));
    ASSERT_TRUE(knee.has_value());
    EXPECT_EQ(knee->index, n - 1 - k);
    knee = FindKnee(x, negated, Opts(kConvex, kDec));
    ASSERT_TRUE(knee.has_value());
    EXPECT_EQ(knee->index, k);
    knee = FindKnee(x, both, Opts(kConvex, kInc));
    ASSERT_TRUE(knee.has_value());
    EXPECT_EQ(knee->index, n - 1 - k);
  }
}

TEST(KneeTest, LargerSensitivityNeverGivesAnEarlierOfflineKnee) {
  const double sensitivities[] = {0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0};
  int knees_seen = 0;
  int nullopt_seen = 0;
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    Rng rng(seed);
    const int n = 40;
    const Vec x = Range(n);
    Vec y(n);
    const double tau = 2 + 10 * rng.Uniform();
    const double noise = 0.05 * rng.Uniform();
    for (int i = 0; i < n; ++i) y[i] = 1 - std::exp(-i / tau) + noise * rng.Uniform();
    std::optional<Knee> previous;
    bool first = true;
    for (double s : sensitivities) {
      SCOPED_TRACE(testing::Message() << "seed=" << seed << " S=" << s);
      const std::optional<Knee> knee = FindKnee(x, y, Opts(kConcave, kInc, s));
      if (knee)
        ++knees_seen;
      else
        ++nullopt_seen;
      if (!first) {
        if (!previous) {
          EXPECT_FALSE(knee.has_value());  // no knee at S1 -> none at S2 > S1
        } else if (knee) {
          EXPECT_GE(knee->index, previous->index);
        }
      }
      previous = knee;
      first = false;
    }
  }
  // The sweep exercises both outcomes.
  EXPECT_GT(knees_seen, 0);
  EXPECT_GT(nullopt_seen, 0);
}

TEST(KneeTest, OnlineKneeIsTheLastDetectionAndNeverBeforeTheOfflineOne) {
  const Vec x = Range(90);
  for (double s : {0.0, 0.5, 1.0, 2.0}) {
    const std::vector<Knee> all = FindAllKnees(x, Bumpy(), Opts(kConvex, kDec, s));
    const std::optional<Knee> offline = FindKnee(x, Bumpy(), Opts(kConvex, kDec, s));
    const std::optional<Knee> online = FindKnee(x, Bumpy(), Opts(kConvex, kDec, s, true));
    ASSERT_EQ(all.empty(), !offline.has_value());
    ASSERT_EQ(all.empty(), !online.has_value());
    if (all.empty()) continue;
    EXPECT_EQ(offline->index, all.front().index);
    EXPECT_EQ(online->index, all.back().index);
  }
}

// --- LRU over a cyclic working set -------------------------------------------------

// page_hit_ratio(C) for C = 0..max_capacity of an LRU cache fed `refs`, by
// stack distances computed with a move-to-front list (cold misses never hit).
Vec LruHitRatioCurve(const std::vector<std::uint64_t>& refs, std::size_t max_capacity) {
  std::vector<std::uint64_t> stack;  // most recent first
  std::vector<std::uint64_t> hits_at_distance(max_capacity + 1, 0);
  for (std::uint64_t page : refs) {
    auto it = std::find(stack.begin(), stack.end(), page);
    if (it != stack.end()) {
      const auto d = static_cast<std::size_t>(it - stack.begin());
      if (d < hits_at_distance.size()) ++hits_at_distance[d];
      stack.erase(it);
    }
    stack.insert(stack.begin(), page);
  }
  Vec ratio(max_capacity + 1, 0.0);
  std::uint64_t hits = 0;
  for (std::size_t c = 1; c <= max_capacity; ++c) {
    hits += hits_at_distance[c - 1];  // d < C hits at capacity C
    ratio[c] = static_cast<double>(hits) / static_cast<double>(refs.size());
  }
  return ratio;
}

// A cyclic working set of w pages, with a fraction of one-off "noise" pages
// (cold misses) interleaved pseudo-randomly.
std::vector<std::uint64_t> NoisyCycle(std::size_t w, int cycles, double noise, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::uint64_t> refs;
  std::uint64_t fresh = 1'000'000;
  for (int c = 0; c < cycles; ++c) {
    for (std::size_t p = 0; p < w; ++p) {
      while (rng.Uniform() < noise) refs.push_back(fresh++);
      refs.push_back(p);
    }
  }
  return refs;
}

TEST(KneeTest, NoisyCyclicWorkingSetHasItsKneeJustAboveItsSize) {
  // Each cyclic page is re-referenced after the w - 1 others plus the noise pages
  // in between (about w * 5% here), so the hit ratio is 0 below w and rises to its
  // plateau between capacities w and a little above w: the knee is there. As in
  // kneed, the first knee is capacity 0 (the curve starts below its chord); the
  // online (last) knee is the one at the top of the rise.
  const std::size_t w = 200;
  const Vec ratio = LruHitRatioCurve(NoisyCycle(w, 20, 0.05, 42), 2 * w);
  ASSERT_EQ(ratio[w - 1], 0.0);  // below w nothing hits
  ASSERT_GT(ratio[w + w / 5], 0.0);
  const Vec x = Range(static_cast<int>(ratio.size()));
  const std::optional<Knee> first = FindKnee(x, ratio);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->index, 0u);
  const std::optional<Knee> knee = FindKnee(x, ratio, Opts(kConcave, kInc, 1.0, true));
  ASSERT_TRUE(knee.has_value());
  EXPECT_GE(knee->x, static_cast<double>(w));
  EXPECT_LE(knee->x, 1.15 * w);
  EXPECT_GT(knee->y, 0.9 * ratio.back());
  const std::vector<Knee> all = FindAllKnees(x, ratio);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].index, knee->index);
}

// --- FindCapacityKnee -------------------------------------------------------------

std::vector<std::uint64_t> Capacities(std::size_t n, std::uint64_t step, std::uint64_t first) {
  std::vector<std::uint64_t> c(n);
  for (std::size_t i = 0; i < n; ++i) c[i] = first + i * step;
  return c;
}

TEST(CapacityKneeTest, DenseCyclicCurveKneeIsNearTheWorkingSetSize) {
  const std::size_t w = 200;
  const std::vector<std::uint64_t> refs = NoisyCycle(w, 20, 0.05, 42);
  const Vec ratio = LruHitRatioCurve(refs, 3 * w);
  const double unlimited = ratio.back();  // every re-reference hits by 3w
  const std::vector<std::uint64_t> caps = Capacities(ratio.size(), 1, 0);
  const std::optional<CapacityKnee> knee = FindCapacityKnee(caps, ratio, unlimited);
  ASSERT_TRUE(knee.has_value());
  EXPECT_FALSE(knee->at_saturation);
  EXPECT_GE(knee->capacity_pages, w);
  EXPECT_LE(knee->capacity_pages, w + w / 10);
  EXPECT_DOUBLE_EQ(knee->page_hit_ratio, ratio[knee->capacity_pages]);
}

TEST(CapacityKneeTest, CoarseCliffFallsBackToTheSaturationCapacity) {
  // Pure cycle over 300 pages sampled every 100 pages: 0 up to 300, then all
  // re-references hit. On [0, 300] the curve is flat then jumps at its last point,
  // so Kneedle has no interior knee; the knee is the saturation capacity.
  const std::size_t w = 300;
  const std::vector<std::uint64_t> refs = NoisyCycle(w, 10, 0.0, 1);
  const Vec dense = LruHitRatioCurve(refs, 1000);
  std::vector<std::uint64_t> caps;
  Vec ratio;
  for (std::uint64_t c = 100; c <= 1000; c += 100) {
    caps.push_back(c);
    ratio.push_back(dense[c]);
  }
  const std::optional<CapacityKnee> knee = FindCapacityKnee(caps, ratio, dense.back());
  ASSERT_TRUE(knee.has_value());
  EXPECT_TRUE(knee->at_saturation);
  EXPECT_EQ(knee->capacity_pages, 300u);
  EXPECT_DOUBLE_EQ(knee->page_hit_ratio, 0.9);  // 9 of 10 cycles are re-references
}

TEST(CapacityKneeTest, CurveIsCutAtTheSaturationTarget) {
  // y = 1 - exp(-C / 50) reaches 99.9% at C = 50 ln 1000 = 345.4 -> cut at 346.
  std::vector<std::uint64_t> caps = Capacities(1000, 1, 1);
  Vec ratio(caps.size());
  for (std::size_t i = 0; i < caps.size(); ++i) ratio[i] = 1 - std::exp(-static_cast<double>(caps[i]) / 50.0);
  const std::optional<CapacityKnee> knee = FindCapacityKnee(caps, ratio, 1.0);
  ASSERT_TRUE(knee.has_value());
  EXPECT_FALSE(knee->at_saturation);

  Vec x = {0}, y = {0};
  for (std::size_t i = 0; i < caps.size(); ++i) {
    x.push_back(static_cast<double>(caps[i]));
    y.push_back(ratio[i]);
    if (ratio[i] >= 0.999) break;
  }
  ASSERT_EQ(x.back(), 346.0);
  const std::optional<Knee> cut = FindKnee(x, y);
  ASSERT_TRUE(cut.has_value());
  EXPECT_EQ(knee->capacity_pages, static_cast<std::uint64_t>(cut->x));
  // Over the whole tracked range the knee would be elsewhere: the cut matters.
  Vec xa = {0}, ya = {0};
  for (std::size_t i = 0; i < caps.size(); ++i) {
    xa.push_back(static_cast<double>(caps[i]));
    ya.push_back(ratio[i]);
  }
  const std::optional<Knee> whole = FindKnee(xa, ya);
  ASSERT_TRUE(whole.has_value());
  EXPECT_NE(whole->x, cut->x);

  // A looser target cuts earlier and moves the knee down.
  CapacityKneeOptions loose;
  loose.saturation_fraction = 0.9;
  const std::optional<CapacityKnee> early = FindCapacityKnee(caps, ratio, 1.0, loose);
  ASSERT_TRUE(early.has_value());
  EXPECT_LT(early->capacity_pages, knee->capacity_pages);
}

TEST(CapacityKneeTest, LeadingZeroCapacityIsOptional) {
  std::vector<std::uint64_t> caps = Capacities(100, 10, 10);  // 10..1000
  Vec ratio(caps.size());
  for (std::size_t i = 0; i < caps.size(); ++i) ratio[i] = 1 - std::exp(-static_cast<double>(caps[i]) / 120.0);
  const std::optional<CapacityKnee> without = FindCapacityKnee(caps, ratio, 1.0);
  caps.insert(caps.begin(), 0);
  ratio.insert(ratio.begin(), 0.0);
  const std::optional<CapacityKnee> with = FindCapacityKnee(caps, ratio, 1.0);
  ASSERT_TRUE(without.has_value());
  ASSERT_TRUE(with.has_value());
  EXPECT_EQ(without->capacity_pages, with->capacity_pages);
  EXPECT_GT(with->capacity_pages, 0u);
}

TEST(CapacityKneeTest, NoReuseOrNoSaturationWithoutKneeGivesNothing) {
  const std::vector<std::uint64_t> caps = Capacities(50, 10, 10);
  const Vec zeros(caps.size(), 0.0);
  EXPECT_FALSE(FindCapacityKnee(caps, zeros, 0.0).has_value());
  // Convex and far from saturation within the tracked range: Kneedle finds only a
  // point at capacity 0, and there is no saturation to fall back on.
  Vec convex(caps.size());
  for (std::size_t i = 0; i < caps.size(); ++i) {
    convex[i] = 0.5 * std::pow(caps[i] / 500.0, 2);
  }
  EXPECT_FALSE(FindCapacityKnee(caps, convex, 1.0).has_value());
  // The same curve with an attainable target saturates at its last point.
  const std::optional<CapacityKnee> sat = FindCapacityKnee(caps, convex, 0.5);
  ASSERT_TRUE(sat.has_value());
  EXPECT_TRUE(sat->at_saturation);
  EXPECT_EQ(sat->capacity_pages, 500u);
}

TEST(CapacityKneeTest, InvalidInputGivesNothing) {
  const std::vector<std::uint64_t> caps = {10, 20, 30, 40};
  const Vec ratio = {0.5, 0.8, 0.9, 0.95};
  ASSERT_TRUE(FindCapacityKnee(caps, ratio, 1.0).has_value());
  EXPECT_FALSE(FindCapacityKnee(caps, Vec{0.5, 0.8, 0.9}, 1.0).has_value());
  EXPECT_FALSE(FindCapacityKnee(std::vector<std::uint64_t>{10, 20, 20, 40}, ratio, 1.0).has_value());
  EXPECT_FALSE(FindCapacityKnee(caps, ratio, std::numeric_limits<double>::quiet_NaN()).has_value());
  EXPECT_FALSE(FindCapacityKnee(caps, Vec{0.5, 0.8, std::numeric_limits<double>::quiet_NaN(), 0.95}, 1.0).has_value());
  EXPECT_FALSE(FindCapacityKnee({}, {}, 1.0).has_value());
  for (double s : {-1.0, std::numeric_limits<double>::quiet_NaN()}) {
    CapacityKneeOptions bad;
    bad.sensitivity = s;
    EXPECT_FALSE(FindCapacityKnee(caps, ratio, 1.0, bad).has_value());
  }
  for (double f : {0.0, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    CapacityKneeOptions bad;
    bad.saturation_fraction = f;
    EXPECT_FALSE(FindCapacityKnee(caps, ratio, 1.0, bad).has_value());
  }
}

}  // namespace
}  // namespace kvwatch::curve
