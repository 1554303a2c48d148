#include "agent/runtime/metrics.h"

#include <dirent.h>
#include <prometheus/text_serializer.h>
#include <unistd.h>

#include <cassert>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

namespace kvwatch::agent {

namespace {

using base::MetricType;

// The process_* families (the names and help texts of the Prometheus client
// libraries' process collectors).
constexpr base::MetricDef kProcessCpu{"process_cpu_seconds_total", MetricType::kCounter,
                                      "Total user and system CPU time spent in seconds."};
constexpr base::MetricDef kProcessVirtual{"process_virtual_memory_bytes", MetricType::kGauge,
                                          "Virtual memory size in bytes."};
constexpr base::MetricDef kProcessResident{"process_resident_memory_bytes", MetricType::kGauge,
                                           "Resident memory size in bytes."};
constexpr base::MetricDef kProcessStart{"process_start_time_seconds", MetricType::kGauge,
                                        "Start time of the process since unix epoch in seconds."};
constexpr base::MetricDef kProcessFds{"process_open_fds", MetricType::kGauge, "Number of open file descriptors."};

prometheus::MetricType PrometheusType(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return prometheus::MetricType::Counter;
    case MetricType::kHistogram:
      return prometheus::MetricType::Histogram;
    default:
      return prometheus::MetricType::Gauge;
  }
}

// Whether the labels are named as the table says (def.labels, in order).
[[maybe_unused]] bool LabelsMatch(const base::MetricDef& def, const Labels& labels) {
  if (def.labels == "*") return true;
  std::string names;
  for (const auto& [k, v] : labels) names += (names.empty() ? "" : ",") + k;
  return names == def.labels;
}

}  // namespace

base::MetricDefs ProcessMetricDefs() {
  return {&kProcessCpu, &kProcessVirtual, &kProcessResident, &kProcessStart, &kProcessFds};
}

prometheus::ClientMetric& MetricsBuilder::Family(const base::MetricDef& def, const Labels& labels) {
  assert(LabelsMatch(def, labels));
  prometheus::MetricFamily* family = nullptr;
  for (auto& f : families_) {
    if (f.name == def.name) family = &f;
  }
  if (family == nullptr) {
    families_.push_back(
        prometheus::MetricFamily{std::string(def.name), std::string(def.help), PrometheusType(def.type), {}});
    family = &families_.back();
  }
  family->metric.emplace_back();
  prometheus::ClientMetric& m = family->metric.back();
  for (const auto& [k, v] : labels) m.label.push_back({k, v});
  return m;
}

void MetricsBuilder::Add(const base::MetricDef& def, double value, const Labels& labels) {
  prometheus::ClientMetric& m = Family(def, labels);
  if (def.type == MetricType::kCounter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
}

void MetricsBuilder::Histogram(const base::MetricDef& def, const std::vector<std::pair<double, std::uint64_t>>& buckets,
                               std::uint64_t count, double sum, const Labels& labels) {
  prometheus::ClientMetric& m = Family(def, labels);
  m.histogram.sample_count = count;
  m.histogram.sample_sum = sum;
  for (const auto& [bound, cumulative] : buckets) m.histogram.bucket.push_back({cumulative, bound});
  m.histogram.bucket.push_back({count, std::numeric_limits<double>::infinity()});
}

void MetricsBuilder::ProcessMetrics() {
  // /proc/self/stat: utime and stime (fields 14, 15) in clock ticks, starttime
  // (22) in ticks since boot, vsize (23) in bytes, rss (24) in pages.
  std::ifstream stat("/proc/self/stat");
  std::string line;
  if (!std::getline(stat, line)) return;
  const std::size_t close = line.rfind(')');
  if (close == std::string::npos) return;
  std::istringstream fields(line.substr(close + 2));
  std::vector<std::string> f;
  for (std::string s; fields >> s;) f.push_back(s);
  if (f.size() < 22) return;  // f[0] is field 3
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  Add(kProcessCpu, (std::stod(f[11]) + std::stod(f[12])) / ticks);
  Add(kProcessVirtual, std::stod(f[20]));
  Add(kProcessResident, std::stod(f[21]) * page);
  double boot_time = 0;
  std::ifstream proc_stat("/proc/stat");
  for (std::string l; std::getline(proc_stat, l);) {
    if (l.rfind("btime ", 0) == 0) boot_time = std::stod(l.substr(6));
  }
  Add(kProcessStart, boot_time + std::stod(f[19]) / ticks);
  if (DIR* dir = opendir("/proc/self/fd")) {
    double fds = 0;
    while (dirent* e = readdir(dir)) {
      if (e->d_name[0] != '.') ++fds;
    }
    closedir(dir);
    Add(kProcessFds, fds - 1);  // minus the one reading
  }
}

std::string MetricsBuilder::Serialize() const { return prometheus::TextSerializer().Serialize(families_); }

}  // namespace kvwatch::agent
