// Latency quantiles: exact below 2^20 samples, on log buckets (at most 1.1% high,
// never low) beyond.
#include "sim/latency_samples.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace kvwatch::sim::internal {
namespace {

TEST(LatencySamplesTest, ExactNearestRankBelowTheLimit) {
  LatencySamples s;
  for (int i = 100; i >= 1; --i) s.Add(i * 0.01);
  const LatencyQuantiles q = s.Quantiles();
  EXPECT_DOUBLE_EQ(q.p50, 0.50);
  EXPECT_DOUBLE_EQ(q.p90, 0.90);
  EXPECT_DOUBLE_EQ(q.p99, 0.99);
  EXPECT_DOUBLE_EQ(LatencySamples().Quantiles().p99, 0);
}

TEST(LatencySamplesTest, HistogramBeyondTheLimitIsWithinOnePercentAbove) {
  std::mt19937_64 rng(1);
  std::lognormal_distribution<double> d(-3, 1.5);
  std::vector<double> all;
  LatencySamples s;
  for (std::size_t i = 0; i < LatencySamples::kExactLimit + 50000; ++i) {
    const double v = d(rng);
    all.push_back(v);
    s.Add(v);
  }
  s.Add(0);  // a zero gap (two tokens of one step) lands in the lowest bucket
  all.push_back(0);
  std::sort(all.begin(), all.end());
  const LatencyQuantiles q = s.Quantiles();
  for (auto [p, got] : {std::pair{0.5, q.p50}, std::pair{0.9, q.p90}, std::pair{0.99, q.p99}}) {
    const double exact = all[static_cast<std::size_t>(std::ceil(p * static_cast<double>(all.size()))) - 1];
    EXPECT_GE(got, exact) << p;
    EXPECT_LE(got, exact * 1.011) << p;
  }
}

}  // namespace
}  // namespace kvwatch::sim::internal
