// BucketedCurve and WindowedCurves: the live agent's curves, over log-spaced
// capacity buckets and recent time windows (docs/semantics.md
// section 5).
//
// Capacity buckets. The bounds are integer page counts, log-spaced with
// `per_octave` bounds per doubling (every integer below that spacing), up to the
// tracked range. A reference that hits from capacity h on is counted in the first
// bucket whose bound is >= h, so the cumulative count at bound X is exactly the
// page hits at capacity X, as a Prometheus `le="X"` bucket. Between two bounds a
// capacity read off the curve (a working set, the knee) is rounded up to the next
// bound: its relative error is below 2^(1/per_octave) - 1 (9.1% at the default 8).
//
// Windows. One continuous cache state feeds every window; a window counts the
// requests that arrived within its duration D. Each window keeps a ring of
// kSlicesPerWindow slices of D / kSlicesPerWindow; the window's curve is the sum of
// the slices that start after now - D, so it covers between D - D/60 and D of
// arrivals.
//
// Thread safety: none; the agent serializes access.
#ifndef KVWATCH_CURVE_BUCKETED_CURVE_H_
#define KVWATCH_CURVE_BUCKETED_CURVE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "curve/curve_totals.h"
#include "curve/sliding_windows.h"
#include "curve/stack_distance.h"

namespace kvwatch::curve {

// Log-spaced integer bounds 1, 2, ... up to and including max_pages.
std::vector<std::uint64_t> LogBucketBounds(std::uint64_t max_pages, std::uint32_t per_octave);

class BucketedCurve {
 public:
  BucketedCurve() = default;
  // bounds: strictly increasing capacities (from LogBucketBounds). Shared by
  // reference semantics is not needed: curves copy the bounds' size only.
  BucketedCurve(const std::vector<std::uint64_t>* bounds, double coverage_share);

  // weight: how many requests this outcome stands for (sampled engines count each
  // sampled request with SampledEngine::weight(); every count is multiplied by it).
  void Add(const RequestOutcome& outcome, std::uint64_t weight = 1);
  // The same as curve->Add(outcome, weight) for each curve, reading the outcome
  // once when the curves share their bounds and coverage share (the tenant and
  // class curves of one request).
  static void AddToEach(std::span<BucketedCurve* const> curves, const RequestOutcome& outcome,
                        std::uint64_t weight = 1);
  void Merge(const BucketedCurve& other);
  // SHARDS-adj (see CurveAccumulator::AdjustReferences), over buckets: sets the
  // reference count to page_refs (the expected weighted count) and moves the
  // difference into the hits of the first bucket, or out of the lowest buckets.
  void AdjustReferences(std::uint64_t page_refs);
  // Sets the request count to `requests` (for a sampled curve, the true count
  // times the weight unit), scaling the requirement histogram with it so that
  // request coverage is unchanged (up to rounding: cumulative counts are scaled).
  void NormalizeRequests(std::uint64_t requests);
  void Clear();

  const std::vector<std::uint64_t>& bounds() const { return *bounds_; }
  double coverage_share() const { return coverage_share_; }
  std::uint64_t requests() const { return totals_.requests; }
  std::uint64_t page_refs() const { return totals_.page_refs; }
  std::uint64_t unlimited_page_hits() const { return totals_.unlimited_page_hits; }
  std::uint64_t cold_misses() const { return totals_.cold_misses; }
  std::uint64_t beyond_tracked() const { return totals_.beyond_tracked; }
  std::uint64_t reused_tokens_unlimited(std::uint64_t page_tokens) const {
    return totals_.unlimited_page_hits * page_tokens;
  }
  // Per-bucket counts (not cumulative), one per bound.
  const std::vector<std::uint64_t>& hits() const { return hits_; }
  const std::vector<std::uint64_t>& depth() const { return depth_; }
  const std::vector<std::uint64_t>& required() const { return required_; }
  // Requests whose requirement is beyond every bound (beyond tracked).
  std::uint64_t required_beyond() const { return totals_.requests_beyond; }
  const CurveTotals& totals() const { return totals_; }

