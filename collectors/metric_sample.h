// MetricSample: one sample a collector contributes to /metrics, of a family
// declared in a table (base::MetricDef). Apart from collector.h so that the
// engine signals (engine_signals.h), which collector.h includes, can make samples
// without including collector.h back.
//
// Thread safety: plain values and a pure function.
#ifndef KVWATCH_COLLECTORS_METRIC_SAMPLE_H_
#define KVWATCH_COLLECTORS_METRIC_SAMPLE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/metric_def.h"

namespace kvwatch::collectors {

using Labels = std::vector<std::pair<std::string, std::string>>;

// A metric a collector contributes to /metrics beyond its CollectorStats (for
// example the engine's eviction counters read from its KV events), a sample of a
// family declared in a table (base::MetricDef: the engine signals' in
// engine_signals.h, each collector's own in its .cc). Names follow the Prometheus
// conventions (kvwatch_ prefix, base units, _total for counters); labels stay
// low-cardinality.
struct MetricSample {
  std::string name;
  std::string help;
  bool counter = false;  // false: gauge (or a histogram, below)
  Labels labels;
  double value = 0;  // a histogram's sum
  // A histogram (an engine's, re-exported): (upper bound, cumulative count) per
  // bucket, the +Inf bucket excluded (it is `count`); histogram false: none.
  bool histogram = false;
  std::vector<std::pair<double, std::uint64_t>> buckets;
  std::uint64_t count = 0;
};

// A sample of `def` labelled collector=<collector> + extra.
MetricSample MakeSample(const base::MetricDef& def, const std::string& collector, double value, Labels extra = {});
// A histogram sample of `def` (a kHistogram family) labelled collector=<collector>:
// buckets (upper bound, cumulative count) with any +Inf bucket left out, count, sum.
MetricSample MakeHistogramSample(const base::MetricDef& def, const std::string& collector,
                                 std::vector<std::pair<double, std::uint64_t>> buckets, std::uint64_t count,
                                 double sum);

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_METRIC_SAMPLE_H_
