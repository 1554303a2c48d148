// Collector: a source of requests for the live agent (a tailed trace file, the
// built-in synthetic replica, an engine's KV events), polled by the agent's event
// loop, reporting on itself.
//
// A collector turns bytes into curve::Request values and hands them to a
// RequestSink; it never touches the engine, metrics or HTTP. Bad input is counted
// by reason (a short, fixed, low-cardinality word such as "bad_record" or
// "line_too_long") and logged with where it was found; it never stops a collector.
//
// Thread safety: a collector is used by one thread (the agent's loop); stats(),
// engine_signals() and AppendSamples() are read there too, after each Poll, and
// the agent hands copies to its scrapes and the alerter.
#ifndef KVWATCH_COLLECTORS_COLLECTOR_H_
#define KVWATCH_COLLECTORS_COLLECTOR_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/metric_def.h"
#include "base/status.h"
#include "collectors/engine_signals.h"
#include "collectors/metric_sample.h"
#include "collectors/time_sanity.h"
#include "curve/request.h"

namespace kvwatch::collectors {

class RequestSink {
 public:
  virtual ~RequestSink() = default;
  // request.timestamp_s is the record's own time when the source gives one.
  virtual void OnRequest(const curve::Request& request) = 0;
};

// What a collector says about itself: the agent exports these as
// kvwatch_collector_* metrics.
struct CollectorStats {
  bool up = false;                              // the source is reachable and read
  std::uint64_t records = 0;                    // requests handed to the sink
  std::map<std::string, std::uint64_t> errors;  // by reason
  std::uint64_t dropped = 0;                    // records lost where the loss is known (the total)
  // The part of `dropped` whose reason is known, by reason ("unread_rotation",
  // "lost_bytes", ...); the rest is exported with reason "lost".
  std::map<std::string, std::uint64_t> dropped_by;
  double last_success_s = 0;  // wall time of the last good read; 0: never
};

// Log lines about bad input go through this (the agent prints them to stderr).
using CollectorLog = std::function<void(std::string_view collector, std::string_view message)>;

// A collector's log of bad input with its rate limit: the first 100 messages,
// then every 1000th, so a flood of bad lines cannot flood stderr.
class RateLimitedLog {
 public:
  RateLimitedLog(std::string collector, CollectorLog log) : collector_(std::move(collector)), log_(std::move(log)) {}
  void operator()(std::string_view message) {
    const std::uint64_t n = logged_++;
    if (log_ && (n < kFirst || n % kEvery == 0)) log_(collector_, message);
  }

 private:
  static constexpr std::uint64_t kFirst = 100;
  static constexpr std::uint64_t kEvery = 1000;
  std::string collector_;
  CollectorLog log_;
  std::uint64_t logged_ = 0;
};

// Seconds since the Unix epoch, from the system clock.
double WallNow();

// The counters of `stats` (records, errors, dropped, not up or last success)
// appended to / read from a collector's part of the agent's state file, so that
// they continue across restarts exactly as the curves do. ReadStats: false when
// the bytes are malformed (counts are bounded before anything is allocated).
void AppendStats(const CollectorStats& stats, std::vector<std::uint8_t>* out);
bool ReadStats(std::span<const std::uint8_t>* in, CollectorStats* stats);

struct TailEvent;  // collectors/file_tailer.h
// The stats every file-tailing collector keeps from its tailer's events: errors
// line_too_long, read_error and checkpoint_error by reason, lost bytes as dropped,
// each logged with its file. Returns whether e is a read error (the collector is
// then down until a poll without one).
bool CountTailEvent(const TailEvent& e, CollectorStats* stats, RateLimitedLog& log);

class Collector {
 public:
  virtual ~Collector() = default;

  // The collector's configured name: a low-cardinality label.
  virtual const std::string& name() const = 0;
  // The kind, as in the config: "synth", "trace_file", ...
  virtual std::string_view kind() const = 0;
  // How often the agent polls it.
  virtual std::chrono::milliseconds poll_interval() const = 0;
  // Reads what is available now; wall_now_s is the current wall time.
  virtual void Poll(RequestSink& sink, double wall_now_s) = 0;
  // Persists positions (files) so a restart neither loses nor repeats records.
  virtual base::Status Checkpoint() { return base::Status::Ok(); }

  // The collector's part of the agent's state file (agent/runtime/state_file.h):
  // its positions, and whatever else must be restored with them so that each
  // record is counted exactly once (the KV-event collector's last sequence number
  // per publisher and its block state). The agent calls it on the loop thread
  // between polls, with every request of the last poll already ingested, and
  // commits these bytes in the same atomic step as the curves they led to.
  // Default: nothing to keep.
  virtual void AppendState(std::vector<std::uint8_t>* out) const {}
  // Restores what AppendState wrote, before the first Poll. An error says what is
  // wrong with the bytes; the agent then sets the whole state file aside and
  // starts fresh. Default: accepts only an empty part.
  virtual base::Status RestoreState(std::span<const std::uint8_t> in) {
    return in.empty() ? base::Status::Ok() : base::Status::Error("unexpected collector state");
  }
  // True when something happened since the last AppendState that makes an early
  // save worthwhile (the tailer saw a rotation, a publisher restarted): the agent
  // then saves sooner than state.interval (rate-limited).
  virtual bool WantsSave() const { return false; }
  // A file descriptor that becomes readable when there is something to poll, or
  // -1 (the agent then polls on the interval only).
  virtual int NotifyFd() const { return -1; }

  virtual CollectorStats stats() const = 0;
  // What the collector knows of the engine (nothing by default).
  virtual EngineSignals engine_signals() const { return {}; }
  // Appends this collector's metrics: its engine signals' samples
  // (engine_signals.h) and its own (none by default).
  virtual void AppendSamples(std::vector<MetricSample>* out) const {}
};

}  // namespace kvwatch::collectors

#endif  // KVWATCH_COLLECTORS_COLLECTOR_H_
