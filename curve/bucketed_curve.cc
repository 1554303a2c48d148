#include "curve/bucketed_curve.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "base/byte_io.h"

namespace kvwatch::curve {
namespace {

// AddToEach looks this many bounds past a run's bucket before a binary search.
constexpr std::size_t kNearBounds = 4;

void PutVector(std::vector<std::uint8_t>* out, const std::vector<std::uint64_t>& v) {
  base::AppendPod<std::uint64_t>(out, v.size());
  for (std::uint64_t x : v) base::AppendPod(out, x);
}

bool GetVector(std::span<const std::uint8_t>* in, std::size_t expected, std::vector<std::uint64_t>* v) {
  std::uint64_t n = 0;
  if (!base::ReadPod(in, &n) || n != expected) return false;
  v->assign(n, 0);
  for (auto& x : *v) {
    if (!base::ReadPod(in, &x)) return false;
  }
  return true;
}

}  // namespace

std::vector<std::uint64_t> LogBucketBounds(std::uint64_t max_pages, std::uint32_t per_octave) {
  std::vector<std::uint64_t> bounds;
  if (max_pages == 0 || per_octave == 0) return bounds;
  for (std::uint32_t j = 0;; ++j) {
    const double v = std::round(std::exp2(static_cast<double>(j) / per_octave));
    const auto b = static_cast<std::uint64_t>(v);
    if (b >= max_pages) break;
    if (bounds.empty() || b > bounds.back()) bounds.push_back(b);
  }
  bounds.push_back(max_pages);
  return bounds;
}

// --- BucketedCurve ------------------------------------------------------------------

BucketedCurve::BucketedCurve(const std::vector<std::uint64_t>* bounds, double coverage_share)
    : bounds_(bounds),
      coverage_share_(coverage_share),
      hits_(bounds->size()),
      depth_(bounds->size()),
      required_(bounds->size()) {}

std::size_t BucketedCurve::BucketOf(std::uint64_t capacity) const {
  return static_cast<std::size_t>(std::lower_bound(bounds_->begin(), bounds_->end(), capacity) - bounds_->begin());
}

void BucketedCurve::Add(const RequestOutcome& outcome, std::uint64_t weight) {
  BucketedCurve* self = this;
  AddToEach(std::span<BucketedCurve* const>(&self, 1), outcome, weight);
}

void BucketedCurve::AddToEach(std::span<BucketedCurve* const> curves, const RequestOutcome& outcome,
                              std::uint64_t weight) {
  if (curves.empty()) return;
  const BucketedCurve& first = *curves[0];
  for (BucketedCurve* c : curves.subspan(1)) {
    if (c->bounds_ != first.bounds_ || c->coverage_share_ != first.coverage_share_) {
      for (BucketedCurve* each : curves) each->AddToEach(std::span<BucketedCurve* const>(&each, 1), outcome, weight);
      return;
    }
  }
  const std::vector<std::uint64_t>& bounds = *first.bounds_;
  for (BucketedCurve* c : curves) c->totals_.Add(outcome, weight);
  // m is non-decreasing: the hits are a prefix, and their buckets non-decreasing,
  // so the bucket search resumes from the previous one: the next few bounds
  // first (a prefix maximum mostly grows by a page or a few, and the bounds are
  // log-spaced: the next bucket is usually one of them), then a binary search.
  // Pages of one bucket are counted as a run: its hits and the sum of its page
  // indices.
  std::size_t j = 0;
  std::size_t run_start = 0;  // first page of the current bucket's run
  auto flush = [&](std::size_t end) {
    if (end == run_start) return;
    const std::uint64_t n = end - run_start;
    // sum of i over [run_start, end), exact in 64 bits as the per-page sums were.
    const std::uint64_t index_sum = (n % 2 == 0 ? n / 2 * (run_start + end - 1) : (run_start + end - 1) / 2 * n);
    for (BucketedCurve* c : curves) {
      c->hits_[j] += n * weight;
      c->depth_[j] += index_sum * weight;
    }
  };
  std::size_t i = 0;
  for (; i < outcome.size(); ++i) {
    const std::uint32_t c = outcome.hit_capacity(i);
    if (c == 0) break;
    if (j < bounds.size() && bounds[j] < c) {
      flush(i);
      run_start = i;
      const std::size_t near_end = std::min(bounds.size(), j + kNearBounds);
      while (++j < near_end && bounds[j] < c) {
      }
      if (j == near_end && j < bounds.size()) {
        j = static_cast<std::size_t>(
            std::lower_bound(bounds.begin() + static_cast<std::ptrdiff_t>(j), bounds.end(), c) - bounds.begin());
      }
    }
    if (j == bounds.size()) break;  // beyond the last bound: not a tracked hit
  }
  if (j < bounds.size()) flush(i);
  const std::uint32_t r = outcome.Requirement(first.coverage_share_);
  const std::size_t rb = r == 0 ? 0 : first.BucketOf(r);
  for (BucketedCurve* c : curves) {
    if (r == kBeyondTracked || rb == bounds.size()) {
      c->totals_.requests_beyond += weight;
    } else {
      c->required_[rb] += weight;
    }
  }
}

void BucketedCurve::AdjustReferences(std::uint64_t page_refs) {
  if (hits_.empty()) return;
  if (page_refs >= totals_.page_refs) {
    const std::uint64_t extra = page_refs - totals_.page_refs;
    hits_[0] += extra;
    totals_.unlimited_page_hits += extra;
  } else {
    std::uint64_t excess = totals_.page_refs - page_refs;
    for (std::size_t j = 0; j < hits_.size() && excess > 0; ++j) {
      const std::uint64_t take = std::min(excess, hits_[j]);
      if (take == 0) continue;
      // Keep the mean depth of what stays.
      depth_[j] = static_cast<std::uint64_t>(static_cast<double>(depth_[j]) * static_cast<double>(hits_[j] - take) /
                                             static_cast<double>(hits_[j]));
      hits_[j] -= take;
      totals_.unlimited_page_hits -= std::min(take, totals_.unlimited_page_hits);
      excess -= take;
    }
  }
  totals_.page_refs = page_refs;
}

void BucketedCurve::Merge(const BucketedCurve& other) {
  totals_.Merge(other.totals_);
  for (std::size_t j = 0; j < hits_.size(); ++j) {
    hits_[j] += other.hits_[j];
    depth_[j] += other.depth_[j];
    required_[j] += other.required_[j];
  }
}

void BucketedCurve::NormalizeRequests(std::uint64_t requests) {
  // Nothing sampled: nothing to scale (coverage stays that of no requests).
  if (totals_.requests == 0) return;
  const double f = static_cast<double>(requests) / static_cast<double>(totals_.requests);
  std::uint64_t before = 0, scaled_before = 0;
  for (std::uint64_t& r : required_) {
    before += r;
    const auto scaled = static_cast<std::uint64_t>(std::llround(static_cast<double>(before) * f));
    r = scaled - scaled_before;
    scaled_before = scaled;
  }
  totals_.requests_beyond = requests >= scaled_before ? requests - scaled_before : 0;
  totals_.requests = requests;
}

void BucketedCurve::Clear() {
  totals_ = CurveTotals();
  std::fill(hits_.begin(), hits_.end(), 0);
  std::fill(depth_.begin(), depth_.end(), 0);
  std::fill(required_.begin(), required_.end(), 0);
}

std::uint64_t BucketedCurve::PageHitsAt(std::size_t j) const {
  std::uint64_t sum = 0;
  for (std::size_t k = 0; k <= j && k < hits_.size(); ++k) sum += hits_[k];
  return sum;
}

std::uint64_t BucketedCurve::CoveredAt(std::size_t j) const {
  std::uint64_t sum = 0;
  for (std::size_t k = 0; k <= j && k < required_.size(); ++k) sum += required_[k];
  return sum;
}

std::uint64_t BucketedCurve::HitDepthSumAt(std::size_t j) const {
  std::uint64_t sum = 0;
  for (std::size_t k = 0; k <= j && k < depth_.size(); ++k) sum += depth_[k];
  return sum;
}

std::uint64_t BucketedCurve::PageHits(std::uint64_t capacity) const {
  // The largest bound <= capacity.
  auto it = std::upper_bound(bounds_->begin(), bounds_->end(), capacity);
  if (it == bounds_->begin()) return 0;
  return PageHitsAt(static_cast<std::size_t>(it - bounds_->begin()) - 1);
}

double BucketedCurve::PageHitRatio(std::uint64_t capacity) const {
  return totals_.page_refs == 0 ? 0.0
                                : static_cast<double>(PageHits(capacity)) / static_cast<double>(totals_.page_refs);
}

double BucketedCurve::RequestCoverage(std::uint64_t capacity) const {
  if (totals_.requests == 0) return 1.0;
  std::uint64_t covered = 0;
  // Requests with R = 0 sit in bucket 0 together with R = 1: bucket 0's bound is 1.
  auto it = std::upper_bound(bounds_->begin(), bounds_->end(), capacity);
  if (it != bounds_->begin()) covered = CoveredAt(static_cast<std::size_t>(it - bounds_->begin()) - 1);
  return static_cast<double>(covered) / static_cast<double>(totals_.requests);
}

std::optional<std::uint64_t> BucketedCurve::WorkingSetForPageHits(double fraction) const {
  const std::uint64_t need = CeilCount(fraction * static_cast<double>(totals_.unlimited_page_hits));
  if (need == 0) return 0;
  std::uint64_t sum = 0;
  for (std::size_t j = 0; j < hits_.size(); ++j) {
    sum += hits_[j];
    if (sum >= need) return (*bounds_)[j];
  }
  return std::nullopt;
}

std::optional<std::uint64_t> BucketedCurve::WorkingSetForCoverage(double fraction) const {
  const std::uint64_t need = CeilCount(fraction * static_cast<double>(totals_.requests));
  if (need == 0) return 0;
  std::uint64_t sum = 0;
  for (std::size_t j = 0; j < required_.size(); ++j) {
    sum += required_[j];
    if (sum >= need) return (*bounds_)[j];
  }
  return std::nullopt;
}

void BucketedCurve::Serialize(std::vector<std::uint8_t>* out) const {
  for (std::uint64_t v : {totals_.requests, totals_.page_refs, totals_.unlimited_page_hits, totals_.cold_misses,
                          totals_.beyond_tracked, totals_.requests_beyond}) {
    base::AppendPod(out, v);
  }
  PutVector(out, hits_);
  PutVector(out, depth_);
  PutVector(out, required_);
}

bool BucketedCurve::Deserialize(std::span<const std::uint8_t>* in) {
  for (std::uint64_t* v : {&totals_.requests, &totals_.page_refs, &totals_.unlimited_page_hits, &totals_.cold_misses,
                           &totals_.beyond_tracked, &totals_.requests_beyond}) {
    if (!base::ReadPod(in, v)) return false;
  }
  const std::size_t n = bounds_->size();
  return GetVector(in, n, &hits_) && GetVector(in, n, &depth_) && GetVector(in, n, &required_);
}

// --- WindowedCurves ---------------------------------------------------------------------

WindowedCurves::WindowedCurves(std::vector<double> windows_s, const std::vector<std::uint64_t>* bounds,
                               double coverage_share, bool adjust_references)
    : bounds_(bounds),
      coverage_share_(coverage_share),
      windows_(windows_s, BucketedCurve(bounds, coverage_share)),
      adjust_references_(adjust_references),
      expected_(adjust_references ? windows_s : std::vector<double>{}, Expected{}) {}

void WindowedCurves::Add(const RequestOutcome& outcome, double t, std::uint64_t weight, BucketedCurve* also) {
  expected_.Advance(t);
  // One pass over the outcome for every curve it goes into (AddToEach).
  std::array<BucketedCurve*, 16> curves;
  std::size_t n = 0;
  if (also != nullptr) curves[n++] = also;
  const bool everywhere = windows_.Add(t, [&](BucketedCurve& slice) {
    if (n == curves.size()) {
      BucketedCurve::AddToEach(curves, outcome, weight);
      n = 0;
    }
    curves[n++] = &slice;
  });
  BucketedCurve::AddToEach(std::span<BucketedCurve* const>(curves.data(), n), outcome, weight);
  if (!everywhere) ++late_requests_;
}

void WindowedCurves::AddExpected(std::uint64_t refs, std::uint64_t requests, double t) {
  if (!adjust_references_) return;
  windows_.Advance(t);
  expected_.Add(t, [&](Expected& slice) {
    slice.refs += refs;
    slice.requests += requests;
  });
}

BucketedCurve WindowedCurves::Window(std::size_t i) const {
  BucketedCurve sum = windows_.Window(i, BucketedCurve(bounds_, coverage_share_));
  if (adjust_references_) {
    const Expected e = expected_.Window(i, Expected{});
    sum.AdjustReferences(e.refs);
    sum.NormalizeRequests(e.requests);
  }
  return sum;
}

void WindowedCurves::Serialize(std::vector<std::uint8_t>* out) const {
  base::AppendPod<std::uint8_t>(out, windows_.started() ? 1 : 0);
  base::AppendPod(out, windows_.now());
  base::AppendPod(out, late_requests_);
  base::AppendPod<std::uint64_t>(out, windows_.size());
  for (const auto& w : windows_.rings()) {
    base::AppendPod(out, w.duration_s);
    base::AppendPod(out, w.newest_slice);
    for (const BucketedCurve& slice : w.ring) slice.Serialize(out);
  }
  // Only with adjust_references, so that other checkpoints keep their format.
  for (const auto& w : expected_.rings()) {
    base::AppendPod(out, w.newest_slice);
    for (const Expected& e : w.ring) {
      base::AppendPod(out, e.refs);
      base::AppendPod(out, e.requests);
    }
  }
}

bool WindowedCurves::Deserialize(std::span<const std::uint8_t>* in) {
  std::uint8_t started = 0;
  std::uint64_t n = 0;
  double now = 0;
  if (!base::ReadPod(in, &started) || !base::ReadPod(in, &now) || !base::ReadPod(in, &late_requests_) ||
      !base::ReadPod(in, &n) || n != windows_.size()) {
    return false;
  }
  windows_.Restore(started != 0, now);
  for (auto& w : windows_.rings()) {
    double d = 0;
    if (!base::ReadPod(in, &d) || d != w.duration_s || !base::ReadPod(in, &w.newest_slice)) return false;
    for (BucketedCurve& slice : w.ring) {
      if (!slice.Deserialize(in)) return false;
    }
  }
  expected_.Restore(started != 0, now);
  for (auto& w : expected_.rings()) {
    if (!base::ReadPod(in, &w.newest_slice)) return false;
    for (Expected& e : w.ring) {
      if (!base::ReadPod(in, &e.refs) || !base::ReadPod(in, &e.requests)) return false;
    }
  }
  return true;
}

}  // namespace kvwatch::curve
