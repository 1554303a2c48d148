// Latency samples for the simulator's quantiles (internal to sim/). Exact (sorted)
// up to kExactLimit samples; beyond, a log-spaced histogram of 64 buckets per
// doubling, whose quantile is its bucket's upper bound (at most 1.1% above).
// Quantiles are nearest-rank: the smallest sample with at least ceil(p x n) samples
// at or below it.
//
// Thread safety: none.
#ifndef KVWATCH_SIM_LATENCY_SAMPLES_H_
#define KVWATCH_SIM_LATENCY_SAMPLES_H_

#include <cstdint>
#include <vector>

#include "sim/summary.h"

namespace kvwatch::sim::internal {

class LatencySamples {
 public:
  static constexpr std::size_t kExactLimit = 1 << 20;
  void Add(double seconds);
  std::uint64_t count() const { return count_; }
  // p50, p90, p99; zeros when empty. Sorts the exact samples (call once, at the end).
  LatencyQuantiles Quantiles();

 private:
  static constexpr int kSub = 64;
  static constexpr int kMinExp = -40;  // 2^-40 s and below: bucket 0
  static constexpr int kMaxExp = 40;
  static int Bucket(double v);
  static double UpperBound(int bucket);
  double At(double p);

  std::vector<double> exact_;
  std::vector<std::uint64_t> histogram_;  // used once exact_ is full
  std::uint64_t count_ = 0;
  bool sorted_ = false;
};

}  // namespace kvwatch::sim::internal

#endif  // KVWATCH_SIM_LATENCY_SAMPLES_H_
