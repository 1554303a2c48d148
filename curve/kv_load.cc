#include "curve/kv_load.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "base/byte_io.h"

namespace kvwatch::curve {

double KvTokenSeconds(double prompt_tokens, double output_tokens, double decode_tokens_per_s, double prefill_s) {
  const double lifetime_s = prefill_s + output_tokens / decode_tokens_per_s;
  return prompt_tokens * lifetime_s + output_tokens * output_tokens / (2 * decode_tokens_per_s);
}

double KvLoadFactor(double arrivals_per_s, double mean_token_seconds, double capacity_tokens) {
  if (!(capacity_tokens > 0)) return std::numeric_limits<double>::quiet_NaN();
  return arrivals_per_s * mean_token_seconds / capacity_tokens;
}

std::uint32_t OutputLengthBucket(std::uint64_t tokens) {
  if (tokens < 32) return static_cast<std::uint32_t>(tokens);
  const int e = std::bit_width(tokens) - 1;                                 // 5..63
  const std::uint64_t sub = (tokens - (std::uint64_t{1} << e)) >> (e - 4);  // 0..15
  return static_cast<std::uint32_t>(32 + (e - 5) * 16 + sub);
}

std::uint64_t OutputLengthBucketUpper(std::uint32_t bucket) {
  if (bucket < 32) return bucket;
  const int e = static_cast<int>((bucket - 32) / 16) + 5;
  const std::uint64_t sub = (bucket - 32) % 16;
  // 2^e + (sub + 1) x 2^(e-4) - 1; wraps to 2^64 - 1 for the last bucket, as meant.
  return (std::uint64_t{1} << e) + ((sub + 1) << (e - 4)) - 1;
}

std::optional<std::uint64_t> OutputLengthQuantile(const OutputLengthHistogram& histogram, double q) {
  std::uint64_t n = 0;
  for (std::uint64_t c : histogram) n += c;
  if (n == 0) return std::nullopt;
  // Nearest rank: the smallest value with at least ceil(q x n) values at or below it.
  // (1 - 1e-12): q x n computed a hair above an integer must not skip a rank.
  const double exact_rank = q * static_cast<double>(n) * (1 - 1e-12);
  const auto rank = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::ceil(exact_rank)));
  std::uint64_t seen = 0;
  for (std::size_t b = 0; b < histogram.size(); ++b) {
    seen += histogram[b];
    if (seen >= rank) return OutputLengthBucketUpper(static_cast<std::uint32_t>(b));
  }
  return OutputLengthBucketUpper(static_cast<std::uint32_t>(histogram.size() - 1));
}

void KvLoadSlice::Add(const KvLoadRequest& r) {
  ++requests_;
  if (r.output_tokens >= 0 && !r.class_label.empty()) {
    OutputLengthHistogram& h = classes_[r.class_label];
    const std::uint32_t b = OutputLengthBucket(static_cast<std::uint64_t>(r.output_tokens));
    if (h.size() <= b) h.resize(b + 1, 0);
    ++h[b];
  }
  if (r.prompt_tokens < 0 || r.output_tokens < 0) return;
  ++sized_;
  const auto p = static_cast<double>(r.prompt_tokens);
  const auto o = static_cast<double>(r.output_tokens);
  prompt_sum_ += p;
  growth_sum_ += p * o + o * o / 2;
}

void KvLoadSlice::Merge(const KvLoadSlice& other) {
  requests_ += other.requests_;
  sized_ += other.sized_;
  prompt_sum_ += other.prompt_sum_;
  growth_sum_ += other.growth_sum_;
  for (const auto& [label, h] : other.classes_) {
    OutputLengthHistogram& mine = classes_[label];
    if (mine.size() < h.size()) mine.resize(h.size(), 0);
    for (std::size_t b = 0; b < h.size(); ++b) mine[b] += h[b];
  }
}

void KvLoadSlice::Clear() { *this = KvLoadSlice(); }

void KvLoadSlice::Serialize(std::vector<std::uint8_t>* out) const {
  base::AppendPod(out, requests_);
  base::AppendPod(out, sized_);
  base::AppendPod(out, prompt_sum_);
  base::AppendPod(out, growth_sum_);
  base::AppendPod<std::uint64_t>(out, classes_.size());
  for (const auto& [label, h] : classes_) {
    base::AppendString(out, label);
    base::AppendPod<std::uint64_t>(out, h.size());
    for (std::uint64_t c : h) base::AppendPod(out, c);
  }
}

