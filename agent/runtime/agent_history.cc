// The agent's history of its windows (agent/runtime/curve_history.h): sampled by
// the loop, served at GET /api/v1/history.
#include "agent/render/api_json.h"
#include "agent/runtime/agent.h"

namespace kvwatch::agent {

void Agent::RecordHistory(double wall_s) {
  // The reports outside the lock, as for /api/v1/curve.
  const AgentSnapshot s = TakeSnapshot(/*windows=*/true, /*canaries=*/false);
  std::vector<curve::CurveReport> reports;
  reports.reserve(s.analysis.windows.size());
  for (const curve::BucketedCurve& w : s.analysis.windows)
    reports.push_back(WindowReport(options_, w, s.analysis.sampled));
  history_->Record(wall_s, reports);
}

std::string Agent::RenderHistoryJson(const std::string& window) {
  const std::optional<std::size_t> i = WindowIndex(options_, window);
  if (!i) return {};
  HistoryApiContext context;
  context.window = window;
  context.window_seconds = options_.curve.windows[*i].seconds;
  context.replica = options_.replica;
  context.interval_seconds = history_->interval_s();
  context.bytes_per_page = BytesPerPage(options_);
  context.capacities = options_.curve.capacities;
  context.targets = history_->targets();
  context.points = history_->Points(*i);
  return RenderHistoryApiJson(context);
}

}  // namespace kvwatch::agent
