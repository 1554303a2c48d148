#include "curve/sampled_engine.h"

#include <algorithm>
#include <cmath>

namespace kvwatch::curve {
namespace {

EngineOptions ScaledOptions(EngineOptions options, double rate) {
  const double m = std::ceil(static_cast<double>(options.max_pages) * rate);
  options.max_pages = static_cast<std::uint32_t>(std::clamp(m, 1.0, static_cast<double>(options.max_pages)));
  if (options.remembered_evictions != 0) {
    options.remembered_evictions = std::max<std::uint64_t>(
        1, static_cast<std::uint64_t>(std::ceil(static_cast<double>(options.remembered_evictions) * rate)));
  }
  return options;
}

}  // namespace

SampledEngine::SampledEngine(const EngineOptions& options, double rate)
    : rate_(rate),
      threshold_(static_cast<std::uint64_t>(std::ceil(rate * static_cast<double>(1u << 24)))),
      engine_(ScaledOptions(options, rate)) {}

void SampledEngine::Process(std::span<const PageId> pages, RequestOutcome* out) {
  sampled_.clear();
  for (PageId p : pages) {
    if (Sampled(p)) sampled_.push_back(p);
  }
  engine_.Process(sampled_, out);
  if (rate_ >= 1.0) return;
  // Scale the sampled distances back to the full stream; the prefix maximum is
  // unchanged by a monotone scaling, so scale it the same way.
  const double inv = 1.0 / rate_;
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

}  // namespace kvwatch::curve
