// TraceFileCollector: tails JSON Lines request records (the shapes `kvwatch
// replay` reads) from paths or globs, with rotation, truncation and checkpoints
// handled by FileTailer, and parses each line with TraceRecordParser.
//
// Errors by reason: "bad_record" (a line that is not a request record),
// "future_timestamp" (a timestamp more than max_clock_skew_s ahead of the wall
// clock: one such record would move the windows' clock past every later record),
// "bad_timestamp" (negative or not finite; collectors/time_sanity.h),
// "line_too_long", "read_error", "checkpoint_error". A bad record is logged with
// the path of the file it came from and its line number, and not handed on. "dropped" counts loss events
// the tailer reports (bytes written and truncated away between two reads, as
// copytruncate can do); each is logged with its byte count.
//
// State: with the agent's state file (state.path) the tailer's positions are
// committed in the same atomic step as the curves (AppendState), so a restart
// counts every line once; see docs/guarantees.md for each rotation mode.
#ifndef KVWATCH_COLLECTORS_TRACE_FILE_COLLECTOR_H_
#define KVWATCH_COLLECTORS_TRACE_FILE_COLLECTOR_H_

#include <memory>
#include <string>

#include "collectors/collector.h"
#include "collectors/collector_options.h"  // TraceFileCollectorOptions
#include "collectors/file_tailer.h"
#include "collectors/trace_record.h"

namespace kvwatch::collectors {

class TraceFileCollector : public Collector {
 public:
  static base::Result<std::unique_ptr<TraceFileCollector>> Create(TraceFileCollectorOptions options, CollectorLog log);

  const std::string& name() const override { return options_.name; }
  std::string_view kind() const override { return "trace_file"; }
  std::chrono::milliseconds poll_interval() const override { return options_.poll_interval; }
  void Poll(RequestSink& sink, double wall_now_s) override;
  base::Status Checkpoint() override { return tailer_->Checkpoint(); }
  // The tailer's positions (FileTailer::SavePositions), for the agent's state file.
  void AppendState(std::vector<std::uint8_t>* out) const override;
  base::Status RestoreState(std::span<const std::uint8_t> in) override;
  // After the tailer opened a file (and read it: the same poll) or saw a rotation,
  // truncation or deletion: positions saved soon keep a restart from having to
  // find files that have moved on since, and a file's first lines from being
  // counted as unread rotations should it be rotated while the agent is down.
  bool WantsSave() const override { return save_wanted_; }
  int NotifyFd() const override { return tailer_->NotifyFd(); }
  CollectorStats stats() const override { return stats_; }

 private:
  TraceFileCollector(TraceFileCollectorOptions options, std::unique_ptr<FileTailer> tailer, CollectorLog log);

  TraceFileCollectorOptions options_;
  std::unique_ptr<FileTailer> tailer_;
  TraceRecordParser parser_;
  RateLimitedLog log_;  // bad input: the counters keep the totals
  curve::Request request_;
  CollectorStats stats_;
  mutable bool save_wanted_ = false;  // since the last AppendState
};

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_TRACE_FILE_COLLECTOR_H_
