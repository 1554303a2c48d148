// Latency samples and their quantiles (sim/latency_samples.h).
#include "sim/latency_samples.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace kvwatch::sim::internal {

int LatencySamples::Bucket(double v) {
  if (!(v > 0)) return 0;
  // v = m x 2^e with m in [0.5, 1), read off the bits (frexp, without the call):
  // e from the biased exponent, the sub-bucket from the top 6 bits of m's fraction.
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(v);
  const int biased = static_cast<int>((bits >> 52) & 0x7ff);
  if (biased == 0) return 0;  // subnormal: far below 2^-40
  const int e = biased - 1022;
  if (e <= kMinExp) return 0;
  if (e > kMaxExp) return (kMaxExp - kMinExp) * kSub;
  const int sub = static_cast<int>((bits >> 46) & (kSub - 1));
  return 1 + (e - kMinExp - 1) * kSub + sub;
}

double LatencySamples::UpperBound(int bucket) {
  if (bucket == 0) return std::ldexp(0.5, kMinExp);
  const int k = bucket - 1;
  const int e = k / kSub + kMinExp + 1;
  const int sub = k % kSub;
  return std::ldexp(0.5 + static_cast<double>(sub + 1) / (2 * kSub), e);
}

void LatencySamples::Add(double seconds) {
  ++count_;
  sorted_ = false;
  if (histogram_.empty() && exact_.size() < kExactLimit) {
    exact_.push_back(seconds);
    return;
  }
  if (histogram_.empty()) {
    histogram_.assign(static_cast<std::size_t>((kMaxExp - kMinExp) * kSub + 1), 0);
    for (double v : exact_) ++histogram_[Bucket(v)];
    exact_.clear();
    exact_.shrink_to_fit();
  }
  ++histogram_[Bucket(seconds)];
}

double LatencySamples::At(double p) {
  const std::uint64_t rank =
      std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::ceil(p * static_cast<double>(count_))));
  if (histogram_.empty()) return exact_[rank - 1];
  std::uint64_t seen = 0;
  for (std::size_t b = 0; b < histogram_.size(); ++b) {
    seen += histogram_[b];
    if (seen >= rank) return UpperBound(static_cast<int>(b));
  }
  return UpperBound(static_cast<int>(histogram_.size() - 1));
}

LatencyQuantiles LatencySamples::Quantiles() {
  if (count_ == 0) return {};
  if (histogram_.empty() && !sorted_) {
    std::sort(exact_.begin(), exact_.end());
    sorted_ = true;
  }
  return LatencyQuantiles{At(0.5), At(0.9), At(0.99)};
}

}  // namespace kvwatch::sim::internal
