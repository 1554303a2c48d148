#include "agent/runtime/metrics.h"

#include <dirent.h>
#include <prometheus/text_serializer.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

namespace kvwatch::agent {

prometheus::ClientMetric& MetricsBuilder::Add(const std::string& name, const std::string& help,
                                              prometheus::MetricType type, const Labels& labels) {
  prometheus::MetricFamily* family = nullptr;
  for (auto& f : families_) {
    if (f.name == name) family = &f;
  }
  if (family == nullptr) {
    families_.push_back(prometheus::MetricFamily{name, help, type, {}});
    family = &families_.back();
  }
  family->metric.emplace_back();
  prometheus::ClientMetric& m = family->metric.back();
  for (const auto& [k, v] : labels) m.label.push_back({k, v});
  return m;
}

void MetricsBuilder::Counter(const std::string& name, const std::string& help, double value, const Labels& labels) {
  Add(name, help, prometheus::MetricType::Counter, labels).counter.value = value;
}

void MetricsBuilder::Gauge(const std::string& name, const std::string& help, double value, const Labels& labels) {
  Add(name, help, prometheus::MetricType::Gauge, labels).gauge.value = value;
}

void MetricsBuilder::Histogram(const std::string& name, const std::string& help,
                               const std::vector<std::pair<double, std::uint64_t>>& buckets, std::uint64_t count,
                               double sum, const Labels& labels) {
  prometheus::ClientMetric& m = Add(name, help, prometheus::MetricType::Histogram, labels);
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
  Counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
          (std::stod(f[11]) + std::stod(f[12])) / ticks);
  Gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", std::stod(f[20]));
  Gauge("process_resident_memory_bytes", "Resident memory size in bytes.", std::stod(f[21]) * page);
  double boot_time = 0;
  std::ifstream proc_stat("/proc/stat");
  for (std::string l; std::getline(proc_stat, l);) {
    if (l.rfind("btime ", 0) == 0) boot_time = std::stod(l.substr(6));
  }
  Gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
        boot_time + std::stod(f[19]) / ticks);
  if (DIR* dir = opendir("/proc/self/fd")) {
    double fds = 0;
    while (dirent* e = readdir(dir)) {
      if (e->d_name[0] != '.') ++fds;
    }
    closedir(dir);
    Gauge("process_open_fds", "Number of open file descriptors.", fds - 1);  // minus the one reading
  }
}

std::string MetricsBuilder::Serialize() const { return prometheus::TextSerializer().Serialize(families_); }

}  // namespace kvwatch::agent
