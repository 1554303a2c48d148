#include "collectors/synth_collector.h"

namespace kvwatch::collectors {

base::Result<std::unique_ptr<SynthCollector>> SynthCollector::Create(std::string name, SynthOptions options,
                                                                     double start_wall_s) {
  auto generator = SynthGenerator::Create(std::move(options));
  if (!generator.ok()) return base::Result<std::unique_ptr<SynthCollector>>::Error(generator.error());
  return std::unique_ptr<SynthCollector>(
      new SynthCollector(std::move(name), std::move(generator).value(), start_wall_s));
}

SynthCollector::SynthCollector(std::string name, SynthGenerator generator, double start_wall_s)
    : name_(std::move(name)), generator_(std::move(generator)), start_wall_s_(start_wall_s) {
  stats_.up = true;
}

void SynthCollector::Poll(RequestSink& sink, double wall_now_s) {
  const double due = wall_now_s - start_wall_s_;
  while (!finished_) {
    if (!has_pending_) {
      if (!generator_.Next(&pending_)) {
        finished_ = true;
        break;
      }
      has_pending_ = true;
    }
    if (pending_.request.timestamp_s > due) break;
    pending_.request.timestamp_s += start_wall_s_;
    sink.OnRequest(pending_.request);
    has_pending_ = false;
    ++stats_.records;
    stats_.last_success_s = wall_now_s;
  }
}

}  // namespace kvwatch::collectors
