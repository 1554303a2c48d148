#include "collectors/trace_file_collector.h"

#include <string>

namespace kvwatch::collectors {
namespace {

// Past this many logged problems, only every 1000th is logged: the counters keep
// the totals, and a flood of garbage must not flood the log.
constexpr std::uint64_t kLogEvery = 1000;
constexpr std::uint64_t kLogFirst = 100;

}  // namespace

curve::Result<std::unique_ptr<TraceFileCollector>> TraceFileCollector::Create(TraceFileCollectorOptions options,
                                                                              CollectorLog log) {
  auto tailer = FileTailer::Create(options.tailer);
  if (!tailer.ok()) return curve::Result<std::unique_ptr<TraceFileCollector>>::Error(tailer.error());
  return std::unique_ptr<TraceFileCollector>(
      new TraceFileCollector(std::move(options), std::move(tailer).value(), std::move(log)));
}

TraceFileCollector::TraceFileCollector(TraceFileCollectorOptions options, std::unique_ptr<FileTailer> tailer,
                                       CollectorLog log)
    : options_(std::move(options)), tailer_(std::move(tailer)), parser_(options_.record), log_(std::move(log)) {}

void TraceFileCollector::Poll(RequestSink& sink, double wall_now_s) {
  auto log = [&](const std::string& message) {
    const std::uint64_t n = logged_errors_++;
    if (log_ && (n < kLogFirst || n % kLogEvery == 0)) log_(options_.name, message);
  };
  std::string current_path;
  TailCallbacks callbacks;
  callbacks.on_line = [&](std::string_view source, std::uint64_t line_number, std::string_view line) {
    auto parsed = parser_.Parse(line, &request_);
    if (!parsed.ok()) {
      ++stats_.errors["bad_record"];
      log(std::string(source) + ":" + std::to_string(line_number) + ": " + parsed.error());
      return;
    }
    if (parsed.value() == ParseOutcome::kBlank) return;
    sink.OnRequest(request_);
    ++stats_.records;
    stats_.last_success_s = wall_now_s;
  };
  bool read_error = false;
  callbacks.on_event = [&](const TailEvent& e) {
    switch (e.kind) {
      case TailEventKind::kLineTooLong:
        ++stats_.errors["line_too_long"];
        log(e.path + ": " + e.message);
        break;
      case TailEventKind::kReadError:
        ++stats_.errors["read_error"];
        read_error = true;
        log(e.path + ": " + e.message);
        break;
      case TailEventKind::kLostBytes:
        ++stats_.dropped;
        log(e.path + ": " + e.message);
        break;
      case TailEventKind::kCheckpointError:
        ++stats_.errors["checkpoint_error"];
        log(e.path + ": " + e.message);
        break;
      default:
        break;
    }
  };
  const TailPollSummary summary = tailer_->Poll(callbacks);
  // Up while the tailer reads without errors (no file yet is not an error: the
  // collector waits for it, as tail -F does).
  stats_.up = !read_error;
  (void)summary;
}

}  // namespace kvwatch::collectors
