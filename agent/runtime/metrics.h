// Metric families for /metrics, built at scrape time from a snapshot of the
// agent's state and serialized by prometheus-cpp's TextSerializer (text format
// 0.0.4). Every family is added through its base::MetricDef (name, type, help,
// label names), and each component declares its families in one table:
//   - the agent's curves, windows, collectors' stats and state, then the policy
//     canaries': the constants at the head of agent/runtime/exposition.cc
//     (kBuildInfo ... kStateSaveErrors; kPolicyHitRatio ... kCanaryMemory);
//   - the alert runner's: kAlertState ... kAlertQueueLength in alert_runner.cc;
//   - the engine signals any collector reports: kEngineSignalMetrics in
//     collectors/engine_signals.cc; each collector's own in its .cc
//     (kScrapeMetrics, kLogLines, kKvMetrics), reaching the agent as
//     collectors::MetricSample;
//   - the process_* families: the constants at the head of metrics.cc.
// agent/runtime/metric_catalog.h gathers every table into the metrics
// reference (docs/metrics.md).
//
// Thread safety: a MetricsBuilder belongs to one thread (one scrape).
#ifndef KVWATCH_AGENT_METRICS_H_
#define KVWATCH_AGENT_METRICS_H_

#include <prometheus/metric_family.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/metric_def.h"

namespace kvwatch::agent {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Collects families in order; one family per name, samples added to it.
class MetricsBuilder {
 public:
  // A counter or gauge sample of `def` (labels named as def.labels, in order).
  void Add(const base::MetricDef& def, double value, const Labels& labels = {});
  // A histogram of `def`. Buckets: (upper bound, cumulative count); +Inf (= count)
  // is appended.
  void Histogram(const base::MetricDef& def, const std::vector<std::pair<double, std::uint64_t>>& buckets,
                 std::uint64_t count, double sum, const Labels& labels = {});

  // Adds process_* metrics read from /proc/self (Linux).
  void ProcessMetrics();

  std::string Serialize() const;
  const std::vector<prometheus::MetricFamily>& families() const { return families_; }

 private:
  prometheus::ClientMetric& Family(const base::MetricDef& def, const Labels& labels);
  std::vector<prometheus::MetricFamily> families_;
};

// The process_* families MetricsBuilder::ProcessMetrics adds.
base::MetricDefs ProcessMetricDefs();

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_METRICS_H_
