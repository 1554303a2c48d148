// Kneedle: the knee (or elbow) of a sampled curve, after Satopaa, Albrecht, Irwin
// and Raghavan, "Finding a 'Kneedle' in a Haystack: Detecting Knee Points in System
// Behavior" (ICDCS Workshops 2011), exactly as arvkevi/kneed's KneeLocator computes
// it with interp_method="interp1d" (no smoothing): kneed/knee_locator.py, its
// golden cases in tests/test_sample.py (test_figure2, test_sensitivity). See
// docs/semantics.md section 3 ("Knee").
//
// Algorithm (indices refer to the input arrays, n points, x strictly increasing):
//   1. Normalise x and y to [0, 1]: (v - min) / (max - min).
//   2. Transform y so that the curve is a concave increasing "knee":
//      decreasing+concave: reverse the order of y; decreasing+convex: y = 1 - y;
//      increasing+convex: reverse(1 - y). (x is never reversed, as in kneed.)
//   3. Difference curve d(i) = y(i) - x(i).
//   4. Local maxima and minima of d, with ">=" and "<=" against both neighbours
//      (scipy argrelextrema, mode "clip": an end point is compared with its one
//      neighbour, so end points and every point of a plateau qualify).
//   5. Threshold of maximum m: T(m) = d(m) - S * mean(x(j+1) - x(j)) = d(m) - S/(n-1).
//   6. Scan i from the first maximum to n-2. At a maximum the threshold becomes
//      T(i) and i becomes the candidate; at a minimum the threshold becomes 0
//      (kneed's reading of the paper's "reset"; a point below the diagonal after a
//      minimum still confirms the last candidate). A point that is both, as on a
//      plateau, becomes the candidate with threshold 0. When d(i+1) < threshold, the
//      candidate is a knee. Offline mode returns the first knee; online mode keeps
//      scanning and returns the last one.
//   7. Map back: for the two transforms that reverse y, the knee of the input is at
//      index n-1-candidate, otherwise at the candidate.
//
// No knee (std::nullopt) when: fewer than 3 points; x and y of different sizes;
// a value that is not finite; x not strictly increasing; S negative or not finite;
// a flat y (max == min); or no maximum of d followed by a drop below its threshold.
// The last point of the difference curve is never a knee (nothing follows it). Its
// first point can be: when d starts by falling (for a concave increasing curve, y
// at the second point is on or below the chord from the first point to the last)
// and drops S/(n-1) below d(0) before rising to another maximum, kneed reports
// x[0], and so does FindKnee. (FindCapacityKnee skips such a knee; see there.)
//
// Thread safety: pure functions of their arguments.
#ifndef KVWATCH_CURVE_KNEE_H_
#define KVWATCH_CURVE_KNEE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace kvwatch::curve {

enum class CurveShape {
  kConcave,  // a knee: the slope falls (kneed curve="concave")
  kConvex,   // an elbow: the slope rises (kneed curve="convex")
};

enum class CurveDirection { kIncreasing, kDecreasing };

struct KneeOptions {
  CurveShape shape = CurveShape::kConcave;
  CurveDirection direction = CurveDirection::kIncreasing;
  // S: how many "flat" sample steps to see after a maximum of the difference curve
  // before calling it a knee. Larger is more conservative. Default 1.0 (the paper's).
  double sensitivity = 1.0;
  // false (default): the first knee found; true: the last one (kneed's online mode).
  bool online = false;
};

struct Knee {
  std::size_t index = 0;  // into the input x and y
  double x = 0;
  double y = 0;
};

// The knee of the curve (x[i], y[i]); see the file comment for when there is none.
std::optional<Knee> FindKnee(std::span<const double> x, std::span<const double> y, const KneeOptions& options = {});

// Every knee the scan detects, in detection order, each once (kneed's all_knees,
// which online mode visits; options.online is ignored). Empty when there is none.
std::vector<Knee> FindAllKnees(std::span<const double> x, std::span<const double> y, const KneeOptions& options = {});

// --- kvwatch's knee of the capacity-to-hit-rate curve (docs/semantics.md section 3).

struct CapacityKneeOptions {
  // Kneedle sensitivity S. Default 1.0.
  double sensitivity = 1.0;
  // The curve is cut at the smallest sampled capacity whose page hit ratio reaches
  // this fraction of the unlimited (theoretical) page hit ratio. Default 0.999.
  double saturation_fraction = 0.999;
};

struct CapacityKnee {
  std::uint64_t capacity_pages = 0;
  double page_hit_ratio = 0;
  // true when Kneedle found no interior knee and the knee is the saturation capacity
  // (see FindCapacityKnee); false for an ordinary Kneedle knee.
  bool at_saturation = false;
};

// The knee of page_hit_ratio against capacity_pages on linear axes (concave,
// increasing, no smoothing), over capacities from 0 to the smallest
// sampled capacity C* whose ratio reaches saturation_fraction * unlimited_hit_ratio,
// or over every sample when none does (the tracked range).
//
// REQUIRES (else nullopt): capacities strictly increasing, same size as the ratios,
// ratios finite; unlimited_hit_ratio finite; sensitivity finite and >= 0;
// saturation_fraction in (0, 1]. A point (0, 0) is put in front when the
// first capacity is not 0 (an empty cache hits nothing).
//
// Choices, written down here because the semantics leave them open:
// - No reuse at all (unlimited_hit_ratio <= 0) has no knee.
// - The knee is the first Kneedle knee (offline) at a positive capacity. Kneedle
//   declares one at capacity 0 when small caches hit (almost) nothing, as with a
//   cyclic working set; that point buys nothing, so the scan's next knee is taken.
// - When the curve reaches the saturation target but Kneedle finds no knee on
//   [0, C*] (a curve that is linear or convex up to C*, like a cyclic working set
//   whose hit ratio jumps from 0 to 1 at its size, sampled so that C* is the last
//   point), the knee is C* with at_saturation = true: beyond C* more capacity buys
//   less than (1 - saturation_fraction) of the reusable hits, and Kneedle would put
//   the knee there on the curve extended by its flat tail. When the target is never
//   reached there is no such fallback.
std::optional<CapacityKnee> FindCapacityKnee(std::span<const std::uint64_t> capacities,
                                             std::span<const double> page_hit_ratio, double unlimited_hit_ratio,
                                             const CapacityKneeOptions& options = {});

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_KNEE_H_
