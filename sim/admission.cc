// The admission rules' names and estimators (sim/admission.h, sim/replica.h).
#include "sim/admission.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

#include "sim/replica.h"

namespace kvwatch::sim {

std::string_view AdmissionName(Admission a) {
  switch (a) {
    case Admission::kGreedy: return "greedy";
    case Admission::kReserveMax: return "reserve-max";
    case Admission::kReserveQuantile: return "reserve-quantile";
    case Admission::kRateCap: return "rate-cap";
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
  const std::uint64_t rank = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(c.count))));
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

void RateCap::Finished(double block_steps) {
  if (filled_ == kWindow) ring_sum_ -= ring_[next_]; else ++filled_;
  ring_[next_] = block_steps;
  ring_sum_ += block_steps;
  next_ = (next_ + 1) % kWindow;
}

double RateCap::Rate() const {
  double mean;
  if (filled_ > 0) {
    mean = ring_sum_ / static_cast<double>(filled_);
  } else {
    const double b = static_cast<double>(block_tokens_);
    const double prompt = prompts_ == 0 ? b : prompt_sum_ / static_cast<double>(prompts_);
    const double out = std::max<double>(1, prior_output_);
    mean = out * (std::ceil(prompt / b) + out / (2 * b));
  }
  return static_cast<double>(pool_blocks_) / std::max(1.0, mean);
}

}  // namespace internal
}  // namespace kvwatch::sim
