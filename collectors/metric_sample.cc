#include "collectors/metric_sample.h"

namespace kvwatch::collectors {

MetricSample MakeSample(const base::MetricDef& def, const std::string& collector, double value, Labels extra) {
  MetricSample s;
  s.name = std::string(def.name);
  s.help = std::string(def.help);
  s.counter = def.type == base::MetricType::kCounter;
  s.labels.emplace_back("collector", collector);
  for (auto& l : extra) s.labels.push_back(std::move(l));
  s.value = value;
  return s;
}

MetricSample MakeHistogramSample(const base::MetricDef& def, const std::string& collector,
                                 std::vector<std::pair<double, std::uint64_t>> buckets, std::uint64_t count,
                                 double sum) {
  MetricSample s = MakeSample(def, collector, sum);
  s.histogram = true;
  s.buckets = std::move(buckets);
  s.count = count;
  return s;
}

}  // namespace kvwatch::collectors
