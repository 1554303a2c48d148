#include "curve/knee.h"

#include <algorithm>
#include <cmath>

namespace kvwatch::curve {
namespace {

bool AllFinite(std::span<const double> v) {
  return std::all_of(v.begin(), v.end(), [](double a) { return std::isfinite(a); });
}

bool StrictlyIncreasing(std::span<const double> v) {
  for (std::size_t i = 1; i < v.size(); ++i) {
    if (!(v[i] > v[i - 1])) return false;
  }
  return true;
}

bool ValidInput(std::span<const double> x, std::span<const double> y, const KneeOptions& options) {
  return x.size() == y.size() && x.size() >= 3 && AllFinite(x) && AllFinite(y) && StrictlyIncreasing(x) &&
         std::isfinite(options.sensitivity) && options.sensitivity >= 0;
}

// Steps 1 and 2: y normalised to [0, 1] and turned into a concave increasing curve.
// REQUIRES: y is not flat.
std::vector<double> NormalizedKneeY(std::span<const double> y, const KneeOptions& options) {
  const auto [lo, hi] = std::minmax_element(y.begin(), y.end());
  const double min = *lo;
  const double range = *hi - *lo;
  std::vector<double> out(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) out[i] = (y[i] - min) / range;
  const bool convex = options.shape == CurveShape::kConvex;
  const bool decreasing = options.direction == CurveDirection::kDecreasing;
  // After normalisation max(y) is 1, so kneed's "max - y" is "1 - y".
  if (convex) {
    for (double& v : out) v = 1.0 - v;
  }
  if (convex != decreasing) std::reverse(out.begin(), out.end());
  return out;
}

// Whether the transform reversed y, so that difference-curve index i is input
// index n-1-i.
bool Reversed(const KneeOptions& options) {
  return (options.shape == CurveShape::kConvex) != (options.direction == CurveDirection::kDecreasing);
}

// Steps 1-6: the difference-curve indices of every knee detection, in scan order
// (repeats included). Empty on invalid input.
std::vector<std::size_t> DetectKnees(std::span<const double> x, std::span<const double> y, const KneeOptions& options,
                                     bool stop_at_first) {
  std::vector<std::size_t> found;
  if (!ValidInput(x, y, options)) return found;
  const auto [lo, hi] = std::minmax_element(y.begin(), y.end());
  if (!(*hi > *lo)) return found;  // flat: no knee (kneed divides by zero here)

  const std::size_t n = x.size();
  const double x0 = x.front();
  const double x_range = x.back() - x.front();
  std::vector<double> xn(n);
  for (std::size_t i = 0; i < n; ++i) xn[i] = (x[i] - x0) / x_range;
  const std::vector<double> yn = NormalizedKneeY(y, options);

  std::vector<double> d(n);  // step 3
  for (std::size_t i = 0; i < n; ++i) d[i] = yn[i] - xn[i];

  // Step 4, argrelextrema(d, >=) and (d, <=) in "clip" mode.
  auto is_max = [&](std::size_t i) { return d[i] >= d[i == 0 ? 0 : i - 1] && d[i] >= d[std::min(i + 1, n - 1)]; };
  auto is_min = [&](std::size_t i) { return d[i] <= d[i == 0 ? 0 : i - 1] && d[i] <= d[std::min(i + 1, n - 1)]; };

  // Step 5: the mean step of the normalised x, computed as kneed does.
  double step_sum = 0;
  for (std::size_t i = 1; i < n; ++i) step_sum += xn[i] - xn[i - 1];
  const double drop = options.sensitivity * std::abs(step_sum / static_cast<double>(n - 1));

  // Step 6.
  std::size_t i = 0;
  while (i < n && !is_max(i)) ++i;
  double threshold = 0;
  std::size_t candidate = i;
  for (; i + 1 < n; ++i) {
    if (is_max(i)) {
      threshold = d[i] - drop;
      candidate = i;
    }
    if (is_min(i)) threshold = 0.0;
    if (d[i + 1] < threshold) {
      found.push_back(candidate);
      if (stop_at_first) break;
    }
  }
  return found;
}

Knee MakeKnee(std::span<const double> x, std::span<const double> y, std::size_t d_index, const KneeOptions& options) {
  const std::size_t index = Reversed(options) ? x.size() - 1 - d_index : d_index;
  return Knee{index, x[index], y[index]};
}

}  // namespace

std::optional<Knee> FindKnee(std::span<const double> x, std::span<const double> y, const KneeOptions& options) {
  const std::vector<std::size_t> found = DetectKnees(x, y, options, !options.online);
  if (found.empty()) return std::nullopt;
  return MakeKnee(x, y, found.back(), options);
}

std::vector<Knee> FindAllKnees(std::span<const double> x, std::span<const double> y, const KneeOptions& options) {
  std::vector<Knee> knees;
  for (std::size_t d_index : DetectKnees(x, y, options, /*stop_at_first=*/false)) {
    Knee knee = MakeKnee(x, y, d_index, options);
    const bool seen = std::any_of(knees.begin(), knees.end(), [&](const Knee& k) { return k.index == knee.index; });
    if (!seen) knees.push_back(knee);
  }
  return knees;
}

std::optional<CapacityKnee> FindCapacityKnee(std::span<const std::uint64_t> capacities,
                                             std::span<const double> page_hit_ratio, double unlimited_hit_ratio,
                                             const CapacityKneeOptions& options) {
  if (capacities.size() != page_hit_ratio.size() || capacities.empty()) return std::nullopt;
  if (!std::isfinite(unlimited_hit_ratio) || unlimited_hit_ratio <= 0) return std::nullopt;
  if (!AllFinite(page_hit_ratio)) return std::nullopt;
  if (!std::isfinite(options.sensitivity) || options.sensitivity < 0) return std::nullopt;
  if (!(options.saturation_fraction > 0 && options.saturation_fraction <= 1)) return std::nullopt;
  for (std::size_t i = 1; i < capacities.size(); ++i) {
    if (capacities[i] <= capacities[i - 1]) return std::nullopt;
  }

  // The curve from capacity 0 to C*, the first sample reaching the target.
  std::vector<double> x;
  std::vector<double> y;
  x.reserve(capacities.size() + 1);
  y.reserve(capacities.size() + 1);
  if (capacities.front() != 0) {
    x.push_back(0);
    y.push_back(0);
  }
  const double target = options.saturation_fraction * unlimited_hit_ratio;
  bool saturated = false;
  for (std::size_t i = 0; i < capacities.size() && !saturated; ++i) {
    x.push_back(static_cast<double>(capacities[i]));
    y.push_back(page_hit_ratio[i]);
    saturated = page_hit_ratio[i] >= target;
  }

  KneeOptions knee_options;
  knee_options.sensitivity = options.sensitivity;
  for (const Knee& knee : FindAllKnees(x, y, knee_options)) {
    if (knee.x > 0) return CapacityKnee{static_cast<std::uint64_t>(knee.x), knee.y, false};
  }
  if (saturated && x.back() > 0) {
    return CapacityKnee{static_cast<std::uint64_t>(x.back()), y.back(), true};
  }
  return std::nullopt;
}

}  // namespace kvwatch::curve
