#include "collectors/trace_file_collector.h"

#include <iomanip>
#include <sstream>
#include <string>

#include "base/byte_io.h"

namespace kvwatch::collectors {

base::Result<std::unique_ptr<TraceFileCollector>> TraceFileCollector::Create(TraceFileCollectorOptions options,
                                                                             CollectorLog log) {
  auto tailer = FileTailer::Create(options.tailer);
  if (!tailer.ok()) return base::Result<std::unique_ptr<TraceFileCollector>>::Error(tailer.error());
  return std::unique_ptr<TraceFileCollector>(
      new TraceFileCollector(std::move(options), std::move(tailer).value(), std::move(log)));
}

TraceFileCollector::TraceFileCollector(TraceFileCollectorOptions options, std::unique_ptr<FileTailer> tailer,
                                       CollectorLog log)
    : options_(std::move(options)),
      tailer_(std::move(tailer)),
      parser_(options_.record),
      log_(options_.name, std::move(log)) {}

void TraceFileCollector::Poll(RequestSink& sink, double wall_now_s) {
  TailCallbacks callbacks;
  callbacks.on_line = [&](std::string_view, std::string_view path, std::uint64_t line_number, std::string_view line) {
    auto bad = [&](std::string_view reason, const std::string& message) {
      ++stats_.errors[std::string(reason)];
      log_(std::string(path) + ":" + std::to_string(line_number) + ": " + message);
    };
    auto parsed = parser_.Parse(line, &request_);
    if (!parsed.ok()) return bad("bad_record", parsed.error());
    if (parsed.value() == ParseOutcome::kBlank) return;
    if (request_.has_timestamp()) {
      const TimestampVerdict verdict = CheckTimestamp(request_.timestamp_s, wall_now_s, options_.max_clock_skew_s);
      if (verdict != TimestampVerdict::kOk) {
        std::ostringstream message;
        message << std::setprecision(17) << "timestamp " << request_.timestamp_s << " s is ";
        if (verdict == TimestampVerdict::kFuture) {
          message << request_.timestamp_s - wall_now_s << " s ahead of the clock (curve.max_clock_skew "
                  << options_.max_clock_skew_s << " s); record skipped";
        } else {
          message << "negative or not finite; record skipped";
        }
        return bad(TimestampReason(verdict), message.str());
      }
    }
    sink.OnRequest(request_);
    ++stats_.records;
    stats_.last_success_s = wall_now_s;
  };
  bool read_error = false;
  callbacks.on_event = [&](const TailEvent& e) {
    if (e.kind == TailEventKind::kOpened || e.kind == TailEventKind::kRotated || e.kind == TailEventKind::kTruncated ||
        e.kind == TailEventKind::kDeleted || e.kind == TailEventKind::kClosed) {
      save_wanted_ = true;
    }
    read_error = CountTailEvent(e, &stats_, log_) || read_error;
  };
  const TailPollSummary summary = tailer_->Poll(callbacks);
  // Up while the tailer reads without errors (no file yet is not an error: the
  // collector waits for it, as tail -F does).
  stats_.up = !read_error;
  (void)summary;
}

// The collector's part of the agent's state: a version, its counters (so they
// continue across restarts with the curves they fed), the rotated files already
// counted as unread (so a restart does not count them again), the files it read
// to their end and closed (so a restart does not count them as unread either) and
// the tailer's positions. Version 3 kept no head hash of the unread files (they
// load as matching any content), version 2 no closed files either; both still load.
namespace {
constexpr std::uint32_t kTraceFileStateVersion = 4;
constexpr std::uint32_t kTraceFileStateVersionWithoutHeads = 3;
constexpr std::uint32_t kTraceFileStateVersionWithoutClosed = 2;
}  // namespace

void TraceFileCollector::AppendState(std::vector<std::uint8_t>* out) const {
  base::AppendPod(out, kTraceFileStateVersion);
  AppendStats(stats_, out);
  const auto& unread = tailer_->UnreadReported();
  base::AppendPod<std::uint64_t>(out, unread.size());
  for (const FileTailer::UnreadFile& f : unread) {
    base::AppendPod(out, f.id.first);
    base::AppendPod(out, f.id.second);
    base::AppendPod(out, f.head.len);
    base::AppendPod(out, f.head.hash);
  }
  const std::vector<FileTailer::ClosedFile> closed = tailer_->ClosedRemembered();
  base::AppendPod<std::uint64_t>(out, closed.size());
  for (const FileTailer::ClosedFile& f : closed) {
    base::AppendPod(out, f.id.first);
    base::AppendPod(out, f.id.second);
    base::AppendPod(out, f.mtime_ns);
  }
  const std::string text = tailer_->SavePositions();
  base::AppendPod<std::uint64_t>(out, text.size());
  out->insert(out->end(), text.begin(), text.end());
  save_wanted_ = false;
}

base::Status TraceFileCollector::RestoreState(std::span<const std::uint8_t> in) {
  std::uint32_t version = 0;
  std::uint64_t len = 0;
  CollectorStats stats;
  if (!base::ReadPod(&in, &version)) return base::Status::Error("truncated");
  if (version != kTraceFileStateVersion && version != kTraceFileStateVersionWithoutHeads &&
      version != kTraceFileStateVersionWithoutClosed) {
    return base::Status::Error("version " + std::to_string(version));
  }
  const bool heads = version >= kTraceFileStateVersion;
  const std::uint64_t unread_bytes = heads ? 28 : 16;
  std::uint64_t n_unread = 0;
  if (!ReadStats(&in, &stats) || !base::ReadPod(&in, &n_unread) || n_unread > FileTailer::kMaxUnreadReported ||
      n_unread * unread_bytes > in.size()) {
    return base::Status::Error("malformed counters");
  }
  std::vector<FileTailer::UnreadFile> unread(n_unread);
  for (FileTailer::UnreadFile& f : unread) {
    if (!base::ReadPod(&in, &f.id.first) || !base::ReadPod(&in, &f.id.second) ||
        (heads && (!base::ReadPod(&in, &f.head.len) || !base::ReadPod(&in, &f.head.hash)))) {
      return base::Status::Error("malformed counters");
    }
  }
  std::vector<FileTailer::ClosedFile> closed;
  if (version >= kTraceFileStateVersionWithoutHeads) {
    std::uint64_t n_closed = 0;
    if (!base::ReadPod(&in, &n_closed) || n_closed > FileTailer::kMaxClosedRemembered || n_closed * 24 > in.size()) {
      return base::Status::Error("malformed closed files");
    }
    closed.resize(n_closed);
    for (FileTailer::ClosedFile& f : closed) {
      if (!base::ReadPod(&in, &f.id.first) || !base::ReadPod(&in, &f.id.second) || !base::ReadPod(&in, &f.mtime_ns)) {
        return base::Status::Error("malformed closed files");
      }
    }
  }
  if (!base::ReadPod(&in, &len) || len != in.size()) return base::Status::Error("malformed positions");
  base::Status s = tailer_->RestorePositions(std::string_view(reinterpret_cast<const char*>(in.data()), in.size()));
  if (!s.ok()) return s;
  tailer_->RestoreUnreadReported(std::move(unread));
  tailer_->RestoreClosedRemembered(std::move(closed));
  stats_.records = stats.records;
  stats_.dropped = stats.dropped;
  stats_.dropped_by = std::move(stats.dropped_by);
  stats_.errors = std::move(stats.errors);
  return base::Status::Ok();
}

}  // namespace kvwatch::collectors
