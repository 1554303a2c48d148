#include "curve/sampled_engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/byte_io.h"

namespace kvwatch::curve {
namespace {

constexpr double kTwo64 = 18446744073709551616.0;  // 2^64
constexpr std::uint32_t kStateVersion = 1;

EngineOptions ScaledOptions(EngineOptions options, double rate, std::uint32_t max_sampled) {
  const double m = std::ceil(static_cast<double>(options.max_pages) * rate);
  options.max_pages = static_cast<std::uint32_t>(std::clamp(m, 1.0, static_cast<double>(options.max_pages)));
  // Fixed size: the engine never needs more pages than the sample set holds.
  if (max_sampled != 0) options.max_pages = std::min(options.max_pages, max_sampled);
  if (options.remembered_evictions != 0) {
    options.remembered_evictions = std::max<std::uint64_t>(
        1, static_cast<std::uint64_t>(std::ceil(static_cast<double>(options.remembered_evictions) * rate)));
  }
  return options;
}

std::uint64_t WeightFor(double rate) {
  const double w = std::round(static_cast<double>(SampledEngine::kWeightUnit) / rate);
  return w >= 1.8e19 ? ~std::uint64_t{0} : std::max<std::uint64_t>(1, static_cast<std::uint64_t>(w));
}

bool HeapLess(const std::pair<std::uint64_t, PageId>& a, const std::pair<std::uint64_t, PageId>& b) {
  return a.first < b.first;
}

}  // namespace

SampledEngine::SampledEngine(const EngineOptions& options, double rate, std::uint32_t max_sampled_pages)
    : initial_rate_(rate),
      rate_(rate),
      all_(false),
      threshold_(0),
      weight_(WeightFor(rate)),
      max_sampled_(max_sampled_pages),
      engine_(ScaledOptions(options, rate, max_sampled_pages)) {
  // The fixed-rate test (top 24 bits of the mix below ceil(rate * 2^24)), written
  // as a 64-bit comparison so that fixed-size mode can lower it hash by hash.
  const auto t24 = static_cast<std::uint64_t>(std::ceil(rate * static_cast<double>(1u << 24)));
  if (t24 >= (1u << 24)) {
    all_ = true;
  } else {
    threshold_ = t24 << 40;
  }
}

void SampledEngine::SetRateFromThreshold() {
  all_ = false;
  rate_ = static_cast<double>(threshold_) / kTwo64;
  if (!(rate_ > 0)) rate_ = 1.0 / kTwo64;  // threshold 0 samples nothing; keep the weight finite
}

void SampledEngine::Shrink() {
  while (members_.size() > max_sampled_ && !heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), HeapLess);
    const auto [hash, page] = heap_.back();
    heap_.pop_back();
    threshold_ = hash;  // this page and every larger hash leave the sample
    members_.Erase(page);
    engine_.Forget(page);
  }
  SetRateFromThreshold();
}

void SampledEngine::Process(std::span<const PageId> pages, RequestOutcome* out) {
  sampled_.clear();
  for (std::size_t i = 0; i < pages.size(); ++i) {
    const PageId p = pages[i];
    if (!Sampled(p)) continue;
    sampled_.push_back(p);
    if (max_sampled_ != 0 && members_.Find(p) == nullptr) {
      members_.Insert(p, 0);
      heap_.emplace_back(Mix(p), p);
      std::push_heap(heap_.begin(), heap_.end(), HeapLess);
    }
  }
  engine_.Process(sampled_, out);
  const double rate = rate_;  // the rate these pages were sampled at
  weight_ = WeightFor(rate);
  if (max_sampled_ != 0 && members_.size() > max_sampled_) Shrink();
  if (rate >= 1.0) return;
  // Scale the sampled distances back to the full stream; the prefix maximum is
  // unchanged by a monotone scaling, so scale it the same way.
  const double inv = 1.0 / rate;
  auto scale = [inv](std::uint32_t d) -> std::uint32_t {
    if (d >= kBeyondTracked) return d;
    const double s = std::floor(static_cast<double>(d) * inv);
    return s >= static_cast<double>(kBeyondTracked) ? kBeyondTracked - 1 : static_cast<std::uint32_t>(s);
  };
  for (std::size_t i = 0; i < out->size(); ++i) {
    out->distance[i] = scale(out->distance[i]);
    out->prefix_max[i] = scale(out->prefix_max[i]);
  }
}

std::size_t SampledEngine::MemoryBytes() const {
  return engine_.MemoryBytes() + members_.MemoryBytes() + heap_.capacity() * sizeof(heap_[0]) +
         sampled_.capacity() * sizeof(PageId);
}

void SampledEngine::Clear() {
  engine_.Clear();
  members_.Clear();
  heap_.clear();
  heap_.shrink_to_fit();
  sampled_.clear();
  rate_ = initial_rate_;
  weight_ = WeightFor(rate_);
  const auto t24 = static_cast<std::uint64_t>(std::ceil(rate_ * static_cast<double>(1u << 24)));
  all_ = t24 >= (1u << 24);
  threshold_ = all_ ? 0 : t24 << 40;
}

std::vector<std::uint8_t> SampledEngine::Serialize() const {
  const std::vector<std::uint8_t> engine = engine_.Serialize();
  // Not empty at the first append: g++ 12 reports a false -Wstringop-overflow on
  // vector::insert into an empty vector.
  std::vector<std::uint8_t> out(sizeof(kStateVersion));
  std::memcpy(out.data(), &kStateVersion, sizeof(kStateVersion));
  out.reserve(64 + heap_.size() * sizeof(PageId) + engine.size());
  base::AppendPod(&out, max_sampled_);
  base::AppendPod<std::uint8_t>(&out, all_ ? 1 : 0);
  base::AppendPod(&out, threshold_);
  base::AppendPod(&out, rate_);
  base::AppendPod<std::uint64_t>(&out, heap_.size());
  for (const auto& entry : heap_) base::AppendPod(&out, entry.second);
  base::AppendPod<std::uint64_t>(&out, engine.size());
  out.insert(out.end(), engine.begin(), engine.end());
  return out;
}

bool SampledEngine::Deserialize(std::span<const std::uint8_t> in) {
  Clear();
  std::uint32_t version = 0, max_sampled = 0;
  std::uint8_t all = 0;
  std::uint64_t threshold = 0, n = 0;
  double rate = 0;
  auto fail = [&] {
    Clear();
    return false;
  };
  if (!base::ReadPod(&in, &version) || version != kStateVersion || !base::ReadPod(&in, &max_sampled) ||
      max_sampled != max_sampled_ || !base::ReadPod(&in, &all) || !base::ReadPod(&in, &threshold) ||
      !base::ReadPod(&in, &rate) || !base::ReadPod(&in, &n) || n > in.size() / sizeof(PageId)) {
    return fail();
  }
  for (std::uint64_t i = 0; i < n; ++i) {
    PageId page = 0;
    if (!base::ReadPod(&in, &page) || members_.Find(page) != nullptr) return fail();
    members_.Insert(page, 0);
    heap_.emplace_back(Mix(page), page);
  }
  std::make_heap(heap_.begin(), heap_.end(), HeapLess);
  if (!base::ReadPod(&in, &n) || n != in.size() || !engine_.Deserialize(in)) return fail();
  all_ = all != 0;
  threshold_ = threshold;
  rate_ = rate;
  weight_ = WeightFor(rate_);
  return true;
}

}  // namespace kvwatch::curve
