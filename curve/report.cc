#include "curve/report.h"

#include <algorithm>
#include <cmath>

namespace kvwatch::curve {

std::vector<std::uint64_t> DefaultCapacities(std::uint64_t max_capacity) {
  std::vector<std::uint64_t> caps;
  for (std::uint64_t decade = 1; decade <= max_capacity; decade *= 10) {
    for (std::uint64_t m : {1, 2, 5}) {
      if (decade * m < max_capacity) caps.push_back(decade * m);
    }
    if (decade > max_capacity / 10) break;
  }
  if (max_capacity > 0) caps.push_back(max_capacity);
  return caps;
}

std::vector<std::uint64_t> LogSpacedCapacities(std::uint64_t max_capacity, std::uint32_t n) {
  std::vector<std::uint64_t> caps;
  if (max_capacity == 0 || n == 0) return caps;
  const double top = std::log(static_cast<double>(max_capacity));
  for (std::uint32_t k = 0; k < n; ++k) {
    const double t = n == 1 ? top : top * k / (n - 1);
    const auto c = static_cast<std::uint64_t>(std::llround(std::exp(t)));
    if (caps.empty() || c > caps.back()) caps.push_back(std::min(c, max_capacity));
  }
  if (caps.back() != max_capacity) caps.push_back(max_capacity);
  return caps;
}

CurvePoint PointAt(const CurveAccumulator& acc, std::uint64_t capacity, const ReportOptions& options) {
  CurvePoint p;
  p.capacity_pages = capacity;
  p.page_hits = static_cast<double>(acc.PageHits(capacity)) * options.count_scale;
  p.page_hit_ratio = acc.PageHitRatio(capacity);
  p.request_coverage = acc.RequestCoverage(capacity);
  p.reused_tokens = p.page_hits * static_cast<double>(options.page_tokens);
  if (options.bytes_per_token) {
    p.capacity_bytes = static_cast<double>(capacity) * static_cast<double>(options.page_tokens) *
                       *options.bytes_per_token;
  }
  if (options.prefill_cost) {
    // Linear in the page position, so the count and the position sum of the hits
    // give the sum of the hit pages' costs exactly.
    const double flops = options.prefill_cost->PagesFlops(acc.PageHits(capacity), acc.HitDepthSum(capacity),
                                                          options.page_tokens);
    p.avoided_prefill_flops = flops * options.count_scale;
    if (options.prefill_flops_per_s && *options.prefill_flops_per_s > 0) {
      p.avoided_prefill_seconds = *p.avoided_prefill_flops / *options.prefill_flops_per_s;
    }
  }
  return p;
}

CurveReport BuildCurveReport(const CurveAccumulator& acc, const ReportOptions& options) {
  CurveReport r;
  const double scale = options.count_scale;
  r.requests = acc.requests();
  r.page_refs = static_cast<double>(acc.page_refs()) * scale;
  r.unlimited_page_hits = static_cast<double>(acc.unlimited_page_hits()) * scale;
  r.unlimited_page_hit_ratio = acc.UnlimitedPageHitRatio();
  r.cold_misses = static_cast<double>(acc.cold_misses()) * scale;
  r.beyond_tracked = static_cast<double>(acc.beyond_tracked()) * scale;
  r.max_capacity = acc.MaxCapacity();

  const std::vector<std::uint64_t> caps =
      options.capacities.empty() ? DefaultCapacities(r.max_capacity) : options.capacities;
  for (std::uint64_t c : caps) r.points.push_back(PointAt(acc, c, options));
  for (std::uint64_t c : LogSpacedCapacities(r.max_capacity, options.plot_points)) {
    r.plot.push_back(PointAt(acc, c, options));
  }

  auto bytes_of = [&](std::uint64_t pages) -> std::optional<double> {
    if (!options.bytes_per_token) return std::nullopt;
    return static_cast<double>(pages) * static_cast<double>(options.page_tokens) * *options.bytes_per_token;
  };
  auto add_targets = [&](const char* name, const std::vector<double>& fractions, bool page_hit) {
    for (double f : fractions) {
      WorkingSetEntry e;
      e.target = name;
      e.fraction = f;
      e.capacity_pages = page_hit ? acc.WorkingSetForPageHits(f) : acc.WorkingSetForCoverage(f);
      if (e.capacity_pages) e.bytes = bytes_of(*e.capacity_pages);
      r.working_set.push_back(e);
    }
  };
  add_targets("page_hit", options.page_hit_targets, true);
  add_targets("request_coverage", options.coverage_targets, false);

  // The knee: Kneedle on a uniform capacity grid from 0 to the capacity that keeps
  // 99.9% of the unlimited hits (or the curve's end). A fixed number of grid points
  // keeps Kneedle's flatness threshold S / (n - 1) independent of the capacity
  // scale; on every integer capacity, single-page plateaus of a step curve would
  // pass for knees.
  const std::uint64_t end = acc.WorkingSetForPageHits(0.999).value_or(r.max_capacity);
  if (end > 0) {
    std::vector<std::uint64_t> grid;
    std::vector<double> ratio;
    const std::uint64_t n = std::min<std::uint64_t>(options.knee_grid_points, end + 1);
    for (std::uint64_t k = 0; k < n; ++k) {
      const std::uint64_t c = n == 1 ? end : (end * k + (n - 1) / 2) / (n - 1);
      if (!grid.empty() && c <= grid.back()) continue;
      grid.push_back(c);
      ratio.push_back(acc.PageHitRatio(c));
    }
    CapacityKneeOptions ko;
    ko.sensitivity = options.knee_sensitivity;
    r.knee = FindCapacityKnee(grid, ratio, acc.UnlimitedPageHitRatio(), ko);
    if (r.knee) r.knee_bytes = bytes_of(r.knee->capacity_pages);
  }
  return r;
}

}  // namespace kvwatch::curve
