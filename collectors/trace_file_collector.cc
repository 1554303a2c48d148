#include "collectors/trace_file_collector.h"

#include <iomanip>
#include <sstream>
#include <string>

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
    : options_(std::move(options)), tailer_(std::move(tailer)), parser_(options_.record), log_(options_.name, std::move(log)) {}

void TraceFileCollector::Poll(RequestSink& sink, double wall_now_s) {
  TailCallbacks callbacks;
  callbacks.on_line = [&](std::string_view, std::string_view path, std::uint64_t line_number,
                          std::string_view line) {
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
  callbacks.on_event = [&](const TailEvent& e) { read_error = CountTailEvent(e, &stats_, log_) || read_error; };
  const TailPollSummary summary = tailer_->Poll(callbacks);
  // Up while the tailer reads without errors (no file yet is not an error: the
  // collector waits for it, as tail -F does).
  stats_.up = !read_error;
  (void)summary;
}

}  // namespace kvwatch::collectors
