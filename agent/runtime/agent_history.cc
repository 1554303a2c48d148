// The agent's history of its windows (agent/runtime/curve_history.h): sampled by
// the loop, served at GET /api/v1/history.
#include "agent/runtime/agent.h"
#include "agent/web/api_json.h"

namespace kvwatch::agent {

void Agent::RecordHistory(double wall_s) {
  std::vector<curve::BucketedCurve> windows;
  bool is_sampled = false;
  {
    base::MutexLock lock(mu_);
    is_sampled = sampled();
    for (std::size_t i = 0; i < windows_->size(); ++i) windows.push_back(windows_->Window(i));
  }
  // The reports outside the lock, as for /api/v1/curve.
  std::vector<curve::CurveReport> reports;
  reports.reserve(windows.size());
  for (const curve::BucketedCurve& w : windows) reports.push_back(WindowReport(w, is_sampled));
  history_->Record(wall_s, reports);
}

std::string Agent::RenderHistoryJson(const std::string& window) {
  for (std::size_t i = 0; i < options_.curve.windows.size(); ++i) {
    if (options_.curve.windows[i].name != window) continue;
    HistoryApiContext context;
    context.window = window;
    context.window_seconds = options_.curve.windows[i].seconds;
    context.replica = options_.replica;
    context.interval_seconds = history_->interval_s();
    context.bytes_per_page = BytesPerPage();
    context.capacities = options_.curve.capacities;
    context.targets = history_->targets();
    context.points = history_->Points(i);
    return RenderHistoryApiJson(context);
  }
  return {};
}

}  // namespace kvwatch::agent
