// CurveTotals: the per-request sums every curve keeps beside its histograms
// (docs/semantics.md section 3), shared by the exact
// CurveAccumulator and the bucketed curves of the live agent so that both count
// requests, references, unlimited hits and the unknowns the same way.
//
// Thread safety: a plain value; callers serialize.
#ifndef KVWATCH_CURVE_CURVE_TOTALS_H_
#define KVWATCH_CURVE_CURVE_TOTALS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "curve/stack_distance.h"

namespace kvwatch::curve {

struct CurveTotals {
  std::uint64_t requests = 0;
  std::uint64_t page_refs = 0;
  std::uint64_t unlimited_page_hits = 0;  // sum of T_r
  std::uint64_t cold_misses = 0;
  std::uint64_t beyond_tracked = 0;
  // Requests whose requirement lies beyond the tracked range (or the last bucket).
  std::uint64_t requests_beyond = 0;

  // Counts one request `weight` times (not its requirement: the curve decides
  // whether that is beyond its range).
  void Add(const RequestOutcome& outcome, std::uint64_t weight = 1) {
    requests += weight;
    page_refs += outcome.size() * weight;
    unlimited_page_hits += outcome.unlimited_hits * weight;
    cold_misses += outcome.cold_misses * weight;
    beyond_tracked += outcome.beyond_tracked * weight;
  }
  void Merge(const CurveTotals& other) {
    requests += other.requests;
    page_refs += other.page_refs;
    unlimited_page_hits += other.unlimited_page_hits;
    cold_misses += other.cold_misses;
    beyond_tracked += other.beyond_tracked;
    requests_beyond += other.requests_beyond;
  }
  // Unlimited hits / page refs (0 with no references).
  double UnlimitedPageHitRatio() const {
    return page_refs == 0 ? 0.0 : static_cast<double>(unlimited_page_hits) / static_cast<double>(page_refs);
  }
};

// ceil(x) for a count computed in floating point (a fraction times a total): a
// value a rounding error above an integer counts as that integer.
inline std::uint64_t CeilCount(double x) {
  if (x <= 0) return 0;
  return static_cast<std::uint64_t>(std::ceil(x - 1e-9 * std::max(1.0, x)));
}

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_CURVE_TOTALS_H_
