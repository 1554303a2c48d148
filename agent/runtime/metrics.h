// Metric families for /metrics, built at scrape time from the agent's state and
// serialized by prometheus-cpp's TextSerializer (text format 0.0.4). Every name,
// type and help text of kvwatch's metrics is defined here.
#ifndef KVWATCH_AGENT_METRICS_H_
#define KVWATCH_AGENT_METRICS_H_

#include <prometheus/metric_family.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kvwatch::agent {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Collects families in order; one family per name, samples added to it.
class MetricsBuilder {
 public:
  void Counter(const std::string& name, const std::string& help, double value, const Labels& labels = {});
  void Gauge(const std::string& name, const std::string& help, double value, const Labels& labels = {});
  // Buckets: (upper bound, cumulative count); +Inf (= count) is appended.
  void Histogram(const std::string& name, const std::string& help,
                 const std::vector<std::pair<double, std::uint64_t>>& buckets, std::uint64_t count, double sum,
                 const Labels& labels = {});

  // Adds process_* metrics read from /proc/self (Linux).
  void ProcessMetrics();

  std::string Serialize() const;
  const std::vector<prometheus::MetricFamily>& families() const { return families_; }

 private:
  prometheus::ClientMetric& Add(const std::string& name, const std::string& help, prometheus::MetricType type,
                                const Labels& labels);
  std::vector<prometheus::MetricFamily> families_;
};

}  // namespace kvwatch::agent

#endif  // KVWATCH_AGENT_METRICS_H_
