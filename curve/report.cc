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
    p.capacity_bytes =
        static_cast<double>(capacity) * static_cast<double>(options.page_tokens) * *options.bytes_per_token;
  }
  if (options.prefill_cost) {
    // Linear in the page position, so the count and the position sum of the hits
    // give the sum of the hit pages' costs exactly.
    const double flops =
        options.prefill_cost->PagesFlops(acc.PageHits(capacity), acc.HitDepthSum(capacity), options.page_tokens);
    p.avoided_prefill_flops = flops * options.count_scale;
    if (options.prefill_flops_per_s && *options.prefill_flops_per_s > 0) {
      p.avoided_prefill_seconds = *p.avoided_prefill_flops / *options.prefill_flops_per_s;
    }
  }
  return p;
}

namespace {

std::optional<double> BytesOf(const ReportOptions& options, std::uint64_t pages) {
  if (!options.bytes_per_token) return std::nullopt;
  return static_cast<double>(pages) * static_cast<double>(options.page_tokens) * *options.bytes_per_token;
}

// Kneedle on a uniform grid of options.knee_grid_points capacities from 0 to end,
// ratio_at(c) giving the page hit ratio at capacity c.
template <class RatioAt>
std::optional<CapacityKnee> GridKnee(std::uint64_t end, double unlimited_ratio, const ReportOptions& options,
                                     RatioAt ratio_at) {
  if (end == 0) return std::nullopt;
  std::vector<std::uint64_t> grid;
  std::vector<double> ratio;
  const std::uint64_t n = std::min<std::uint64_t>(options.knee_grid_points, end + 1);
  for (std::uint64_t k = 0; k < n; ++k) {
    const std::uint64_t c = n == 1 ? end : (end * k + (n - 1) / 2) / (n - 1);
    if (!grid.empty() && c <= grid.back()) continue;
    grid.push_back(c);
    ratio.push_back(ratio_at(c));
  }
  CapacityKneeOptions ko;
  ko.sensitivity = options.knee_sensitivity;
  return FindCapacityKnee(grid, ratio, unlimited_ratio, ko);
}

}  // namespace

CurveReport BuildBucketedReport(const BucketedCurve& curve, const ReportOptions& options,
                                std::uint64_t knee_min_requests) {
  CurveReport r;
  const std::vector<std::uint64_t>& bounds = curve.bounds();
  r.requests = curve.requests();
  r.page_refs = static_cast<double>(curve.page_refs());
  r.unlimited_page_hits = static_cast<double>(curve.unlimited_page_hits());
  r.unlimited_page_hit_ratio = r.page_refs == 0 ? 0 : r.unlimited_page_hits / r.page_refs;
  r.cold_misses = static_cast<double>(curve.cold_misses());
  r.beyond_tracked = static_cast<double>(curve.beyond_tracked());
  // The curve's end: the last bound where a hit or a requirement lands.
  std::size_t last = 0;
  for (std::size_t j = 0; j < bounds.size(); ++j) {
    if (curve.hits()[j] != 0 || curve.required()[j] != 0) last = j;
  }
  r.max_capacity = curve.requests() == 0 ? 0 : bounds[last];

  auto point = [&](std::uint64_t c) {
    CurvePoint p;
    p.capacity_pages = c;
    p.page_hits = static_cast<double>(curve.PageHits(c));
    p.page_hit_ratio = curve.PageHitRatio(c);
    p.request_coverage = curve.RequestCoverage(c);
    p.reused_tokens = p.page_hits * static_cast<double>(options.page_tokens);
    p.capacity_bytes = BytesOf(options, c);
    return p;
  };
  const std::vector<std::uint64_t> caps =
      options.capacities.empty() ? DefaultCapacities(r.max_capacity) : options.capacities;
  for (std::uint64_t c : caps) r.points.push_back(point(c));
  if (r.requests > 0) {
    for (std::size_t j = 0; j <= last; ++j) r.plot.push_back(point(bounds[j]));
  }

  auto add_targets = [&](const char* name, const std::vector<double>& fractions, bool page_hit) {
    for (double f : fractions) {
      WorkingSetEntry e;
      e.target = name;
      e.fraction = f;
      e.capacity_pages = page_hit ? curve.WorkingSetForPageHits(f) : curve.WorkingSetForCoverage(f);
      if (e.capacity_pages) e.bytes = BytesOf(options, *e.capacity_pages);
      r.working_set.push_back(e);
    }
  };
  add_targets("page_hit", options.page_hit_targets, true);
  add_targets("request_coverage", options.coverage_targets, false);

  if (curve.requests() >= knee_min_requests && curve.page_refs() > 0) {
    const double refs = static_cast<double>(curve.page_refs());
    // Page hits at any capacity: exact at bounds, linear between them.
    auto ratio_at = [&](std::uint64_t c) {
      auto it = std::lower_bound(bounds.begin(), bounds.end(), c);
      if (it == bounds.end()) return static_cast<double>(curve.PageHits(c)) / refs;
      const auto j = static_cast<std::size_t>(it - bounds.begin());
      const double hi = static_cast<double>(curve.PageHitsAt(j));
      if (*it == c) return hi / refs;
      const double lo = j == 0 ? 0.0 : static_cast<double>(curve.PageHitsAt(j - 1));
      const double from = j == 0 ? 0.0 : static_cast<double>(bounds[j - 1]);
      const double f = (static_cast<double>(c) - from) / (static_cast<double>(*it) - from);
      return (lo + f * (hi - lo)) / refs;
    };
    const std::uint64_t end = curve.WorkingSetForPageHits(0.999).value_or(r.max_capacity);
    r.knee = GridKnee(end, r.unlimited_page_hit_ratio, options, ratio_at);
    if (r.knee) r.knee_bytes = BytesOf(options, r.knee->capacity_pages);
  }
  return r;
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

  // The knee: Kneedle on a uniform grid from 0 to the capacity that keeps 99.9% of
  // the unlimited hits (or the curve's end). A fixed number of grid points keeps
  // Kneedle's flatness threshold S / (n - 1) independent of the capacity scale; on
  // every integer capacity, single-page plateaus of a step curve would pass for
  // knees.
  const std::uint64_t end = acc.WorkingSetForPageHits(0.999).value_or(r.max_capacity);
  r.knee = GridKnee(end, acc.UnlimitedPageHitRatio(), options, [&](std::uint64_t c) { return acc.PageHitRatio(c); });
  if (r.knee) r.knee_bytes = bytes_of(r.knee->capacity_pages);
  return r;
}

}  // namespace kvwatch::curve