bool KvLoadSlice::Deserialize(std::span<const std::uint8_t>* in) {
  Clear();
  std::uint64_t n = 0;
  if (!base::ReadPod(in, &requests_) || !base::ReadPod(in, &sized_) || !base::ReadPod(in, &prompt_sum_) ||
      !base::ReadPod(in, &growth_sum_) || !base::ReadCount(in, &n, sizeof(std::uint64_t) * 2)) {
    return false;
  }
  for (std::uint64_t i = 0; i < n; ++i) {
    std::string label;
    std::uint64_t buckets = 0;
    if (!base::ReadString(in, &label) || !base::ReadCount(in, &buckets, sizeof(std::uint64_t)) ||
        buckets > kOutputLengthBuckets) {
      return false;
    }
    OutputLengthHistogram& h = classes_[label];
    h.resize(buckets);
    for (std::uint64_t& c : h) {
      if (!base::ReadPod(in, &c)) return false;
    }
  }
  return true;
}

double KvLoadSlice::TokenSeconds(double decode_tokens_per_s, double prefill_s) const {
  return prefill_s * prompt_sum_ + growth_sum_ / decode_tokens_per_s;
}

std::optional<KvLoad> KvLoadOf(const KvLoadSlice& window, double span_s, double decode_tokens_per_s,
                               double capacity_tokens, double prefill_s) {
  if (window.sized() == 0 || !(span_s > 0) || !(decode_tokens_per_s > 0) || !(capacity_tokens > 0) ||
      !std::isfinite(decode_tokens_per_s) || !std::isfinite(capacity_tokens)) {
    return std::nullopt;
  }
  KvLoad load;
  load.span_s = span_s;
  load.arrivals_per_s = static_cast<double>(window.requests()) / span_s;
  load.mean_token_seconds = window.TokenSeconds(decode_tokens_per_s, prefill_s) / static_cast<double>(window.sized());
  load.capacity_tokens = capacity_tokens;
  load.load_factor = KvLoadFactor(load.arrivals_per_s, load.mean_token_seconds, capacity_tokens);
  return load;
}

void KvLoadWindows::Add(const KvLoadRequest& request, double t) {
  windows_.Add(t, [&request](KvLoadSlice& slice) { slice.Add(request); });
  const double at = std::isfinite(t) ? t : windows_.now();
  first_s_ = any_ ? std::min(first_s_, at) : at;
  any_ = true;
}

void KvLoadWindows::Serialize(std::vector<std::uint8_t>* out) const {
  base::AppendPod<std::uint8_t>(out, windows_.started() ? 1 : 0);
  base::AppendPod(out, windows_.now());
  base::AppendPod<std::uint8_t>(out, any_ ? 1 : 0);
  base::AppendPod(out, first_s_);
  base::AppendPod<std::uint64_t>(out, windows_.size());
  for (const auto& w : windows_.rings()) {
    base::AppendPod(out, w.duration_s);
    base::AppendPod(out, w.newest_slice);
    for (const KvLoadSlice& slice : w.ring) slice.Serialize(out);
  }
}

bool KvLoadWindows::Deserialize(std::span<const std::uint8_t>* in) {
  std::uint8_t started = 0, any = 0;
  double now = 0;
  std::uint64_t n = 0;
  if (!base::ReadPod(in, &started) || !base::ReadPod(in, &now) || !base::ReadPod(in, &any) ||
      !base::ReadPod(in, &first_s_) || !base::ReadPod(in, &n) || n != windows_.size()) {
    return false;
  }
  any_ = any != 0;
  windows_.Restore(started != 0, now);
  for (auto& w : windows_.rings()) {
    double d = 0;
    if (!base::ReadPod(in, &d) || d != w.duration_s || !base::ReadPod(in, &w.newest_slice)) return false;
    for (KvLoadSlice& slice : w.ring) {
      if (!slice.Deserialize(in)) return false;
    }
  }
  return true;
}

double KvLoadWindows::Span(std::size_t i) const {
  if (!any_) return 0;
  const auto& ring = windows_.rings()[i];
  const double slice_s = ring.duration_s / SlidingWindows<KvLoadSlice>::kSlicesPerWindow;
  const double oldest_start =
      static_cast<double>(ring.newest_slice - (SlidingWindows<KvLoadSlice>::kSlicesPerWindow - 1)) * slice_s;
  return std::max(0.0, windows_.now() - std::max(oldest_start, first_s_));
}

}  // namespace kvwatch::curve
