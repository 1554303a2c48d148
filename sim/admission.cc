// The admission rules' names and estimators (sim/admission_rule.h, sim/admission.h).
#include "sim/admission.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

#include "sim/admission_rule.h"

namespace kvwatch::sim {

std::string_view AdmissionName(Admission a) {
  switch (a) {
    case Admission::kGreedy:
      return "greedy";
    case Admission::kReserveMax:
      return "reserve-max";
    case Admission::kReserveQuantile:
      return "reserve-quantile";
    case Admission::kRateCap:
      return "rate-cap";
  }
  return "greedy";
}

base::Result<Admission> ParseAdmission(std::string_view name) {
  std::string known;
  for (Admission a : kAllAdmissions) {
    if (AdmissionName(a) == name) return a;
    if (!known.empty()) known += ", ";
    known += AdmissionName(a);
  }
  return base::Result<Admission>::Error("unknown admission rule '" + std::string(name) + "' (known: " + known + ")");
}

namespace internal {

int OutputQuantiles::Bucket(std::uint32_t v) {
  if (v < kSub) return static_cast<int>(v);  // exact below 32
  const int e = std::bit_width(v) - 1;       // 2^e <= v < 2^(e+1), e >= 5
  const int sub = static_cast<int>((v - (std::uint32_t{1} << e)) >> (e - 5));
  return (e - 4) * kSub + sub;
}

std::uint32_t OutputQuantiles::UpperBound(int bucket) {
  if (bucket < kSub) return static_cast<std::uint32_t>(bucket);
  const int e = bucket / kSub + 4;
  const std::uint64_t sub = static_cast<std::uint64_t>(bucket % kSub);
  const std::uint64_t hi = (std::uint64_t{1} << e) + ((sub + 1) << (e - 5)) - 1;
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(hi, 0xffffffffu));
}

void OutputQuantiles::Add(std::uint32_t class_id, std::uint32_t output_tokens) {
  Class& c = classes_[class_id];
  if (c.counts.empty()) c.counts.assign(kBuckets, 0);
  ++c.counts[Bucket(output_tokens)];
  ++c.count;
  c.dirty = true;
}

std::uint32_t OutputQuantiles::Quantile(std::uint32_t class_id, double q) {
  Class& c = classes_[class_id];
  if (!c.dirty && c.cached_q == q) return c.cached;
  const std::uint64_t rank =
      std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(c.count))));
  std::uint64_t seen = 0;
  int b = 0;
  for (; b < kBuckets; ++b) {
    seen += c.counts[b];
    if (seen >= rank) break;
  }
  c.cached = UpperBound(std::min(b, kBuckets - 1));
  c.cached_q = q;
  c.dirty = false;
  return c.cached;
}

void RateCap::Admitted(std::uint32_t prompt_tokens) {
  prompt_sum_ += prompt_tokens;
  ++prompts_;
}

void RateCap::Finished(double block_steps, std::uint64_t peak_blocks) {
  if (filled_ == kWindow) {
    steps_sum_ -= steps_ring_[next_];
    peak_sum_ -= peak_ring_[next_];
  } else {
    ++filled_;
  }
  steps_ring_[next_] = block_steps;
  peak_ring_[next_] = static_cast<double>(peak_blocks);
  steps_sum_ += block_steps;
  peak_sum_ += static_cast<double>(peak_blocks);
  next_ = (next_ + 1) % kWindow;
}

double RateCap::Rate() const {
  double steps, peak;
  if (filled_ > 0) {
    steps = steps_sum_ / static_cast<double>(filled_);
    peak = peak_sum_ / static_cast<double>(filled_);
  } else if (prompts_ == 0) {
    return 0;
  } else {
    const double b = static_cast<double>(block_tokens_);
    const double prompt_blocks = std::ceil(prompt_sum_ / static_cast<double>(prompts_) / b);
    const double out = std::max<double>(1, prior_output_);
    steps = out * (prompt_blocks + out / (2 * b));
    peak = prompt_blocks + out / b;
  }
  return std::max(0.0, static_cast<double>(pool_blocks_) - peak / 2) / std::max(1.0, steps);
}

}  // namespace internal
}  // namespace kvwatch::sim
