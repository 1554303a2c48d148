// CurveHistory: what the agent's windows said over time (their requests, knee
// and working sets), sampled by the event loop, for GET /api/v1/history and the
// page's history panel. Prometheus keeps the same figures for as long as it is
// told to; this is the short memory a newcomer's page needs without one.
//
// Bounded, covering the whole run: a sample is due every interval (5 s at first);
// when max_points samples are kept, every other one is dropped (the first, third,
// ... are kept) and the interval doubles. So memory is max_points x windows x
// (targets + 3) numbers (about 100 KB with the defaults: 720 points, 3 windows, 8
// targets), the newest samples are at most two intervals apart, and the oldest is
// from the start. Not saved in the state file: the history starts with the process.
//
// A wall clock that steps back (before the last sample) starts the history again,
// so that its points stay in time order.
//
// Thread safety: every method takes the history's own mutex and no other lock
// (the loop records, HTTP threads read), so it may be called with or without the
// agent's mu_ held.
#ifndef KVWATCH_AGENT_RUNTIME_CURVE_HISTORY_H_
#define KVWATCH_AGENT_RUNTIME_CURVE_HISTORY_H_

#include <cstddef>
#include <vector>

#include "agent/render/api_json.h"
#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "curve/report.h"

namespace kvwatch::agent {

// The targets of a history of the agent's windows: the page-hit targets, then the
// coverage targets ("page_hit", "request_coverage"), as the reports list them.
std::vector<HistoryApiContext::Target> HistoryTargets(const std::vector<double>& page_hit_targets,
                                                      const std::vector<double>& coverage_targets);

class CurveHistory {
 public:
  static constexpr std::size_t kDefaultMaxPoints = 720;
  static constexpr double kDefaultIntervalS = 5;

  // `windows` series, each sample holding one working set per target (in the
  // order given). max_points >= 2 (smaller values are raised to 2), interval_s > 0.
  CurveHistory(std::size_t windows, std::vector<HistoryApiContext::Target> targets,
               std::size_t max_points = kDefaultMaxPoints, double interval_s = kDefaultIntervalS);

  // Whether a sample is due at wall time `time_s`: always before the first, then
  // once `interval` has passed since the last. A clock that steps back makes one due.
  bool Due(double time_s) const EXCLUDES(mu_);
  // Records one sample per window at `time_s` from the windows' reports (in the
  // windows' order; a missing report counts as an empty window). Working sets are
  // matched to the targets by target and fraction.
  void Record(double time_s, const std::vector<curve::CurveReport>& reports) EXCLUDES(mu_);

  // The kept samples of window `window`, oldest first; empty for an unknown one.
  std::vector<HistoryPoint> Points(std::size_t window) const EXCLUDES(mu_);
  // The interval between the samples now kept.
  double interval_s() const EXCLUDES(mu_);
  const std::vector<HistoryApiContext::Target>& targets() const { return targets_; }

 private:
  const std::size_t windows_;
  const std::vector<HistoryApiContext::Target> targets_;
  const std::size_t max_points_;

  mutable base::Mutex mu_;
  double interval_s_ GUARDED_BY(mu_);
  std::vector<double> times_ GUARDED_BY(mu_);
  // samples_[k][w]: the k-th kept sample of window w.
  std::vector<std::vector<HistorySample>> samples_ GUARDED_BY(mu_);
};

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_RUNTIME_CURVE_HISTORY_H_
