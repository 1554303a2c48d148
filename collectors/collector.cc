#include "collectors/collector.h"

#include <chrono>

#include "collectors/file_tailer.h"

namespace kvwatch::collectors {

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
