// SampledEngine (curve/sampled_engine.h): the fixed-rate sample is unchanged by
// the 64-bit threshold; fixed-size mode keeps the sample set under its bound on a
// flood of unique pages with flat memory and a falling rate; its state round-trips;
// and on the Mooncake conversation trace (../shared/data, skipped when absent) the
// sampled curves, counted with the engine's weights into the agent's bucketed curve
// and SHARDS-adj corrected as the agent does, stay within a stated error of the
// exact curve at every bucket bound.
#include "curve/sampled_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "curve/bucketed_curve.h"

namespace kvwatch::curve {
namespace {

using Trace = std::vector<std::vector<PageId>>;

// The hash_ids of a Mooncake JSON Lines trace (the only field these tests need).
Trace ReadMooncake(const std::string& path) {
  Trace trace;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const std::size_t key = line.find("\"hash_ids\"");
    if (key == std::string::npos) continue;
    std::size_t i = line.find('[', key);
    const std::size_t end = line.find(']', i);
    if (i == std::string::npos || end == std::string::npos) continue;
    std::vector<PageId> pages;
    while (++i < end) {
      if (line[i] < '0' || line[i] > '9') continue;
      PageId v = 0;
      while (i < end && line[i] >= '0' && line[i] <= '9') v = v * 10 + static_cast<PageId>(line[i++] - '0');
      pages.push_back(v);
    }
    trace.push_back(std::move(pages));
  }
  return trace;
}

constexpr std::uint32_t kMaxPages = 1u << 22;

// The exact curve over the agent's bucket bounds.
BucketedCurve ExactCurve(const Trace& trace, const std::vector<std::uint64_t>* bounds) {
  EngineOptions o;
  o.max_pages = kMaxPages;
  StackDistanceEngine engine(o);
  BucketedCurve curve(bounds, 1.0);
  RequestOutcome out;
  for (const auto& r : trace) {
    engine.Process(r, &out);
    curve.Add(out);
  }
  return curve;
}

// As the agent counts a sampled engine: weighted, requests without a sampled
// page left out, SHARDS-adj against every page reference.
BucketedCurve SampledCurve(const Trace& trace, const std::vector<std::uint64_t>* bounds, double rate,
                           std::uint32_t max_sampled, double* final_rate = nullptr, bool adjust = true) {
  EngineOptions o;
  o.max_pages = kMaxPages;
  SampledEngine engine(o, rate, max_sampled);
  BucketedCurve curve(bounds, 1.0);
  RequestOutcome out;
  std::uint64_t refs = 0;
  for (const auto& r : trace) {
    refs += r.size();
    engine.Process(r, &out);
    if (out.size() == 0) continue;
    curve.Add(out, engine.weight());
    if (max_sampled != 0) {
      EXPECT_LE(engine.sampled_pages(), max_sampled);
    }
  }
  if (adjust) curve.AdjustReferences(refs * SampledEngine::kWeightUnit);
  if (final_rate != nullptr) *final_rate = engine.rate();
  return curve;
}

double MaxRatioError(const BucketedCurve& a, const BucketedCurve& b) {
  double worst = 0;
  for (std::uint64_t c : a.bounds()) worst = std::max(worst, std::fabs(a.PageHitRatio(c) - b.PageHitRatio(c)));
  return worst;
}

// The bucketed curve's weighted counting and its two corrections.
TEST(SampledEngineTest, BucketedCurveWeightsAndCorrections) {
  const std::vector<std::uint64_t> bounds = LogBucketBounds(64, 4);
  StackDistanceEngine engine;
  RequestOutcome out;
  BucketedCurve plain(&bounds, 1.0), weighted(&bounds, 1.0);
  const std::vector<std::vector<PageId>> trace = {{1, 2, 3}, {1, 2, 4}, {5}, {1, 2, 3, 6}};
  for (const auto& r : trace) {
    engine.Process(r, &out);
    plain.Add(out);
    weighted.Add(out, 3);
  }
  EXPECT_EQ(weighted.requests(), 3 * plain.requests());
  EXPECT_EQ(weighted.page_refs(), 3 * plain.page_refs());
  for (std::uint64_t c : bounds) {
    EXPECT_EQ(weighted.PageHitRatio(c), plain.PageHitRatio(c));
    EXPECT_EQ(weighted.RequestCoverage(c), plain.RequestCoverage(c));
  }
  // SHARDS-adj: more references expected than counted go to the first bucket.
  BucketedCurve more = plain;
  more.AdjustReferences(plain.page_refs() + 4);
  EXPECT_EQ(more.page_refs(), plain.page_refs() + 4);
  EXPECT_EQ(more.PageHits(1), plain.PageHits(1) + 4);
  EXPECT_EQ(more.unlimited_page_hits(), plain.unlimited_page_hits() + 4);
  // Fewer: taken from the lowest buckets.
  BucketedCurve fewer = plain;
  fewer.AdjustReferences(plain.page_refs() - 2);
  EXPECT_EQ(fewer.page_refs(), plain.page_refs() - 2);
  EXPECT_EQ(fewer.PageHits(64), plain.PageHits(64) - 2);
  // Requests scaled, coverage kept.
  BucketedCurve scaled = plain;
  scaled.NormalizeRequests(plain.requests() * 10);
  EXPECT_EQ(scaled.requests(), plain.requests() * 10);
  for (std::uint64_t c : bounds) EXPECT_DOUBLE_EQ(scaled.RequestCoverage(c), plain.RequestCoverage(c));
}

TEST(SampledEngineTest, FixedRateSampleIsTheTop24BitRule) {
  for (double rate : {0.001, 0.01, 0.1, 0.5, 0.999}) {
    SampledEngine engine(EngineOptions{}, rate);
    const auto t24 = static_cast<std::uint64_t>(std::ceil(rate * static_cast<double>(1u << 24)));
    for (PageId p = 0; p < 100000; ++p) {
      const bool expected = (base::Mix64(p ^ 0x9E3779B97F4A7C15ULL) >> 40) < t24;
      ASSERT_EQ(engine.Sampled(p), expected) << "rate " << rate << " page " << p;
    }
    EXPECT_EQ(engine.rate(), rate);
    EXPECT_EQ(engine.weight(), static_cast<std::uint64_t>(std::round(SampledEngine::kWeightUnit / rate)));
  }
  SampledEngine all(EngineOptions{}, 1.0);
  for (PageId p = 0; p < 1000; ++p) EXPECT_TRUE(all.Sampled(p));
}

// A flood of 2 M unique pages against a bound of 1,000 sampled pages: the set and
// the engine stay under the bound after every request, the rate falls to about
// bound / distinct, and memory stops growing after the first part of the flood.
TEST(SampledEngineTest, FixedSizeKeepsTrackedPagesUnderTheBoundOnAUniqueFlood) {
  constexpr std::uint32_t kBound = 1000;
  constexpr std::uint64_t kPages = 2'000'000;
  constexpr std::size_t kPerRequest = 16;
  EngineOptions o;
  o.max_pages = 1u << 20;
  o.remembered_evictions = 1u << 20;
  SampledEngine engine(o, 1.0, kBound);
  RequestOutcome out;
  std::vector<PageId> request(kPerRequest);
  std::size_t memory_after_first_part = 0, memory_max_later = 0;
  double last_rate = 1.0;
  for (std::uint64_t next = 0; next < kPages;) {
    for (auto& p : request) p = next++;
    engine.Process(request, &out);
    ASSERT_LE(engine.sampled_pages(), kBound) << "after page " << next;
    ASSERT_LE(engine.engine().tracked_pages(), kBound);
    ASSERT_LE(engine.rate(), last_rate);  // the rate only goes down
    last_rate = engine.rate();
    if (next == kPages / 10) memory_after_first_part = engine.MemoryBytes();
    if (next > kPages / 10) memory_max_later = std::max(memory_max_later, engine.MemoryBytes());
  }
  EXPECT_EQ(engine.sampled_pages(), kBound);
  // Expected rate: bound / distinct (the bound-th smallest of 2 M uniform hashes).
  const double expected = static_cast<double>(kBound) / static_cast<double>(kPages);
  EXPECT_NEAR(engine.rate(), expected, expected * 0.15);
  EXPECT_GT(memory_after_first_part, 0u);
  EXPECT_LE(memory_max_later, memory_after_first_part)
      << "memory grew after the first 10% of the flood: " << memory_after_first_part << " -> " << memory_max_later;
  std::printf("flood: rate %.3g, engine memory %zu bytes (after 10%%: %zu)\n", engine.rate(), engine.MemoryBytes(),
              memory_after_first_part);
}

TEST(SampledEngineTest, FixedSizeStateRoundTrips) {
  EngineOptions o;
  o.max_pages = 1u << 16;
  SampledEngine a(o, 0.5, 300), b(o, 0.5, 300);
  RequestOutcome out_a, out_b;
  std::vector<PageId> request;
  for (PageId p = 0; p < 5000; ++p) {
    request.assign({p % 97, p, p + 100000});
    a.Process(request, &out_a);
  }
  ASSERT_TRUE(b.Deserialize(a.Serialize()));
  EXPECT_EQ(b.rate(), a.rate());
  EXPECT_EQ(b.sampled_pages(), a.sampled_pages());
  for (PageId p = 0; p < 2000; ++p) {
    request.assign({p % 97, p * 7, p + 200000});
    a.Process(request, &out_a);
    b.Process(request, &out_b);
    ASSERT_EQ(out_a.distance, out_b.distance);
    ASSERT_EQ(a.weight(), b.weight());
  }
  SampledEngine other_bound(o, 0.5, 301);
  EXPECT_FALSE(other_bound.Deserialize(a.Serialize()));
}

// Stated errors (max absolute page-hit-ratio difference at any bucket bound) on the
// Mooncake conversation trace, 182,790 distinct pages: fixed rate 0.1 within 0.03;
// fixed size with a bound of 20,000 sampled pages (its rate falls to about 0.1)
// within 0.03; fixed size with a bound of 2,000 (about 0.01) within 0.05.
TEST(SampledEngineTest, SampledCurvesAreWithinTheStatedErrorOnMooncake) {
  const std::string path = std::string(KVWATCH_SHARED_DATA) + "/mooncake/conversation_trace.jsonl";
  if (!std::ifstream(path)) GTEST_SKIP() << "no trace at " << path;
  const Trace trace = ReadMooncake(path);
  ASSERT_GT(trace.size(), 10000u);
  const std::vector<std::uint64_t> bounds = LogBucketBounds(kMaxPages, 8);
  const BucketedCurve exact = ExactCurve(trace, &bounds);

  const double fixed_rate = MaxRatioError(SampledCurve(trace, &bounds, 0.1, 0), exact);
  double rate_20k = 0, rate_2k = 0;
  const double fixed_20k = MaxRatioError(SampledCurve(trace, &bounds, 1.0, 20000, &rate_20k), exact);
  const double fixed_2k = MaxRatioError(SampledCurve(trace, &bounds, 1.0, 2000, &rate_2k), exact);
  std::printf("max |error|: rate 0.1 %.4f; bound 20000 (rate %.4f) %.4f; bound 2000 (rate %.4f) %.4f\n", fixed_rate,
              rate_20k, fixed_20k, rate_2k, fixed_2k);
  // For comparison: the same without SHARDS-adj.
  std::printf("without SHARDS-adj: rate 0.1 %.4f; rate 0.01 %.4f (with: %.4f); bound 20000 %.4f; bound 2000 %.4f\n",
              MaxRatioError(SampledCurve(trace, &bounds, 0.1, 0, nullptr, false), exact),
              MaxRatioError(SampledCurve(trace, &bounds, 0.01, 0, nullptr, false), exact),
              MaxRatioError(SampledCurve(trace, &bounds, 0.01, 0), exact),
              MaxRatioError(SampledCurve(trace, &bounds, 1.0, 20000, nullptr, false), exact),
              MaxRatioError(SampledCurve(trace, &bounds, 1.0, 2000, nullptr, false), exact));
  EXPECT_LE(fixed_rate, 0.03);
  EXPECT_LE(fixed_20k, 0.03);
  EXPECT_LE(fixed_2k, 0.05);
  EXPECT_LT(rate_20k, 0.2);
  EXPECT_LT(rate_2k, 0.02);
}

}  // namespace
}  // namespace kvwatch::curve
