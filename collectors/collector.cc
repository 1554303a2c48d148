#include "collectors/collector.h"

#include <chrono>
#include <utility>

#include "collectors/file_tailer.h"

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

double WallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool CountTailEvent(const TailEvent& e, CollectorStats* stats, RateLimitedLog& log) {
  switch (e.kind) {
    case TailEventKind::kLineTooLong:
      ++stats->errors["line_too_long"];
      break;
    case TailEventKind::kReadError:
      ++stats->errors["read_error"];
      break;
    case TailEventKind::kLostBytes:
      ++stats->dropped;
      break;
    case TailEventKind::kCheckpointError:
      ++stats->errors["checkpoint_error"];
      break;
    default:
      return false;  // opened, rotated, truncated, deleted, closed: not problems
  }
  log(e.path + ": " + e.message);
  return e.kind == TailEventKind::kReadError;
}

}  // namespace kvwatch::collectors