  // Cumulative values at bound index j.
  std::uint64_t PageHitsAt(std::size_t j) const;
  std::uint64_t CoveredAt(std::size_t j) const;
  std::uint64_t HitDepthSumAt(std::size_t j) const;
  // At any capacity: the value at the largest bound <= capacity (exact at bounds).
  std::uint64_t PageHits(std::uint64_t capacity) const;
  double PageHitRatio(std::uint64_t capacity) const;
  double RequestCoverage(std::uint64_t capacity) const;

  // The smallest bound reaching the target; nullopt when not converged.
  std::optional<std::uint64_t> WorkingSetForPageHits(double fraction) const;
  std::optional<std::uint64_t> WorkingSetForCoverage(double fraction) const;

  // Checkpoint encoding (appends / consumes); false when malformed.
  void Serialize(std::vector<std::uint8_t>* out) const;
  bool Deserialize(std::span<const std::uint8_t>* in);

 private:
  std::size_t BucketOf(std::uint64_t capacity) const;  // first bound >= capacity

  const std::vector<std::uint64_t>* bounds_ = nullptr;
  double coverage_share_ = 1.0;
  CurveTotals totals_;
  std::vector<std::uint64_t> hits_;
  std::vector<std::uint64_t> depth_;
  std::vector<std::uint64_t> required_;
};

class WindowedCurves {
 public:
  static constexpr std::uint32_t kSlicesPerWindow = SlidingWindows<BucketedCurve>::kSlicesPerWindow;

  // windows_s: window durations in seconds (each > 0). adjust_references: for a
  // sampled engine, also keep per slice the expected weighted page references and
  // requests of every request (AddExpected), and in Window() SHARDS-adj each
  // window's curve against their sums (BucketedCurve::AdjustReferences) and set
  // its request count to theirs (BucketedCurve::NormalizeRequests).
  WindowedCurves(std::vector<double> windows_s, const std::vector<std::uint64_t>* bounds, double coverage_share,
                 bool adjust_references = false);

  // Counts outcome in every window at time t (seconds). Times may go backwards a
  // little: a request older than a window's oldest slice is not counted there
  // (late_requests() counts those), and the clock never runs backwards.
  // `also`, when given, gets the outcome too (the lifetime curve, sharing the
  // windows' bounds): the outcome is read once for it and every window.
  void Add(const RequestOutcome& outcome, double t, std::uint64_t weight = 1, BucketedCurve* also = nullptr);
  // Moves the clock to t (no-op when t is not later), expiring old slices.
  void Advance(double t) {
    windows_.Advance(t);
    expected_.Advance(t);
  }
  // Counts the expected weighted page references and requests of a request at
  // time t (with adjust_references; every request, sampled or not). No-op otherwise.
  void AddExpected(std::uint64_t refs, std::uint64_t requests, double t);

  // The curve of window i at the current clock.
  BucketedCurve Window(std::size_t i) const;
  std::size_t size() const { return windows_.size(); }
  double window_seconds(std::size_t i) const { return windows_.window_seconds(i); }
  double now() const { return windows_.now(); }
  std::uint64_t late_requests() const { return late_requests_; }

  void Serialize(std::vector<std::uint8_t>* out) const;
  bool Deserialize(std::span<const std::uint8_t>* in);

 private:
  const std::vector<std::uint64_t>* bounds_;
  double coverage_share_;
  SlidingWindows<BucketedCurve> windows_;
  // With adjust_references: expected page references and requests per slice,
  // on the same clock as windows_ (both advance together).
  struct Expected {
    std::uint64_t refs = 0;
    std::uint64_t requests = 0;
    void Clear() { refs = requests = 0; }
    void Merge(const Expected& o) {
      refs += o.refs;
      requests += o.requests;
    }
  };
  bool adjust_references_;
  SlidingWindows<Expected> expected_;
  std::uint64_t late_requests_ = 0;
};

}  // namespace kvwatch::curve

#endif  // KVWATCH_CURVE_BUCKETED_CURVE_H_
