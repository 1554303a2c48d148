#include "collectors/collector.h"

#include <chrono>
#include <utility>

#include "base/byte_io.h"
#include "collectors/file_tailer.h"

namespace kvwatch::collectors {

double WallNow() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

namespace {

void AppendCounts(const std::map<std::string, std::uint64_t>& counts, std::vector<std::uint8_t>* out) {
  base::AppendPod<std::uint32_t>(out, static_cast<std::uint32_t>(counts.size()));
  for (const auto& [name, n] : counts) {
    base::AppendPod<std::uint32_t>(out, static_cast<std::uint32_t>(name.size()));
    out->insert(out->end(), name.begin(), name.end());
    base::AppendPod(out, n);
  }
}

bool ReadCounts(std::span<const std::uint8_t>* in, std::map<std::string, std::uint64_t>* counts) {
  constexpr std::uint32_t kMaxReasons = 1024;  // reasons are a short fixed vocabulary
  constexpr std::uint32_t kMaxReasonBytes = 256;
  std::uint32_t n = 0;
  if (!base::ReadPod(in, &n) || n > kMaxReasons) return false;
  counts->clear();
  for (std::uint32_t i = 0; i < n; ++i) {
    std::uint32_t len = 0;
    std::uint64_t value = 0;
    if (!base::ReadPod(in, &len) || len > kMaxReasonBytes || len > in->size()) return false;
    std::string name(reinterpret_cast<const char*>(in->data()), len);
    *in = in->subspan(len);
    if (!base::ReadPod(in, &value)) return false;
    (*counts)[std::move(name)] = value;
  }
  return true;
}

}  // namespace

void AppendStats(const CollectorStats& stats, std::vector<std::uint8_t>* out) {
  base::AppendPod(out, stats.records);
  base::AppendPod(out, stats.dropped);
  AppendCounts(stats.dropped_by, out);
  AppendCounts(stats.errors, out);
}

bool ReadStats(std::span<const std::uint8_t>* in, CollectorStats* stats) {
  CollectorStats s;
  if (!base::ReadPod(in, &s.records) || !base::ReadPod(in, &s.dropped) || !ReadCounts(in, &s.dropped_by) ||
      !ReadCounts(in, &s.errors)) {
    return false;
  }
  stats->records = s.records;
  stats->dropped = s.dropped;
  stats->dropped_by = std::move(s.dropped_by);
  stats->errors = std::move(s.errors);
  return true;
}

bool CountTailEvent(const TailEvent& e, CollectorStats* stats, RateLimitedLog& log) {
  switch (e.kind) {
    case TailEventKind::kLineTooLong:
      ++stats->errors["line_too_long"];
      break;
    case TailEventKind::kReadError:
      ++stats->errors["read_error"];
      break;
    case TailEventKind::kLostBytes:  // bytes, whose records cannot be counted: one loss event
      ++stats->dropped;
      ++stats->dropped_by["lost_bytes"];
      break;
    case TailEventKind::kUnreadRotation:  // count = its records
      stats->dropped += e.count;
      stats->dropped_by["unread_rotation"] += e.count;
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
