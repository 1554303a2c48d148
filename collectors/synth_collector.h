// SynthCollector: the built-in synthetic replica. It plays `kvwatch synth`'s
// workload (collectors/synth.h) in real time: a request is delivered once the wall
// clock passes its arrival time, stamped with that wall time, so the agent shows
// live curves with no outside data.
#ifndef KVWATCH_COLLECTORS_SYNTH_COLLECTOR_H_
#define KVWATCH_COLLECTORS_SYNTH_COLLECTOR_H_

#include <memory>
#include <string>

#include "collectors/collector.h"
#include "collectors/synth.h"

namespace kvwatch::collectors {

class SynthCollector : public Collector {
 public:
  // options must be unbounded or bounded as wanted (duration_s 0 and max_requests
  // 0: forever). start_wall_s: the wall time of the workload's time 0.
  static base::Result<std::unique_ptr<SynthCollector>> Create(std::string name, SynthOptions options,
                                                              double start_wall_s);

  const std::string& name() const override { return name_; }
  std::string_view kind() const override { return "synth"; }
  std::chrono::milliseconds poll_interval() const override { return std::chrono::milliseconds(100); }
  void Poll(RequestSink& sink, double wall_now_s) override;
  CollectorStats stats() const override { return stats_; }

 private:
  SynthCollector(std::string name, SynthGenerator generator, double start_wall_s);

  std::string name_;
  SynthGenerator generator_;
  double start_wall_s_;
  SynthRequest pending_;
  bool has_pending_ = false;
  bool finished_ = false;
  CollectorStats stats_;
};

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_SYNTH_COLLECTOR_H_
