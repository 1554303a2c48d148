// Latency samples and their quantiles (sim/latency_samples.h).
#include "sim/latency_samples.h"

#include <algorithm>
#include <cmath>

namespace kvwatch::sim::internal {

int LatencySamples::Bucket(double v) {
  if (!(v > 0)) return 0;
  int e = 0;
  const double m = std::frexp(v, &e);  // v = m x 2^e, m in [0.5, 1)
  if (e <= kMinExp) return 0;
  if (e > kMaxExp) return (kMaxExp - kMinExp) * kSub;
  const int sub = std::min(kSub - 1, static_cast<int>((m - 0.5) * 2 * kSub));
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
  const std::uint64_t rank = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::ceil(p * static_cast<double>(count_))));
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
