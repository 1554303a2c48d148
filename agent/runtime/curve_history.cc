#include "agent/runtime/curve_history.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace kvwatch::agent {

std::vector<HistoryApiContext::Target> HistoryTargets(const std::vector<double>& page_hit_targets,
                                                      const std::vector<double>& coverage_targets) {
  std::vector<HistoryApiContext::Target> targets;
  for (double f : page_hit_targets) targets.push_back({"page_hit", f});
  for (double f : coverage_targets) targets.push_back({"request_coverage", f});
  return targets;
}

CurveHistory::CurveHistory(std::size_t windows, std::vector<HistoryApiContext::Target> targets, std::size_t max_points,
                           double interval_s)
    : windows_(windows),
      targets_(std::move(targets)),
      max_points_(std::max<std::size_t>(max_points, 2)),
      interval_s_(interval_s > 0 ? interval_s : kDefaultIntervalS) {}

bool CurveHistory::Due(double time_s) const {
  base::MutexLock lock(mu_);
  if (times_.empty()) return true;
  const double last = times_.back();
  return time_s < last || time_s - last >= interval_s_;
}

void CurveHistory::Record(double time_s, const std::vector<curve::CurveReport>& reports) {
  std::vector<HistorySample> samples(windows_);
  for (std::size_t w = 0; w < windows_ && w < reports.size(); ++w) {
    const curve::CurveReport& r = reports[w];
    HistorySample& s = samples[w];
    s.requests = r.requests;
    if (r.knee) s.knee_pages = r.knee->capacity_pages;
    s.working_set_pages.resize(targets_.size());
    for (std::size_t t = 0; t < targets_.size(); ++t) {
      for (const curve::WorkingSetEntry& e : r.working_set) {
        if (e.target == targets_[t].target && std::fabs(e.fraction - targets_[t].fraction) < 1e-12) {
          s.working_set_pages[t] = e.capacity_pages;
          break;
        }
      }
    }
  }
  for (std::size_t w = reports.size(); w < windows_; ++w) samples[w].working_set_pages.resize(targets_.size());

  base::MutexLock lock(mu_);
  if (!times_.empty() && time_s < times_.back()) {
    // The wall clock stepped back: the series stays in time order from here on.
    times_.clear();
    samples_.clear();
  }
  if (times_.size() >= max_points_) {
    // Keep the first, third, ...: the oldest stays, the spacing doubles.
    std::size_t kept = 0;
    for (std::size_t k = 0; k < times_.size(); k += 2, ++kept) {
      if (kept == k) continue;  // never move a sample onto itself (that empties it)
      times_[kept] = times_[k];
      samples_[kept] = std::move(samples_[k]);
    }
    times_.resize(kept);
    samples_.resize(kept);
    interval_s_ *= 2;
  }
  times_.push_back(time_s);
  samples_.push_back(std::move(samples));
}

std::vector<HistoryPoint> CurveHistory::Points(std::size_t window) const {
  std::vector<HistoryPoint> out;
  if (window >= windows_) return out;
  base::MutexLock lock(mu_);
  out.reserve(times_.size());
  for (std::size_t k = 0; k < times_.size(); ++k) out.push_back({times_[k], samples_[k][window]});
  return out;
}

double CurveHistory::interval_s() const {
  base::MutexLock lock(mu_);
  return interval_s_;
}

}  // namespace kvwatch::agent
