#include "collectors/trace_file_collector.h"

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
  std::string current_path;
  TailCallbacks callbacks;
  callbacks.on_line = [&](std::string_view source, std::uint64_t line_number, std::string_view line) {
    auto parsed = parser_.Parse(line, &request_);
    if (!parsed.ok()) {
      ++stats_.errors["bad_record"];
      log_(std::string(source) + ":" + std::to_string(line_number) + ": " + parsed.error());
      return;
    }
    if (parsed.value() == ParseOutcome::kBlank) return;
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
